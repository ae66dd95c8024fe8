#!/usr/bin/env bash
# Session 30, call B (~8.5 min, straight after A while the machine is warm): the causal
# D = 64 three-consumer forward A/B, the D = 128 DEFER_DQ fused backward A/B, the window
# EARLY_Q A/B at 16k (issue 3's row).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
R=$OUT/s30; mkdir -p $R
L=$R/callB.log
step() { echo "== $1 $(date -u +%H:%M:%S)" >> $L; shift; "$@" 2>&1 | grep -v Warn >> $L; }
step "causal 3wg A/B" timeout 170 env S30_N=2048,4096,16384 python bench/gpu/s30_gluon_causal_3wg_ab.py
step "d128 DEFER_DQ A/B" timeout 210 env S31_NS=2048,4096,16384 python bench/gpu/s31_fused_bwd_d128_ab.py
step "window EARLY_Q A/B" timeout 130 env S30_N=16384 python bench/gpu/s30_gluon_window_ab.py
echo "== end $(date -u +%H:%M:%S)" >> $L
tail -c 11000 $L
cd $OUT && tar czf s30-callB.tgz s30
