#!/usr/bin/env bash
# Session 35, call A: the D = 256 causal forward's launches at 4k / 8k / 16k (one block a CTA = the
# route, with ping-pong, PERSISTENT with the default band and bands of 1 / 2 / 4 batch x heads) and the
# plain PERSISTENT kernel at 8k, bf16, H = 8, 16k tokens, graph replays, two rounds.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
L=$OUT/callA.log
step() { echo "== $1 $(date -u +%H:%M:%S)" >> $L; shift; "$@" 2>&1 | grep -v Warn >> $L; }
step "d256 causal launches" env S32_CASES=c8192,8192,c4096,c16384 S32_CAUSAL_EXTRA=1 S35_BANDS=1,2,4 \
  timeout 400 python bench/gpu/s32_gluon_fwd_d256_ab.py
echo "== end $(date -u +%H:%M:%S)" >> $L
grep -E "^\| |^== |rror|FAIL" $L | tail -30
