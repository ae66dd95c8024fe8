#!/usr/bin/env bash
# Session 27, call 2 (prepared in session 26; ~9 min): the whole GPU suite (after session
# 26's last suite run came the fused backward's causal-512 route, LEAN_KEEP, the kvcache
# check kernel, the strided-index copies, the varlen-dropout rule fix, the tiny-p fused
# dropout test; and call 1's decisions), then the grid rows at 512 / 1k / 2k (D = 64 /
# 128: the fused backward now takes causal 512). Then, in call 3, the decode table
# (`python -m flashtriton.bench.decode --out $OUT/decode --no-variants`).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
R=$OUT/s27; mkdir -p $R
L=$R/call2.log
step() { echo "== $1 $(date -u +%H:%M:%S)" >> $L; shift; "$@" 2>&1 | grep -v Warn >> $L; }
OUT=$R step "tests" timeout 390 bash bench/gpu/tests.sh
step "grid D=128 short" timeout 80 python -m flashtriton bench --suite prefill --out $R -- --head-dims 128 \
  --causal both --seqlens 512 1024 2048 --tag s27-d128-short
step "grid D=64 short" timeout 80 python -m flashtriton bench --suite prefill --out $R -- --head-dims 64 \
  --causal both --seqlens 512 1024 2048 --tag s27-d64-short
echo "== end $(date -u +%H:%M:%S)" >> $L
tail -c 6000 $L
cd $OUT && tar czf s27-call2.tgz s27
