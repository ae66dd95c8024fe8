#!/bin/bash
# Session 46, call 1: the grid's single-cell cuDNN jumps (s46_cudnn_spread.py, nine rotating rounds, kernel-only):
# D = 128 non-causal bf16 2k / 4k / 8k, then D = 64 causal 2k / 4k in bf16 and fp16. Predictions in its docstring.
export PYTHONPATH=$PWD/src
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv | tee $OUT/gpu.txt
cd bench/gpu
timeout 150 python s46_cudnn_spread.py 2>&1 | tee $OUT/s46_spread_d128nc.txt
for dt in bf16 fp16; do
  S46_D=64 S46_CAUSAL=1 S46_DTYPE=$dt S46_NS=2048,4096 timeout 120 python s46_cudnn_spread.py 2>&1 \
    | tee $OUT/s46_spread_d64c_$dt.txt
done
