#!/usr/bin/env bash
# Session 27, call 1 (prepared in session 26; ~9 min): the whole GPU suite (after session
# 26's last suite run came the fused backward's causal-512 route, LEAN_KEEP, the kvcache
# check kernel's route, the strided-index copies, the varlen-dropout rule fix, the
# tiny-p fused dropout test), then the causal dropout forward's two keep forms
# (CAUSAL_DROPOUT_KEEP float / lean, each in its own process). Log written as it goes.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
L=$OUT/call1.log
step() { echo "== $1 $(date -u +%H:%M:%S)" >> $L; shift; "$@" 2>&1 | grep -v Warn >> $L; }
OUT=$OUT step "tests" timeout 400 bash bench/gpu/tests.sh
step "causal dropout keep forms" timeout 170 python bench/gpu/s26_gluon_dropout_fwd_ab.py ab-causal
echo "== end $(date -u +%H:%M:%S)" >> $L
tail -c 9000 $L
