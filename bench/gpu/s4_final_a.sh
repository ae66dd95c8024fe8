#!/usr/bin/env bash
# Session 4, final GPU call A: the whole GPU test suite, the feature benchmark (all
# cases) and the decode benchmark, with this session's code.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
timeout 200 python -m pytest tests -o addopts="" -v -rf --tb=short -p no:warnings -p no:benchmark -n 10 --timeout 150 \
  -k "not cpu" > $OUT/pytest-gpu.txt 2>&1
echo "pytest rc=$?"; grep -E "^FAILED|^ERROR" $OUT/pytest-gpu.txt | head -20; tail -1 $OUT/pytest-gpu.txt
timeout 200 python -m flashtriton.bench.features --out $OUT 2>&1 | grep -v Warning | grep -E "^\| (varlen|window|dropout|determ|float32)|Error|error" | cut -c1-200
timeout 170 python -m flashtriton.bench.decode --out $OUT 2>&1 | grep -v Warning | grep -A18 "Contiguous cache" | head -20
