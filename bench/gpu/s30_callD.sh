#!/usr/bin/env bash
# Session 30, call D (~7.5 min, straight after C): the whole GPU suite with the session's routes.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
R=$OUT/s30; mkdir -p $R
L=$R/callD.log
step() { echo "== $1 $(date -u +%H:%M:%S)" >> $L; shift; "$@" 2>&1 | grep -v Warn >> $L; }
OUT=$R step "tests" timeout 560 bash bench/gpu/tests.sh
echo "== end $(date -u +%H:%M:%S)" >> $L
tail -c 11000 $L
cd $OUT && tar czf s30-callD.tgz s30
