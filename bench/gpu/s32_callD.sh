#!/usr/bin/env bash
# Session 32, call D (~4 min; prepared in session 31 as call B): Nsight Compute on the D = 128 backward, ours
# (the fused Gluon kernel) beside cuDNN's, one forward + backward each inside cudaProfilerStart /
# Stop (bench/gpu/s27_ncu_probe.py and s32_ncu_cudnn.py), bf16, N = 8k, B = 4, H = 16, non-causal.
# Why: at D = 128 the backward sits at 0.93-0.99x cuDNN and two levers predicted from instruction
# and shared-memory-byte counts were wrong (DEFER_DQ level, DK_RS -4-5%, bench/NOTES.md session 31).
# Question (prediction written before the run): our fused kernel's tensor pipe is < 60% busy with
# the top stall "barrier" or "long scoreboard" (waits between the two consumer warpgroups and the
# dq reduce), cuDNN's > 65% with fewer stalls at barriers; shared-memory bank conflicts are not
# the difference (both < 5% of wavefronts). If the top stall is instead "math pipe throttle"
# (tensor) for both, the gap is instruction count in the loops (ours 483 / 491 a tile).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
R=$OUT/s32; mkdir -p $R
L=$R/callD.log
step() { echo "== $1 $(date -u +%H:%M:%S)" >> $L; shift; "$@" 2>&1 | grep -v Warn >> $L; }
S="--section SpeedOfLight --section WarpStateStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats"
step "ncu ours D=128 8k" timeout 240 ncu --clock-control none --profile-from-start off $S \
  python bench/gpu/s27_ncu_probe.py 128:8192:0
step "ncu cuDNN D=128 8k" timeout 240 ncu --clock-control none --profile-from-start off $S \
  python bench/gpu/s32_ncu_cudnn.py 128:8192:0
echo "== end $(date -u +%H:%M:%S)" >> $L
tail -c 11000 $L
cd $OUT && tar czf s32-callD.tgz s32
