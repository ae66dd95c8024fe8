#!/usr/bin/env bash
# Session 24, call 2: the persistent Gluon forward (bench/wip/gluon-persistent.patch, applied):
# smoke under a timeout (a hang = barrier bug), its tests, then the A/B.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 150 python bench/gpu/s24_gluon_persistent_ab.py smoke 2>&1 | grep -v Warn
echo "smoke rc=${PIPESTATUS[0]}"
timeout 150 python -m pytest -q -x tests/test_fwd_gluon.py 2>&1 | tail -5
timeout 260 python bench/gpu/s24_gluon_persistent_ab.py ab 2>&1 | grep -v Warn
