#!/usr/bin/env bash
# Session 29, call 1 (~9 min): the whole GPU suite with session 28's routes and the three
# offline patches applied (switches off; their GPU tests are in the suite), then the A/B of
# the D = 64 three-consumer Gluon forward (bench/gpu/s29_gluon_fwd_3wg_ab.py).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
R=$OUT/s29; mkdir -p $R
L=$R/call1.log
step() { echo "== $1 $(date -u +%H:%M:%S)" >> $L; shift; "$@" 2>&1 | grep -v Warn >> $L; }
OUT=$R step "tests" timeout 400 bash bench/gpu/tests.sh
step "3wg A/B" timeout 150 python bench/gpu/s29_gluon_fwd_3wg_ab.py
echo "== end $(date -u +%H:%M:%S)" >> $L
tail -c 11000 $L
cd $OUT && tar czf s29-call1.tgz s29
