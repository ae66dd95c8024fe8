#!/usr/bin/env bash
# Session 40, first device call (needs bench/wip/gluon-fwd-one-loop.patch applied; reverted after it): ONE_LOOP's GPU tests and A/B (bench/gpu/s40_one_loop.sh), then the grid's warm-up
# check (the first step of bench/gpu/s40_profile.sh: a grid whose first shape is D = 128 non-causal 512; predicted
# within +-4% of the 356 TFLOP/s forward+backward timed later in session 39's grids).
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
bash bench/gpu/s40_one_loop.sh
mkdir -p $OUT/s40
timeout 150 python -m flashtriton bench --suite prefill --out $OUT/s40 -- --head-dims 128 --causal no \
  --seqlens 512 1024 --tag s40-warmup > $OUT/s40/warmup.log 2>&1; echo "warm-up grid rc $?"
rm -f $OUT/s40/nvidia-h200/*.png
grep -E "^\| (512|1024) " $OUT/s40/nvidia-h200/s40-warmup.md
