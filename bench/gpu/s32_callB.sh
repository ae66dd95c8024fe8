#!/usr/bin/env bash
# Session 32, call B (~8.5 min): the whole GPU suite with D = 256's forward routed (Gluon, plain from
# 2k, causal from 4k) and D = 128's causal forward from 2k; it also runs session 31's offline
# test_flash_attn_func_takes_routed_window_form_gpu for the first time. Then the grid's D = 128
# causal rows at 1k-4k, bf16 and fp16, to check the 2k route (rule in bench/NOTES.md "Next GPU
# session (32)", item 4: keep it if ours / cuDNN at 2k gains >= 1% over prefill.md's 0.90 / fp16's).
# (Session 31's ncu call B moved to s32_callD.sh.)
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
R=$OUT/s32; mkdir -p $R
L=$R/callB.log
step() { echo "== $1 $(date -u +%H:%M:%S)" >> $L; shift; "$@" 2>&1 | grep -v Warn >> $L; }
OUT=$R step "tests" timeout 470 bash bench/gpu/tests.sh
step "grid D=128 causal 1k-4k bf16" timeout 50 python -m flashtriton bench --suite prefill --out $R/g128c -- \
  --head-dims 128 --causal yes --seqlens 1024 2048 4096 --tag g128c
step "grid D=128 causal 1k-4k fp16" timeout 50 python -m flashtriton bench --suite prefill --out $R/g128c16 -- \
  --head-dims 128 --causal yes --seqlens 1024 2048 4096 --dtypes float16 --tag g128c16
echo "== end $(date -u +%H:%M:%S)" >> $L
tail -c 6000 $L
cat $R/g128c/*.md $R/g128c16/*.md 2>/dev/null | head -60
cd $OUT && tar czf s32-callB.tgz s32
