#!/usr/bin/env bash
# Session 32, call E (~9 min): with the D = 256 fused Gluon backward routed (policy.GLUON_BWD_D256_MIN_N,
# plain 2k / causal 4k) and the D = 256 Gluon forward routed (call A): the route's GPU tests, then
# the grid's D = 256 rows, bf16 all lengths, fp16 at 2k / 4k / 16k (the device time left).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
R=$OUT/s32; mkdir -p $R
L=$R/callE.log
step() { echo "== $1 $(date -u +%H:%M:%S)" >> $L; shift; "$@" 2>&1 | grep -v Warn >> $L; }
step "route GPU tests" timeout 70 python -m pytest -o addopts="" -q -rf -p no:warnings -n 3 --timeout 60 \
  -m gpu tests/test_bwd_gluon_d256.py -k library_route
step "grid D=256 bf16" timeout 270 python -m flashtriton bench --suite prefill --out $R/g256 -- \
  --head-dims 256 --causal both --tag g256
step "grid D=256 fp16" timeout 190 python -m flashtriton bench --suite prefill --out $R/g256f16 -- \
  --head-dims 256 --causal both --seqlens 2048 4096 16384 --dtypes float16 --tag g256f16
echo "== end $(date -u +%H:%M:%S)" >> $L
tail -c 5000 $L
cat $R/g256/*/*.md $R/g256f16/*/*.md 2>/dev/null | head -80
cd $OUT && tar czf s32-callE.tgz s32
