#!/usr/bin/env bash
# Session 23, call 8 (the last ~250 s of device time): the decode host-time change's GPU
# tests (test_plans: every replay's direct launch; test_kvcache), then the Gluon forward's
# CAUSAL variant and D = 64 tile, first GPU run (bench/gpu/s23_gluon_causal_ab.py: smoke,
# d64, causal; each under timeout, a barrier mistake hangs).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 70 python -m pytest tests/test_plans.py tests/test_kvcache.py -o addopts="" -q -rf --tb=short -p no:warnings \
  -n 8 --timeout 60 -k "not cpu" > $OUT/pytest-decode.txt 2>&1
echo "tests rc=$?"; grep -E "^FAILED|^ERROR" $OUT/pytest-decode.txt | head; tail -1 $OUT/pytest-decode.txt
S=bench/gpu/s23_gluon_causal_ab.py
timeout 50 python $S smoke 2>&1 | grep -v Warn | tee $OUT/causal-smoke.txt; echo "smoke rc=${PIPESTATUS[0]}"
timeout 45 python $S d64 2>&1 | grep -v Warn | tee $OUT/d64-ab.txt; echo "d64 rc=${PIPESTATUS[0]}"
timeout 70 python $S causal 2>&1 | grep -v Warn | tee $OUT/causal-ab.txt; echo "causal rc=${PIPESTATUS[0]}"
