#!/usr/bin/env bash
# Session 27, call 4 (<= ~9.5 min): the whole GPU suite on this session's code (the Gluon
# forward without its two removed options, SASS checked identical offline; the decode
# host path's cuts), the decode host A/B as in call 1 (same script: before = call 1), the
# decode table's B = 1 rows, then a first try of Nsight Compute on the rows that trail
# cuDNN (D = 64 forward / backward, D = 128 causal forward at 2k).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
R=$OUT/s27; mkdir -p $R
L=$R/call4.log
step() { echo "== $1 $(date -u +%H:%M:%S)" >> $L; shift; "$@" 2>&1 | grep -v Warn >> $L; }
OUT=$R step "tests" timeout 380 bash bench/gpu/tests.sh
step "decode host ab" timeout 80 python bench/gpu/s27_decode_host_ab.py 7 200
[ -f bench/gpu/s27_decode_host_fast_ab.py ] && step "decode host fast ab" timeout 90 python bench/gpu/s27_decode_host_fast_ab.py
step "ncu" timeout 100 ncu --clock-control none --profile-from-start off --section SpeedOfLight \
  --section WarpStateStats --section Occupancy --section LaunchStats --section ComputeWorkloadAnalysis \
  python bench/gpu/s27_ncu_probe.py 64:4096:0 128:2048:1
echo "== end $(date -u +%H:%M:%S)" >> $L
tail -c 10000 $L
cd $OUT && tar czf s27-call4.tgz s27
