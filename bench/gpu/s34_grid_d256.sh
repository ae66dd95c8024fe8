#!/usr/bin/env bash
# Session 34: the D = 256 grid rows after the split backward's route (policy.GLUON_BWD_D256_SPLIT_DQ),
# bf16 then fp16, every length, both causal modes; raw JSON under $OUT (merge locally).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
L=$OUT/grid.log
step() { echo "== $1 $(date -u +%H:%M:%S)" >> $L; shift; "$@" 2>&1 | grep -v Warn >> $L; }
step "grid bf16" timeout 290 python -m flashtriton bench --suite prefill --out $OUT/bf16 -- --head-dims 256 \
  --causal both --seqlens 512 1024 2048 4096 8192 16384 --tag s34-d256
step "grid fp16" timeout 290 python -m flashtriton bench --suite prefill --out $OUT/fp16 -- --head-dims 256 \
  --causal both --seqlens 512 1024 2048 4096 8192 16384 --dtypes float16 --tag s34-d256-fp16
echo "== end $(date -u +%H:%M:%S)" >> $L
cd $OUT && tar czf grid.tgz bf16 fp16 && rm -rf bf16 fp16
grep -E "^== |rror" $L | tail -20
