#!/bin/bash
# Session 44, call 6: the D = 64 and D = 256 grids, bf16, one process each (the causal efficiency from 8k read
# within one run, as call 5 did for D = 128).
export PYTHONPATH=$PWD/src
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv | tee $OUT/gpu.txt
timeout 250 python -m flashtriton bench --suite prefill --out $OUT -- --head-dims 64 --tag s44-d64 2>&1 | tail -32
timeout 250 python -m flashtriton bench --suite prefill --out $OUT -- --head-dims 256 --tag s44-d256 2>&1 | tail -32
