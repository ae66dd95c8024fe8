#!/bin/bash
# Session 65: the whole GPU suite on HEAD's code (the first since session 58; sessions 59-64 changed fwd.py,
# bwd.py, decode.py and their launchers), in two calls that fit the 600 s limit, and on an H200 the queued
# re-timings (s64a.sh's H200 part).
#   bash bench/gpu/s65.sh tests1   # tests/test_[a-f]*, 10 workers
#   bash bench/gpu/s65.sh tests2   # tests/test_[g-z]*, 10 workers, then the gpu_alone tests in one process
#   bash bench/gpu/s65.sh h200     # the re-timings; stops at once on any other card
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
out=${OUT:-/tmp}
python -c "import torch, triton; print(torch.__version__, triton.__version__)"
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$gpu"
run_tests() {  # $1: log name, $2: seconds, rest: test files
  local name=$1 log=$out/$1.txt t=$2; shift 2
  timeout -s INT $t python -m pytest "$@" -o addopts="" -q -rf -p no:warnings -n 10 --timeout 200 \
    -k "not cpu" -m "not gpu_alone" > $log 2>&1
  echo "$name rc $?"; tail -1 $log; grep -E "^(FAILED|ERROR)" $log | head -20
}
case "$1" in
  tests1) run_tests s65_tests1 540 tests/test_[a-f]*.py ;;
  tests2) run_tests s65_tests2 420 tests/test_[g-z]*.py
          timeout -s INT 150 python -m pytest tests -o addopts="" -q -rf -p no:warnings --timeout 150 \
            -m gpu_alone > $out/s65_gpu_alone.txt 2>&1
          echo "gpu_alone rc $?"; tail -1 $out/s65_gpu_alone.txt ;;
  h200) echo "$gpu" | grep -q H200 || exit 0; bash bench/gpu/s64a.sh ;;
esac
