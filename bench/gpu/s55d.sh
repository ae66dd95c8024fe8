#!/bin/bash
# Session 55, call 4: the fp32 probe at Nq = 1 / 2 with the reference on the GPU (as the tests) and on the CPU, a
# fp32 fuzz with GPU references, then s54c.sh's D = 256 grid rows at three rounds (the device time left).
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout -s INT 80 python bench/gpu/s55_fp32_probe.py cuda 1,2 2>&1 | grep "^D=" | tee $OUT/s55d_probe_cuda.txt
timeout -s INT 100 python bench/cpu/s54_cpu_accuracy_fuzz.py 57 80 fp32 triton dev > $OUT/s55d_fuzz32.txt 2>&1
cut -c1-260 $OUT/s55d_fuzz32.txt | tail -12
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader
timeout -s INT 250 python -m flashtriton.bench.prefill --head-dims 256 --causal both --seqlens 2048 8192 \
  --dtypes bfloat16 --rounds 3 --out $OUT --tag s55-d256 2>&1 | grep -v "Warn\|warn" | tail -24
