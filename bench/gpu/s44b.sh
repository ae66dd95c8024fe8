#!/bin/bash
# Session 44, call 2: the causal D = 128 forward at 16k, routed one-block kernel against O_STAGE with the host's deal
# (bf16 and fp16, three interleaved rounds; prediction and rule in s43_causal8k_ab.py's docstring).
export PYTHONPATH=$PWD/src
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv | tee $OUT/gpu.txt
cd bench/gpu
S43C_N=16384 timeout 240 python s43_causal8k_ab.py 2>&1 | tee $OUT/s44_causal16k_ab.txt
