#!/usr/bin/env bash
# Prepared in session 39 for session 40; session 40 moved (1), the grid's warm-up check, to bench/gpu/s40a.sh. (1) a grid whose first shape is
# D = 128 non-causal 512 (bench/NOTES.md "Session 39": the first shape of a grid process read forward+backward 293
# TFLOP/s against 356 timed later; predicted: within +-4% of 356 now); (2) Nsight Compute, ours beside cuDNN, on the
# cells issue 4 still misses that the last profile (session 33: the D = 128 backward at 8k) did not cover: the
# D = 128 causal forward at 2k (Gluon one-block kernel; 0.97x bf16, 0.93x fp16) and the D = 64 causal forward at 2k
# (fwd.py; 0.95x / 0.91x). Per kernel: SpeedOfLight, warp states, scheduler, memory tables, occupancy, launch.
# Questions written before the run: is the Gluon causal forward's per-block cost (F ~3.5 us, the model of
# bench/wip/gluon-causal-d128-gap.md) visible as idle issue slots at block boundaries (low achieved occupancy of
# the tensor pipe with "no eligible warp" stalls) or as a tail (the last wave)? Does fwd.py at D = 64 2k run more
# than one CTA an SM, and is it issue-bound (MUFU / FMA) as session 27 found at 2k non-causal?
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
R=$OUT/s40; mkdir -p $R
L=$R/profile.log
step() { echo "== $1 $(date -u +%H:%M:%S)" >> $L; shift; "$@" 2>&1 | grep -v Warn >> $L; }
S="--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis \
--section Occupancy --section LaunchStats"
step "ncu ours D=128 causal 2k" timeout 150 ncu --clock-control none --profile-from-start off $S \
  python bench/gpu/s27_ncu_probe.py 128:2048:1
step "ncu cuDNN D=128 causal 2k" timeout 120 ncu --clock-control none --profile-from-start off $S \
  python bench/gpu/s32_ncu_cudnn.py 128:2048:1
step "ncu ours D=64 causal 2k" timeout 150 ncu --clock-control none --profile-from-start off $S \
  python bench/gpu/s27_ncu_probe.py 64:2048:1
step "ncu cuDNN D=64 causal 2k" timeout 120 ncu --clock-control none --profile-from-start off $S \
  python bench/gpu/s32_ncu_cudnn.py 64:2048:1
echo "== end $(date -u +%H:%M:%S)" >> $L
tail -c 9000 $L
