#!/usr/bin/env bash
# Session 36, call C: the fused causal backward's BAND by policy.fused_band's rule (C CTAs a band), D = 128.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
L=$OUT/callC.log
step() { echo "== $1 $(date -u +%H:%M:%S)" >> $L; shift; "$@" 2>&1 | grep -v Warn >> $L; }
step "bf16" env S36F_CTAS=128,256,512 S36F_CASES=128:2048,128:4096,128:8192,128:16384,128:1024,128:512 \
  timeout 280 python bench/gpu/s36_fused_band_ab.py
step "fp16" env S36F_CTAS=256 S36F_DTYPE=fp16 S36F_CASES=128:2048,128:4096,128:8192 \
  timeout 150 python bench/gpu/s36_fused_band_ab.py
echo "== end $(date -u +%H:%M:%S)" >> $L
grep -E "^\| |^== |rror|WRONG" $L | tail -40
