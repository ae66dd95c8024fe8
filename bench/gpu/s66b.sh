#!/bin/bash
# Session 66, call 2: on any card, the ALiBi far-row accuracy probe on the Triton kernels (bf16 / fp32); on an
# H200 also the queued fp32 one-row route probe (s66a.sh's).
#   bash bench/gpu/s66b.sh
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
out=${OUT:-/tmp}
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$gpu"
python -c "import torch, triton; print(torch.__version__, triton.__version__)"
timeout 240 python bench/gpu/s66_alibi_far_rows.py cuda triton 2>&1 | tee $out/s66b_alibi_far_rows.txt
echo "$gpu" | grep -q H200 || exit 0
ROUNDS=3 timeout 300 python bench/gpu/s60_one_row_route_probe.py fp32 64,128,256,1024 2>&1 | tee $out/s66b_fp32_route.txt
