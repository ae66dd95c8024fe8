#!/bin/bash
# Session 52, call 3: the whole GPU suite, second half: tests/test_g* .. test_v* (and test_bench_tools etc. already
# in call 2), 10 workers, then the gpu_alone tests in one process.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader | tee $OUT/gpu.txt
timeout -s INT 470 python -m pytest -o addopts="" -q -rf -p no:warnings -n 10 --timeout 150 -k "not cpu" \
  -m "not gpu_alone" tests/test_[g-z]*.py > $OUT/s52_gpu_b.txt 2>&1
echo "rc $?"; grep -E "FAILED|ERROR" $OUT/s52_gpu_b.txt | head -30; tail -3 $OUT/s52_gpu_b.txt
timeout -s INT 90 python -m pytest tests -o addopts="" -q -rf -p no:warnings --timeout 300 -m gpu_alone \
  > $OUT/s52_gpu_alone.txt 2>&1; echo "rc $?"; tail -3 $OUT/s52_gpu_alone.txt
