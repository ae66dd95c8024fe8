#!/usr/bin/env bash
# Session 9, call 4 (final): dropout forward timing (fwd.py against the warp-specialized
# forward with its keys hashed in the kernel), the feature benchmark's window and dropout
# rows, the GPU suite, then the D = 256 prefill grid (causal and windows now specialized).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
TIMING_ONLY=1 timeout 60 python bench/gpu/s9_dropout_fwd.py 2>&1 | grep -v Warn | tee $OUT/s9-dropout-fwd-timing.txt
timeout 150 python -m flashtriton.bench.features --cases window dropout --out $OUT 2>&1 | grep -v Warn | tail -20
timeout 200 python -m pytest tests -o addopts="" -q -rf --tb=short -p no:warnings -p no:benchmark -n 10 --timeout 150 \
  -k "not cpu" > $OUT/pytest-gpu.txt 2>&1
echo "pytest rc=$?"; grep -E "^FAILED|^ERROR" $OUT/pytest-gpu.txt | head -20; tail -1 $OUT/pytest-gpu.txt
timeout 165 python -m flashtriton bench --suite prefill --out $OUT -- --head-dims 256 --no-flex --graph-upto 2048 --tag prefill-d256 2>&1 | grep -v Warn | tail -12
