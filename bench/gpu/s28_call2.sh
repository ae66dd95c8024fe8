#!/usr/bin/env bash
# Session 28, call 2 (~6 min): the two offline patches of session 27's helpers, first GPU
# runs. (1) the fused Gluon backward's WINDOW variant: its GPU tests, then the A/B against
# today's window backward and the fused causal backward (bench/gpu/s28_gluon_bwd_window_ab.py,
# prediction in its docstring: 0.79x causal at 16k). (2) page-16 decode, gather="pages":
# its GPU tests, then the A/B (bench/gpu/s28_decode_paged16_ab.py, prediction 1.05-1.09x
# contiguous at B = 1, 8k, as graphs).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
R=$OUT/s28c2; mkdir -p $R
L=$R/call2.log
step() { echo "== $1 $(date -u +%H:%M:%S)" >> $L; shift; "$@" 2>&1 | grep -v Warn >> $L; }
step "window tests" timeout 200 python -m pytest -o addopts="" -q -p no:warnings -n 8 -m gpu \
  tests/test_bwd_gluon_window.py tests/test_bwd_gluon.py tests/test_kvcache.py -k "window or gather or route"
step "window ab" timeout 220 python bench/gpu/s28_gluon_bwd_window_ab.py
step "paged16 ab" timeout 120 python bench/gpu/s28_decode_paged16_ab.py 3
echo "== end $(date -u +%H:%M:%S)" >> $L
tail -c 11000 $L
cd $OUT && tar czf s28-call2.tgz s28c2
