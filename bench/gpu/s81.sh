#!/bin/bash
# Session 81: session 80's queue in as few calls as the device allows (failed starts cost ~3 min each):
#   bash bench/gpu/s81.sh a [S] # tests/test_dense_varlen.py (the new D = 128 window route check), the D = 64 window
#                             # sweep, then tests/test_[g-z]* in what is left of S (575) s
#   bash bench/gpu/s81.sh b   # the ragged prefill rows; on an H200 also s74e's float32 row
# Every step runs under a deadline so that the call ends inside the 600 s limit; outputs: $OUT
source bench/gpu/s79.sh none  # sweep(), suite(), ragged_prefill(), left(), $out
case "$1" in
  a) G=${2:-575}  # the call's seconds
     suite s81_dense_varlen 130 tests/test_dense_varlen.py
     L=$(( $(left $G) - 60 )); sweep sweep64 $(( L > 190 ? 190 : L ))  # the sweep before the rest of the tests
     suite s81_tests2 $(left $G) tests/test_[g-z]*.py ;;
  b) if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
       ragged_prefill s81_prefill 320; bash bench/gpu/s74e.sh 230
     else ragged_prefill s81_prefill $(left 575); fi ;;
esac
date -u +%H:%M:%S
