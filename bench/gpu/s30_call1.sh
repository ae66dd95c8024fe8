#!/usr/bin/env bash
# Session 30, call 1 (~9.5 min; prepared in session 29). FIRST, on the local machine:
#   git am -3 bench/wip/gluon-causal-3wg.patch bench/wip/fused-bwd-d64.patch   (this order)
# Then: the whole GPU suite (session 29's routes: 3 consumers at D = 64 from 2k, the D = 256
# causal one-loop backward to 1k, the D = 64 one-tile dK/dV pointer loads; the two patches'
# GPU tests), then the causal three-consumer forward A/B.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
R=$OUT/s30; mkdir -p $R
L=$R/call1.log
step() { echo "== $1 $(date -u +%H:%M:%S)" >> $L; shift; "$@" 2>&1 | grep -v Warn >> $L; }
OUT=$R step "tests" timeout 420 bash bench/gpu/tests.sh
step "causal 3wg A/B" timeout 150 env S30_N=2048,4096,16384 python bench/gpu/s30_gluon_causal_3wg_ab.py
echo "== end $(date -u +%H:%M:%S)" >> $L
tail -c 11000 $L
cd $OUT && tar czf s30-call1.tgz s30
