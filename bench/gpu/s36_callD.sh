#!/usr/bin/env bash
# Session 36, call D (after routing GLUON_BWD_FUSED_BAND): the D = 128 causal grid rows, bf16 then fp16,
# then the fused / route GPU tests. Raw JSON under $OUT (merge locally).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
L=$OUT/callD.log
step() { echo "== $1 $(date -u +%H:%M:%S)" >> $L; shift; "$@" 2>&1 | grep -v Warn >> $L; }
step "grid bf16" timeout 200 python -m flashtriton bench --suite prefill --out $OUT/bf16 -- --head-dims 128 \
  --causal yes --seqlens 512 1024 2048 4096 8192 16384 --tag s36-d128c
step "grid fp16" timeout 200 python -m flashtriton bench --suite prefill --out $OUT/fp16 -- --head-dims 128 \
  --causal yes --seqlens 512 1024 2048 4096 8192 16384 --dtypes float16 --tag s36-d128c-fp16
step "tests" timeout 170 python -m pytest -q -o addopts="" -p no:warnings -n 8 tests/test_bwd_gluon.py \
  tests/test_bwd_gluon_fused_band.py tests/test_prefill.py \
  -k "fused or band or forward_backward or large_shapes or rows_without_keys or softmax_scale"
echo "== end $(date -u +%H:%M:%S)" >> $L
cd $OUT && tar czf grid.tgz bf16 fp16 && rm -rf bf16 fp16
grep -E "^== |rror|passed|failed" $L | tail -20
