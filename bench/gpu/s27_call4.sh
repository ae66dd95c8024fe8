#!/usr/bin/env bash
# Session 27, call 4 (the last ~230 s of device time: a helper's GPU runs took ~20 min of
# the session's 30): the GPU tests of what changed since call 2's suite (plans.py's launch
# and allocation, the kvcache step memo; the Gluon forward's causal dropout variant after
# the removals), the decode host A/B as in call 1 (same script and arguments: before =
# call 1), the helper's host A/B script on this tree.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
R=$OUT/s27; mkdir -p $R
L=$R/call4.log
step() { echo "== $1 $(date -u +%H:%M:%S)" >> $L; shift; "$@" 2>&1 | grep -v Warn >> $L; }
step "tests: plans, kvcache" timeout 75 python -m pytest tests/test_plans.py tests/test_kvcache.py \
  tests/test_kvcache_checks.py -o addopts="" -q -rf -p no:warnings -n 10 -k "not cpu" -m "not gpu_alone"
step "tests: gluon forward dropout" timeout 55 python -m pytest tests/test_fwd_gluon.py -o addopts="" -q -rf \
  -p no:warnings -n 10 -k "not cpu and dropout" -m "not gpu_alone"
step "decode host ab" timeout 40 python bench/gpu/s27_decode_host_ab.py 7 200
step "decode host fast ab" timeout 40 python bench/gpu/s27_decode_host_fast_ab.py
echo "== end $(date -u +%H:%M:%S)" >> $L
tail -c 9000 $L
cd $OUT && tar czf s27-call4.tgz s27
