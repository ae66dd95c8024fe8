#!/usr/bin/env bash
# Session 12, call 3: the small-N backward A/B as CUDA-graph replays (s12_bwd_small_ab.py,
# prediction in its docstring), then the fp16 grid (stale since 2026-11-29 10:16 UTC;
# prediction: fp16 within +-3% of the bf16 rows of the same kernels).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 200 python bench/gpu/s12_bwd_small_ab.py 2>&1 | grep -v Warn | tee $OUT/s12-bwd-small.txt
timeout 330 python -m flashtriton bench --suite prefill --out $OUT -- --head-dims 128 64 256 --dtypes float16 \
  --no-flex --graph-upto 2048 --tag prefill-fp16 2>&1 | grep -v Warning | tail -5
