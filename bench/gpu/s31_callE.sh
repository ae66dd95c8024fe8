#!/usr/bin/env bash
# RECORD ONLY (ran in session 31): DYNAMIC was measured slower and reverted (6aa365d); its tests
# and A/B script went with the revert; recover them with `git show a2d7550`.
# Session 31, call E (~5 min, the session's last device minutes): the DYNAMIC causal Gluon forward
# (bench/wip/gluon-causal-dynamic.patch, applied with its switch off): GPU tests, then its A/B
# (prediction and routing rule in the script's docstring).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
R=$OUT/s31; mkdir -p $R
L=$R/callE.log
step() { echo "== $1 $(date -u +%H:%M:%S)" >> $L; shift; "$@" 2>&1 | grep -v Warn >> $L; }
step "DYNAMIC GPU tests" timeout 100 python -m pytest -o addopts="" -q -rf -p no:warnings -n 10 --timeout 90 \
  -m "gpu and not gpu_alone" tests/test_fwd_gluon_causal_dynamic.py
step "DYNAMIC A/B" timeout 180 python bench/gpu/s32_gluon_causal_dynamic_ab.py
echo "== end $(date -u +%H:%M:%S)" >> $L
tail -c 11000 $L
cd $OUT && tar czf s31-callE.tgz s31
