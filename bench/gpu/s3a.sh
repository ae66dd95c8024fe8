#!/usr/bin/env bash
# Session 3, GPU call A: the GPU test suite, verbose (names of failures), then the
# feature benchmark (varlen, window, dropout, deterministic, float32). Logs under $OUT.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
timeout 300 python -m pytest tests -v -rf -p no:warnings -p no:benchmark -n 12 -k "not cpu" > $OUT/pytest-gpu.txt 2>&1
echo "pytest rc=$?"
grep -E "^FAILED|^ERROR| (FAILED|ERROR) " $OUT/pytest-gpu.txt | head -40
tail -3 $OUT/pytest-gpu.txt
timeout 260 python -m flashtriton.bench.features --out $OUT 2>&1 | grep -v Warning | tail -60
