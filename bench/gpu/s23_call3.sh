#!/usr/bin/env bash
# Session 23, call 3 (~9 min): the grid with FlexAttention at D = 64 and 256 (its column
# was measured only at D = 128, in session 7), N = 1k / 4k / 16k, every provider side by
# side; then the backward kernel profile for the rows still behind FA2 at D = 64 / 128.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
(cd bench/gpu && timeout 70 python s23_d256_bwd_profile.py 64 512 1024 --causal-only 2>&1 | grep -v Warn \
  | tee $OUT/d64-bwd-profile.txt; timeout 40 python s23_d256_bwd_profile.py 128 512 --causal-only 2>&1 \
  | grep -v Warn | tee $OUT/d128-bwd-profile.txt)
timeout 240 python -m flashtriton bench --suite prefill --out $OUT -- --head-dims 64 \
  --seqlens 1024 4096 16384 --tag s23-flex-d64 2>&1 | grep -v Warn | tail -30
timeout 240 python -m flashtriton bench --suite prefill --out $OUT -- --head-dims 256 \
  --seqlens 1024 4096 16384 --tag s23-flex-d256 2>&1 | grep -v Warn | tail -30
