#!/usr/bin/env bash
# Session 26, call 3 (~9 min): the grid rows D = 128 / 64 (session 25's ran with the Gluon
# forward and the fused backward unreplayable: host-bound short eager rows), then the
# decode table (session 15's) if time is left. One tar back.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
R=$OUT/s26c3; mkdir -p $R
L=$R/call3.log
step() { echo "== $1 $(date -u +%H:%M:%S)" >> $L; shift; "$@" 2>&1 | grep -v Warn >> $L; }
step "grid D=128" timeout 210 python -m flashtriton bench --suite prefill --out $R -- --head-dims 128 --causal both \
  --seqlens 512 1024 2048 4096 8192 16384 --tag s26-d128
step "grid D=64" timeout 160 python -m flashtriton bench --suite prefill --out $R -- --head-dims 64 --causal both \
  --seqlens 512 1024 2048 4096 8192 16384 --tag s26-d64
step "decode" timeout 170 python -m flashtriton.bench.decode --out $R/decode --no-variants
echo "== end $(date -u +%H:%M:%S)" >> $L
tail -c 6000 $L
cd $OUT && tar czf s26c3.tgz s26c3
