#!/usr/bin/env bash
# Session 33, call C (~6 min; prepared in session 32): (1) the D = 256 Gluon forward and backward at
# the lengths below their routes (issue 4's ">= 0.85x cuDNN at 512 / 1k": the grid's D = 256
# backward reads 0.73-0.85x there, the forward 0.85-0.88x) - the session-32 A/B scripts with
# short cases; route by their rules (forward: GLUON_FWD_MIN_N / GLUON_FWD_CAUSAL_MIN_N[256];
# backward: GLUON_BWD_D256_MIN_N). Prediction: the Gluon kernels keep their 1.1-1.2x over the
# Triton routes at 1k causal and 512 (fewer tiles a CTA costs both), so 512 / 1k reach
# 0.85-0.95x cuDNN. (2) Nsight Compute on the D = 128 fused backward beside cuDNN's at 8k
# (session 31's prepared probe, bench/gpu/s32_callD.sh; its prediction there).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
R=$OUT/s33; mkdir -p $R
L=$R/callC.log
step() { echo "== $1 $(date -u +%H:%M:%S)" >> $L; shift; "$@" 2>&1 | grep -v Warn >> $L; }
step "D = 256 forward A/B at 512 / causal 512 / causal 1k" env S32_CASES=512,c512,c1024 timeout 80 \
  python bench/gpu/s32_gluon_fwd_d256_ab.py
step "D = 256 backward A/B at 512 / causal 512 / causal 1k" env S32B_CASES=512,c512,c1024 S32B_SKIP=gluon-v2 \
  timeout 110 python bench/gpu/s32_gluon_bwd_d256_ab.py
S="--section SpeedOfLight --section WarpStateStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats"
step "ncu ours D=128 8k" timeout 170 ncu --clock-control none --profile-from-start off $S \
  python bench/gpu/s27_ncu_probe.py 128:8192:0
step "ncu cuDNN D=128 8k" timeout 170 ncu --clock-control none --profile-from-start off $S \
  python bench/gpu/s32_ncu_cudnn.py 128:8192:0
echo "== end $(date -u +%H:%M:%S)" >> $L
tail -c 11000 $L
cd $OUT && tar czf s33-callC.tgz s33
