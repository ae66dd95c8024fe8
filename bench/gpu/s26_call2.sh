#!/usr/bin/env bash
# Session 26, call 2 (~8 min): the whole GPU suite with the session's routes (the fused
# backward replayable, the Gluon dropout forward and fused dropout backward at D = 128),
# then the feature rows (window, dropout, deterministic). One tar back.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
R=$OUT/s26; mkdir -p $R
L=$R/call2.log
step() { echo "== $1 $(date -u +%H:%M:%S)" >> $L; shift; "$@" 2>&1 | grep -v Warn >> $L; }
OUT=$R step "tests" timeout 400 bash bench/gpu/tests.sh
step "features" timeout 150 python -m flashtriton.bench.features --cases window dropout --out $R/features
echo "== end $(date -u +%H:%M:%S)" >> $L
tail -c 5000 $L
cd $OUT && tar czf s26.tgz s26
