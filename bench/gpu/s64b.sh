#!/bin/bash
# Session 64, call 2: s64a.sh's H200 part only (the one-row route in bf16 / fp32, the fp32 decode tiles, the window
# row); on any other card it stops at once (s64a.sh ran the tests on the H100).
export PYTHONUNBUFFERED=1
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$gpu"
echo "$gpu" | grep -q H200 || exit 0
bash bench/gpu/s64a.sh
