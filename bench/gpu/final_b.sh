#!/usr/bin/env bash
# Final GPU call B: the FA2 paper grid, bf16, D 64/128/256, causal and not, against
# SDPA FLASH_ATTENTION, SDPA CUDNN_ATTENTION and compiled FlexAttention; peak memory;
# small-shape latency.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 470 python -m flashtriton bench --suite prefill --out $OUT -- --head-dims 128 64 256 --memory --tag prefill 2>&1 | tail -70
timeout 60 python -m flashtriton.bench.latency 2>&1 | tee $OUT/latency.md
