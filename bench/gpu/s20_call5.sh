#!/usr/bin/env bash
# Session 20, call 5 (~2 min): the window backward with the split on one kernel
# (s20_window_split_ab.py), and the new split tests on the GPU.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-compute-apps=pid,name --format=csv
timeout 200 python bench/gpu/s20_window_split_ab.py 2>&1 | grep -v Warn | tee $OUT/window-split-ab.txt
timeout 150 python -m pytest tests/test_prefill.py -o addopts="" -q -rf -p no:warnings -n 8 --timeout 100 \
  -k "split_backward_one_kernel or split_kernels_rule or warp_specialized_split_backward" 2>&1 | tail -3
