#!/usr/bin/env bash
# Session 5, final GPU call B: the prefill grid (bf16, causal and not) at D = 128 with
# FlexAttention compiled statically per shape, and at D = 64 without Flex, beside SDPA
# FLASH and CUDNN; forward CUDA-graph replays up to N = 2k.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 350 python -m flashtriton bench --suite prefill --out $OUT -- --head-dims 128 --graph-upto 2048 \
  --tag prefill-d128 2>&1 | grep -v Warning | grep -E "^\|" | head -40
timeout 120 python -m flashtriton bench --suite prefill --out $OUT -- --head-dims 64 --no-flex --graph-upto 2048 \
  --tag prefill-d64 2>&1 | grep -v Warning | grep -E "^\|" | head -40
