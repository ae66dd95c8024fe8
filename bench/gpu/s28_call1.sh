#!/usr/bin/env bash
# Session 28, call 1 (prepared in session 27; ~8 min): the whole GPU suite (after session
# 27's suite run came the kvcache step memo and plans.py's launch / allocation changes,
# their review fixes, and the Gluon forward's removed options; only the plans / kvcache /
# kvcache_checks files and 113 of the forward's 117 dropout tests ran on a GPU since), then
# the decode table after the step memo (eager rows at small B), then a first try of Nsight
# Compute (never used here yet; KINDS.md: it reads counters on Firecracker, not on gVisor).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
R=$OUT/s28; mkdir -p $R
L=$R/call1.log
step() { echo "== $1 $(date -u +%H:%M:%S)" >> $L; shift; "$@" 2>&1 | grep -v Warn >> $L; }
OUT=$R step "tests" timeout 380 bash bench/gpu/tests.sh
step "decode table" timeout 100 python -m flashtriton.bench.decode --out $R/decode --no-variants
step "ncu" timeout 90 ncu --clock-control none --profile-from-start off --section SpeedOfLight \
  --section WarpStateStats --section Occupancy --section LaunchStats --section ComputeWorkloadAnalysis \
  python bench/gpu/s27_ncu_probe.py 64:4096:0
echo "== end $(date -u +%H:%M:%S)" >> $L
tail -c 9000 $L
cd $OUT && tar czf s28-call1.tgz s28
