#!/usr/bin/env bash
# Final GPU call A: the whole test suite on CUDA, the decode benchmark, fp16 prefill rows.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
set -o pipefail
timeout 330 python -m pytest tests -q -p no:warnings -n 12 2>&1 | tee $OUT/pytest-gpu.txt | grep -v "PytestBenchmarkWarning\|warner(" | tail -25
timeout 200 python -m flashtriton.bench.decode --out $OUT 2>&1 | grep -A18 "Contiguous cache"
timeout 100 python -m flashtriton bench --suite prefill --out $OUT -- --head-dims 128 --dtypes float16 --no-flex --graph-upto 0 --tag prefill-fp16 2>&1 | tail -18
