#!/bin/bash
# Session 66, call 1: the queued H200 question (NOTES "Next GPU session (66)", item 1): the fp32 one-row route at
# B = 1 with 64-256 keys, rotated rounds. Stops at once on any other card (the H100's rotated reading is in
# bench/results/nvidia-h100/s65/).
#   bash bench/gpu/s66a.sh
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
out=${OUT:-/tmp}
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$gpu"
echo "$gpu" | grep -q H200 || exit 0
python -c "import torch, triton; print(torch.__version__, triton.__version__)"
ROUNDS=3 python bench/gpu/s60_one_row_route_probe.py fp32 64,128,256,1024 2>&1 | tee $out/s66a_fp32_route.txt
ROUNDS=3 python bench/gpu/s60_one_row_route_probe.py fp32 64,128,256 2>&1 | tee $out/s66a_fp32_route_rep.txt
