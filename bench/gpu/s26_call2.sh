#!/usr/bin/env bash
# Session 26, call 2 (prepared in session 25; ~8 min): the grid rows D = 64 / 128 (session
# 25's ran with the Gluon forward unreplayable: host-bound short eager rows), the feature
# rows (window, dropout, deterministic) and the decode table (session 15's). One tar back.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
R=$OUT/s26; mkdir -p $R
L=$R/call2.log
step() { echo "== $1 $(date -u +%H:%M:%S)" >> $L; shift; "$@" 2>&1 | grep -v Warn >> $L; }
step "grid D=128" timeout 210 python -m flashtriton bench --suite prefill --out $R -- --head-dims 128 --causal both \
  --seqlens 512 1024 2048 4096 8192 16384 --tag s26-d128
step "grid D=64" timeout 160 python -m flashtriton bench --suite prefill --out $R -- --head-dims 64 --causal both \
  --seqlens 1024 2048 4096 8192 16384 --tag s26-d64
step "features" timeout 120 python -m flashtriton.bench.features --cases window dropout --out $R/features
echo "== end $(date -u +%H:%M:%S)" >> $L
tail -c 6000 $L
cd $OUT && tar czf s26.tgz s26 && rm -rf s26/*/*.json s26/*/*.png s26/features
