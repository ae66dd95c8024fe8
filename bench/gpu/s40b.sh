#!/usr/bin/env bash
# Session 40, call B: where do the consumers of our D = 128 kernels wait? Call A's profile (bench/gpu/s40_profile.sh)
# gave only the top stall reason, "CTA barrier" (38% forward, 36% backward), and that figure includes the 3 padding
# warps of the 1-warp loader's warpgroup, resident and parked all kernel long (active warps 2.99 a scheduler = 12 / 4):
# 0.75 parked warps a scheduler / 0.35 (0.22) issued a cycle = 2.1 (3.4) of the 3.3 (4.9) barrier cycles an issued
# instruction. This call takes the full stall breakdown (WarpStateStats, print-details all) and the per-SASS-line
# samples (SourceCounters, exported as CSV), ours (D = 128 causal 2k forward and fused backward), and cuDNN's
# breakdown beside it. Question: which stall, on which instructions, holds the consumers (wgmma waits, mbarrier
# waits, MUFU), and does cuDNN's kernel show the same reasons in smaller shares?
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
R=$OUT/s40b; mkdir -p $R; L=$R/log.txt
N="ncu --clock-control none --profile-from-start off"
echo "== ours $(date -u +%T)" >> $L
timeout 240 $N -k regex:'attn_fwd_gluon|attn_bwd_fused' --section WarpStateStats --section SourceCounters \
  -o $R/ours python bench/gpu/s27_ncu_probe.py 128:2048:1 >> $L 2>&1
timeout 60 ncu -i $R/ours.ncu-rep --page details --print-details all > $R/ours_details.txt 2>&1
timeout 120 ncu -i $R/ours.ncu-rep --page source --csv --print-source sass > $R/ours_sass.csv 2>> $L
echo "== cudnn $(date -u +%T)" >> $L
timeout 180 $N -k regex:'fprop|bprop' --section WarpStateStats --section SourceCounters \
  -o $R/cudnn python bench/gpu/s32_ncu_cudnn.py 128:2048:1 >> $L 2>&1
timeout 60 ncu -i $R/cudnn.ncu-rep --page details --print-details all > $R/cudnn_details.txt 2>&1
echo "== end $(date -u +%T)" >> $L
gzip -f $R/ours_sass.csv; gzip -f $R/ours.ncu-rep; rm -f $R/cudnn.ncu-rep
ls -la $R; tail -20 $L; grep -iE "stall|Warp Cycles" $R/ours_details.txt | head -60
