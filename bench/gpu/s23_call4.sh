#!/usr/bin/env bash
# Session 23, call 4 (~6 min): the varlen tests on the GPU (the D = 256 varlen forward now
# on fwd_ws_varlen.py), then the rest of the grid with FlexAttention side by side: D = 128
# at every length, D = 64 / 256 at 512 / 2k / 8k (call 3 ran 1k / 4k / 16k).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 100 python -m pytest tests/test_varlen.py -o addopts="" -q -rf -p no:warnings -n 4 --timeout 90 \
  -k "not cpu" > $OUT/pytest-varlen.txt 2>&1; echo "varlen tests rc=$?"; tail -3 $OUT/pytest-varlen.txt
timeout 200 python -m flashtriton bench --suite prefill --out $OUT -- --head-dims 128 \
  --seqlens 512 1024 2048 4096 8192 16384 --tag s23-flex-d128 2>&1 | grep -v Warn | tail -32
timeout 200 python -m flashtriton bench --suite prefill --out $OUT -- --head-dims 64 256 \
  --seqlens 512 2048 8192 --tag s23-flex-short 2>&1 | grep -v Warn | tail -50
