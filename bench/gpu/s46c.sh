#!/bin/bash
# Session 46, call 3: the GPU tests of the O_STAGE route (fp16 D = 64 causal 4k now routed) and the fp16 D = 64
# causal grid rows 2k / 4k / 8k on the new route (merged into prefill-fp16.md). Prediction: fp16 4k forward 0.96-1.00x
# cuDNN in the grid (0.97x in session 45's run on the 3-consumer kernel, 0.933x kernel-only in call 1).
export PYTHONPATH=$PWD/src
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv | tee $OUT/gpu.txt
timeout 200 python -m pytest -o addopts="" -q -m gpu tests/test_fwd_gluon_o_stage.py 2>&1 | tail -4 | tee $OUT/s46_tests.txt
timeout 200 python -m flashtriton bench --suite prefill --out $OUT -- --head-dims 64 --dtypes float16 --causal yes \
  --seqlens 2048 4096 8192 --tag s46-d64c-fp16 2>&1 | tail -12
