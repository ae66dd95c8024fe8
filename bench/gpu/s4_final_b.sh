#!/usr/bin/env bash
# Session 4, final GPU call B: the prefill grid at D = 128 (bf16, causal and not) with
# FlexAttention compiled statically per shape, beside SDPA FLASH and CUDNN.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 360 python -m flashtriton bench --suite prefill --out $OUT -- --head-dims 128 --tag prefill-d128 2>&1 \
  | grep -v Warning | tail -40
