#!/usr/bin/env bash
# Session 5, final GPU call A: the whole GPU test suite, the feature benchmark (the cases
# the forward descriptors change) and the decode benchmark (read-only L2 flush, the
# zeroing flush beside it).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
timeout 200 python -m pytest tests -o addopts="" -v -rf --tb=short -p no:warnings -p no:benchmark -n 10 --timeout 150 \
  -k "not cpu" > $OUT/pytest-gpu.txt 2>&1
echo "pytest rc=$?"; grep -E "^FAILED|^ERROR" $OUT/pytest-gpu.txt | head -20; tail -1 $OUT/pytest-gpu.txt
timeout 110 python -m flashtriton.bench.features --cases window dropout --out $OUT 2>&1 | grep -v Warning \
  | grep -E "^\| (window|dropout)|Error|error" | cut -c1-200
timeout 240 python -m flashtriton.bench.decode --out $OUT 2>&1 | grep -v Warning | grep -E "^\| (1|8|32|128) \|" | head -40
