#!/usr/bin/env bash
# Session 29, call 2 (~7 min): the persistent D = 64 bwd_ws.py repeat failure of call 1
# (stress, TILE_STAGES 2 against 1), the 3-consumer forward at 512 / 1k (route floor), the
# fused backward's dq_accum launches A/B and the D = 256 causal one-loop backward A/B.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
R=$OUT/s29; mkdir -p $R
L=$R/call2.log
step() { echo "== $1 $(date -u +%H:%M:%S)" >> $L; shift; "$@" 2>&1 | grep -v Warn >> $L; }
step "bwd_ws stress" timeout 120 python bench/gpu/s29_bwd_ws_stress.py 300
S29_N=512,1024 step "3wg A/B short" timeout 80 python bench/gpu/s29_gluon_fwd_3wg_ab.py
step "fused dq A/B" timeout 200 python bench/gpu/s29_fused_dq_accum_ab.py
step "d256 causal A/B" timeout 150 python bench/gpu/s29_d256_causal_bwd_ab.py
echo "== end $(date -u +%H:%M:%S)" >> $L
tail -c 11500 $L
cd $OUT && tar czf s29-call2.tgz s29
