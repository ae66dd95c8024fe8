#!/bin/bash
# Session 52, call 2: the whole GPU suite, first half (no whole-suite GPU run since session 45; sessions 46-51 changed
# the VARLEN / paged / dropout routes): tests/test_b* .. test_f* (backward, determinism, dropout, fp32, the Gluon
# forward files), 10 workers. SIGINT at the limit so pytest still prints its summary.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader | tee $OUT/gpu.txt
timeout -s INT 520 python -m pytest -o addopts="" -q -rf -p no:warnings -n 10 --timeout 150 -k "not cpu" \
  -m "not gpu_alone" tests/test_b*.py tests/test_d*.py tests/test_f*.py > $OUT/s52_gpu_a.txt 2>&1
echo "rc $?"; grep -E "FAILED|ERROR" $OUT/s52_gpu_a.txt | head -30; tail -3 $OUT/s52_gpu_a.txt
