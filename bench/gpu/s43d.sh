#!/bin/bash
# Session 43, call 4: the backward TAIL order with one / two waves of tail (bench/wip/gluon-bwd-tail-order.patch
# applied in the working tree), four rotating rounds.
export PYTHONPATH=src
S43T_CASES=128:2048,128:4096,128:1024,128:8192 S43T_CTAS=128,256 S43T_BAND=0 S43T_ROUNDS=4 \
  timeout 300 python bench/gpu/s43_bwd_tail_ab.py 2>&1 | tee $OUT/s43_bwd_tail_ab2.txt
