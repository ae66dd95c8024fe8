#!/usr/bin/env bash
# Session 31, call C (~7.5 min): the whole GPU suite with the session's routes.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
R=$OUT/s31; mkdir -p $R
L=$R/callC.log
step() { echo "== $1 $(date -u +%H:%M:%S)" >> $L; shift; "$@" 2>&1 | grep -v Warn >> $L; }
OUT=$R step "tests" timeout 540 bash bench/gpu/tests.sh
echo "== end $(date -u +%H:%M:%S)" >> $L
tail -c 11000 $L
cd $OUT && tar czf s31-callC.tgz s31
