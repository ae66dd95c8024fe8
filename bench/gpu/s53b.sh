#!/bin/bash
# Session 53, call 2: FOLD / FOLD+HALVES A/B (bench/gpu/s52_fold_ab.py: its prediction and rule in its docstring).
# The three source trees are built here from this tree and session 52's patches (bench/wip/).
export PYTHONUNBUFFERED=1
ROOT=$PWD
for t in old fold halves; do rm -rf /tmp/$t; mkdir -p /tmp/$t; cp -r src tests bench /tmp/$t/; done
(cd /tmp/fold && git apply $ROOT/bench/wip/gluon-fwd-fold.patch) || exit 3
(cd /tmp/halves && git apply $ROOT/bench/wip/gluon-fwd-fold-halves.patch) || exit 3
grep -c "_causal_step_halves" /tmp/old/src/flashtriton/kernels/fwd_gluon.py /tmp/halves/src/flashtriton/kernels/fwd_gluon.py
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader
PYTHONPATH=src timeout -s INT 560 python bench/gpu/s52_fold_ab.py --old /tmp/old --new fold=/tmp/fold \
  --new halves=/tmp/halves --rounds ${ROUNDS:-5} 2>&1 | tee $OUT/s53b_ab.txt
