#!/usr/bin/env bash
# Session 23, call 5 (~7 min): the first GPU run of the Gluon forward (kernels/fwd_gluon.py,
# written offline): smoke per configuration under timeout (a barrier mistake hangs), its
# tests, then the A/B against fwd_ws.py (bench/gpu/s23_gluon_fwd_ab.py).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 75 python bench/gpu/s23_gluon_fwd_ab.py smoke gluon 2>&1 | grep -v Warn | tee $OUT/gluon-smoke.txt
rc=${PIPESTATUS[0]}; echo "smoke gluon rc=$rc"
if [ "$rc" != 0 ]; then echo "base config failed or hung: stop"; exit 0; fi
for c in gluon-pp gluon-s3 gluon-bn64; do
  timeout 60 python bench/gpu/s23_gluon_fwd_ab.py smoke $c 2>&1 | grep -v Warn | tee -a $OUT/gluon-smoke.txt
  echo "smoke $c rc=${PIPESTATUS[0]}"
done
timeout 150 python -m pytest tests/test_fwd_gluon.py -o addopts="" -q -rf --tb=short -p no:warnings --timeout 60 \
  > $OUT/pytest-gluon.txt 2>&1; echo "gluon tests rc=$?"; grep -E "^FAILED|^ERROR" $OUT/pytest-gluon.txt | head; tail -1 $OUT/pytest-gluon.txt
timeout 230 python bench/gpu/s23_gluon_fwd_ab.py 2>&1 | grep -v Warn | tee $OUT/gluon-ab.txt
