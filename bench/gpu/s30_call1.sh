#!/usr/bin/env bash
# Session 30, call 1 (~7.5 min; prepared in session 29). FIRST, on the local machine:
#   git am -3 bench/wip/gluon-causal-3wg.patch bench/wip/fused-bwd-d64.patch \
#     bench/wip/gluon-window-lever.patch   (this order)
# Then: the whole GPU suite alone (session 29's routes: 3 consumers at D = 64 from 2k, the
# D = 256 causal one-loop backward to 1k, the D = 64 one-tile dK/dV pointer loads; the three
# patches' ~120 GPU tests; session 29's suite took 315 + 43 s).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
R=$OUT/s30; mkdir -p $R
L=$R/call1.log
step() { echo "== $1 $(date -u +%H:%M:%S)" >> $L; shift; "$@" 2>&1 | grep -v Warn >> $L; }
OUT=$R step "tests" timeout 540 bash bench/gpu/tests.sh
echo "== end $(date -u +%H:%M:%S)" >> $L
tail -c 11000 $L
cd $OUT && tar czf s30-call1.tgz s30
