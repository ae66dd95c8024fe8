#!/usr/bin/env bash
# Session 27, call 2 (prepared in session 26; ~9 min): the decode host A/B (layouts
# interleaved; api / replay / raw C launch; TMA against pointer loads), the grid rows at
# 512 / 1k / 2k (D = 64 / 128, the fused backward now takes causal 512), the features'
# dropout case, the decode table. One tar back.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
R=$OUT/s27; mkdir -p $R
L=$R/call2.log
step() { echo "== $1 $(date -u +%H:%M:%S)" >> $L; shift; "$@" 2>&1 | grep -v Warn >> $L; }
step "decode host ab" timeout 90 python bench/gpu/s27_decode_host_ab.py 7 200
step "grid D=128 short" timeout 100 python -m flashtriton bench --suite prefill --out $R -- --head-dims 128 \
  --causal both --seqlens 512 1024 2048 --tag s27-d128-short
step "grid D=64 short" timeout 100 python -m flashtriton bench --suite prefill --out $R -- --head-dims 64 \
  --causal both --seqlens 512 1024 2048 --tag s27-d64-short
step "features dropout" timeout 60 python -m flashtriton.bench.features --cases dropout --out $R/features
step "decode" timeout 170 python -m flashtriton.bench.decode --out $R/decode --no-variants
echo "== end $(date -u +%H:%M:%S)" >> $L
tail -c 6000 $L
cd $OUT && tar czf s27.tgz s27
