#!/usr/bin/env bash
# Session 24, call 1 (~8 min; prepared in session 23): the whole GPU suite (the causal
# Gluon route's routed tests - tests/test_fwd_gluon.py - run through flash_attn_func for
# the first time, with the Gluon route in CUDA graphs, the aliased-plan regression and the
# varlen head_dim 192 case on the GPU), then the grid rows that session 23's last routes changed without a grid
# run: D = 128 causal (Gluon from 8k) and D = 64 non-causal (Gluon from 16k), every
# length, every provider (Flex included), to merge into prefill.md.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 300 bash bench/gpu/tests.sh
timeout 130 python -m flashtriton bench --suite prefill --out $OUT -- --head-dims 128 --causal yes \
  --seqlens 512 1024 2048 4096 8192 16384 --tag s24-d128c 2>&1 | grep -v Warn | tail -14
timeout 120 python -m flashtriton bench --suite prefill --out $OUT -- --head-dims 64 --causal no \
  --seqlens 512 1024 2048 4096 8192 16384 --tag s24-d64 2>&1 | grep -v Warn | tail -14
