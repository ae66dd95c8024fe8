#!/usr/bin/env bash
# Session 28, call 5 (the last device minutes, ~8 min): the D = 256 backward's rows-first
# grid (bench/wip/d256-bwd.patch, a helper's, offline): A/B against today's grid and FA2,
# its GPU tests; the decode table (B = 128 x 128k added, eager the better of two medians);
# then the D = 256 grid rows at 512..4k.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
R=$OUT/s28c5; mkdir -p $R
L=$R/call5.log
step() { echo "== $1 $(date -u +%H:%M:%S)" >> $L; shift; "$@" 2>&1 | grep -v Warn >> $L; }
step "d256 ab" timeout 130 python bench/gpu/s28_d256_bwd_ab.py
step "d256 tests" timeout 100 python -m pytest -o addopts="" -q -p no:warnings -n 6 -m gpu tests/test_bwd_rows_first.py
step "decode table" timeout 110 python -m flashtriton.bench.decode --out $R/decode --no-variants
step "d256 grid" timeout 170 python -m flashtriton bench --suite prefill --out $R/prefill -- --head-dims 256 \
  --causal both --seqlens 512 1024 2048 4096 --tag d256
echo "== end $(date -u +%H:%M:%S)" >> $L
grep -v "^decode \[\|^prefill \[" $L | tail -c 11000
cd $OUT && tar czf s28-call5.tgz s28c5
