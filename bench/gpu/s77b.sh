#!/bin/bash
# Session 77: the two GPU calls that fit what is left of the device time after a failed start (1,619 s).
#   bash bench/gpu/s77b.sh a [SECONDS]  # s77a's route tests, tests/test_[g-z]* + gpu_alone, then the window A/B
#   bash bench/gpu/s77b.sh b   # tests/test_[a-f]*, then s77a's ragged prefill rows in what is left of 570 s
# Every step runs under a deadline so that the call ends inside the 600 s limit; outputs: $OUT
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src:$PWD/tests
out=${OUT:-/tmp}
start=$(date +%s)
G=${2:-560}  # the call's seconds
left() { echo $(( $1 - ($(date +%s) - start) )); }
date -u +%H:%M:%S
python -c "import torch, triton; print(torch.__version__, triton.__version__)"
nvidia-smi --query-gpu=name --format=csv,noheader | tee $out/gpu.txt
suite() {  # $1: log name, $2: seconds, rest: test files
  local log=$out/$1.txt t=$2; shift 2
  timeout -s INT $t python -m pytest "$@" -o addopts="" -q -rf -p no:warnings -n 10 --timeout 200 \
    -k "not cpu" -m "not gpu_alone" > $log 2>&1
  echo "rc $?"; tail -1 $log; grep -E "^(FAILED|ERROR)" $log | head -20 | cut -c1-300
}
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
     t=$(left 570); echo "prefill: $t s"
     [ $t -gt 60 ] && timeout $t python -m flashtriton.bench.prefill --seqlens 1000 2100 4000 --head-dims 64 128 \
       --rounds 3 --out $out --tag prefill-ragged > $out/s77a_prefill.txt 2>&1
     tail -n 25 $out/s77a_prefill.txt | cut -c1-300 ;;
esac
date -u +%H:%M:%S
