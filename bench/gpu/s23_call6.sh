#!/usr/bin/env bash
# Session 23, call 6 (~3 min): the Gluon forward again after the lse fix (call 5: both
# consumer warpgroups stored their lse rows at the first half's offsets; outputs were
# bitwise fwd_ws.py's): its tests, then the A/B with every configuration timed.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 150 python -m pytest tests/test_fwd_gluon.py -o addopts="" -q -rf --tb=short -p no:warnings --timeout 60 \
  > $OUT/pytest-gluon.txt 2>&1; echo "gluon tests rc=$?"; grep -E "^FAILED|^ERROR" $OUT/pytest-gluon.txt | head; tail -1 $OUT/pytest-gluon.txt
timeout 230 python bench/gpu/s23_gluon_fwd_ab.py 2>&1 | grep -v Warn | tee $OUT/gluon-ab.txt
