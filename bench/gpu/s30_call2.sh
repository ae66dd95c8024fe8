#!/usr/bin/env bash
# Session 30, call 2 (~5-6.5 min; prepared in session 29): the fused backward's wide D = 64
# tile A/B, then the D = 64 dropout one-tile probe (policy.BWD_WS_DROPOUT_MAX_N[64] = 0 until
# it is clean). The fp16 grid rows still from session 19 (D = 256 non-causal; causal
# 4k-16k) only if device time remains at the end of the session (s30_call4_fp16.sh).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
R=$OUT/s30; mkdir -p $R
L=$R/call2.log
step() { echo "== $1 $(date -u +%H:%M:%S)" >> $L; shift; "$@" 2>&1 | grep -v Warn >> $L; }
step "wide bwd A/B" timeout 400 python bench/gpu/s30_fused_bwd_d64_ab.py
S29_DROPOUT=0.1 S29_NS=1024,4096 step "D = 64 dropout one-tile probe" timeout 60 python bench/gpu/s29_bwd_ws_onetile_probe.py 100
echo "== end $(date -u +%H:%M:%S)" >> $L
tail -c 11000 $L
cd $OUT && tar czf s30-call2.tgz s30
