#!/usr/bin/env bash
# Session 24, call 3: the persistent Gluon forward routed for non-causal (policy.
# GLUON_FWD_PERSISTENT), the banded causal order; its tests, then the route A/B.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 150 python -m pytest -q -x tests/test_fwd_gluon.py 2>&1 | tail -5
timeout 380 python bench/gpu/s24_route_ab.py 2>&1 | grep -v Warn
