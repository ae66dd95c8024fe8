#!/bin/bash
# Session 63, call 1: session 61's queued work in one call (a machine start costs ~3 min of the 30): the fp32 decode
# tiles (s61g.sh: timing, then the fp32 / route / kvcache tests with the 16-key 8-warp tile forced), and on an H200
# the one-row route re-timed (s61f.sh).
export PYTHONUNBUFFERED=1
python -c "import torch, triton; print(torch.__version__, triton.__version__)"
bash bench/gpu/s61g.sh
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then bash bench/gpu/s61f.sh; fi
