#!/usr/bin/env bash
# Session 22, call 3 (~8 min): the grid rows the forward changes touch - D = 64 at every
# length, D = 128 / 256 up to 2k - each provider side by side (no Flex).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 280 python -m flashtriton bench --suite prefill --out $OUT -- --head-dims 64 --no-flex \
  --seqlens 512 1024 2048 4096 8192 16384 --tag s22-d64 2>&1 | grep -v Warn | tail -40
timeout 260 python -m flashtriton bench --suite prefill --out $OUT -- --head-dims 128 256 --no-flex \
  --seqlens 512 1024 2048 --tag s22-short 2>&1 | grep -v Warn | tail -40
