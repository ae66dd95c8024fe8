#!/usr/bin/env bash
# Session 5, GPU call 6: the eager host-time rule for the forward's host descriptors
# (HOST_DESC_MIN_EAGER_FLOPS) at N <= 2k, D = 128, eager and graph.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 100 python -m pytest tests/test_prefill.py -o addopts="" -q -rf --tb=short -p no:warnings -n 4 --timeout 90 \
  -k "host_desc" 2>&1 | tail -2
timeout 150 python -m flashtriton bench --suite prefill --out $OUT -- --head-dims 128 --seqlens 512 1024 2048 \
  --no-flex --graph-upto 2048 --tag prefill-smalln 2>&1 | grep -v Warning | grep -E "^\|" | head -30
