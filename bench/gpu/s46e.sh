#!/bin/bash
# Session 46, call 5: the D = 128 cells the grid shows under 1.0x cuDNN in the forward, kernel-only in nine rotating
# rounds (s46_cudnn_spread.py): bf16 causal 1k-8k (grid 0.94 / 1.03 / 1.05 / 1.10 from 1k), fp16 causal 1k-8k (grid
# 0.93 / 1.01 / 1.02 / 0.96), fp16 non-causal 2k / 4k / 8k (grid 1.03 / 1.06 / 1.08).
# Prediction: every cell from 2k >= 1.0x in the median of the per-round ratios (fp16 causal 8k's 0.96 a cuDNN
# first-round high, as call 1 found for bf16 non-causal); 1k causal 0.93-0.97x in both dtypes.
export PYTHONPATH=$PWD/src
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv | tee $OUT/gpu.txt
cd bench/gpu
for dt in bf16 fp16; do
  S46_CAUSAL=1 S46_DTYPE=$dt S46_NS=1024,2048,4096,8192 timeout 150 python s46_cudnn_spread.py 2>&1 \
    | tee $OUT/s46_spread_d128c_$dt.txt
done
S46_DTYPE=fp16 timeout 120 python s46_cudnn_spread.py 2>&1 | tee $OUT/s46_spread_d128nc_fp16.txt
