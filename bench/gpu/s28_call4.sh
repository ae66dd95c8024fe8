#!/usr/bin/env bash
# Session 28, call 4 (~6 min): after routing the fused WINDOW backward (from 2k, D = 128 / 64)
# and making gather="pages" the decode default: the GPU tests of the touched routes, the
# features' window row (issue 3: backward 0.56x causal before) and the decode table (issue
# 5: page 16 at B = 1, 8k 1.109x contiguous as graphs before).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
R=$OUT/s28c4; mkdir -p $R
L=$R/call4.log
step() { echo "== $1 $(date -u +%H:%M:%S)" >> $L; shift; "$@" 2>&1 | grep -v Warn >> $L; }
step "tests" timeout 240 python -m pytest -o addopts="" -q -p no:warnings -n 10 --timeout 150 -m "gpu and not gpu_alone" \
  tests/test_bwd_gluon_window.py tests/test_bwd_gluon.py tests/test_kvcache.py tests/test_masks.py tests/test_plans.py
step "features window" timeout 120 python -m flashtriton.bench.features --cases window --out $R/features
step "decode table" timeout 100 python -m flashtriton.bench.decode --out $R/decode --no-variants
echo "== end $(date -u +%H:%M:%S)" >> $L
grep -v "^decode \[" $L | tail -c 11000
cd $OUT && tar czf s28-call4.tgz s28c4
