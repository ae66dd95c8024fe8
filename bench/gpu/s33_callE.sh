#!/usr/bin/env bash
# Session 33, call E (~4 min): with the D = 256 Gluon forward and backward routed from 512 (plain and
# causal; s33/callC): the D = 256 GPU tests (the route tests now run at 512), then the grid's D = 256
# rows at 512 / 1k / 2k bf16 (2k causal predates session 32's routes) and 512 / 1k fp16.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
R=$OUT/s33; mkdir -p $R
L=$R/callE.log
step() { echo "== $1 $(date -u +%H:%M:%S)" >> $L; shift; "$@" 2>&1 | grep -v Warn >> $L; }
step "D = 256 GPU tests" timeout 120 python -m pytest -o addopts="" -q -rf -p no:warnings -n 8 --timeout 90 \
  -m "gpu and not gpu_alone" tests/test_bwd_gluon_d256.py tests/test_fwd_gluon_d256.py
step "grid D=256 bf16" timeout 150 python -m flashtriton bench --suite prefill --out $R/g256 -- \
  --head-dims 256 --causal both --seqlens 512 1024 2048 --tag g256
step "grid D=256 fp16" timeout 110 python -m flashtriton bench --suite prefill --out $R/g256f16 -- \
  --head-dims 256 --causal both --seqlens 512 1024 --dtypes float16 --tag g256f16
echo "== end $(date -u +%H:%M:%S)" >> $L
tail -c 3000 $L
cat $R/g256/*/*.md $R/g256f16/*/*.md 2>/dev/null | head -60
cd $OUT && tar czf s33-callE.tgz s33
