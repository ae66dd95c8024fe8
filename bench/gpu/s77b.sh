#!/bin/bash
# Session 77: the two GPU calls that fit what is left of the device time after a failed start (1,619 s).
#   bash bench/gpu/s77b.sh a [SECONDS]  # s77a's route tests, tests/test_[g-z]* + gpu_alone, then the window A/B
#   bash bench/gpu/s77b.sh b   # tests/test_[a-f]*, then s77a's ragged prefill rows in what is left of 570 s
# Every step runs under a deadline so that the call ends inside the 600 s limit; outputs: $OUT
source bench/gpu/call_common.sh
G=${2:-560}  # the call's seconds
case "$1" in
  a) timeout 150 python -m pytest tests/test_dense_varlen.py -q -p no:warnings > $out/s77a_tests.txt 2>&1
     echo "dense_varlen rc $?"; tail -n 3 $out/s77a_tests.txt | cut -c1-300
     suite s77_tests2 $(left $(( G - 130 ))) tests/test_[g-z]*.py
     timeout -s INT 90 python -m pytest tests -o addopts="" -q -rf -p no:warnings --timeout 90 \
       -m gpu_alone > $out/s77_gpu_alone.txt 2>&1
     echo "gpu_alone rc $?"; tail -1 $out/s77_gpu_alone.txt
     t=$(left $G); [ $t -gt 40 ] && S76_CASES=windows timeout $t python bench/gpu/s76_dense_varlen_ab.py \
       $out/s77a_windows.json > $out/s77a_windows.txt 2>&1
     echo "windows rc $?"; cut -c1-600 $out/s77a_windows.txt | tail -n 6 ;;
  b) suite s77_tests1 470 tests/test_[a-f]*.py
     ragged_prefill s77a_prefill $(left 570) ;;
esac
date -u +%H:%M:%S
