#!/bin/bash
# Session 45, call 6: the D = 128 non-causal bf16 grid rows, one process (session 44's 4k cell read 0.96x cuDNN with
# cuDNN at 649 TFLOP/s, 594 in session 42's run).
export PYTHONPATH=$PWD/src
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv | tee $OUT/gpu.txt
timeout 170 python -m flashtriton bench --suite prefill --out $OUT -- --head-dims 128 --causal no \
  --tag s45-d128nc 2>&1 | tail -12
