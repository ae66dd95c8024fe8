#!/usr/bin/env bash
# Session 6, final GPU call: the whole GPU test suite (warp-specialized forward and the
# rows-first grid in), then the prefill grid at D = 128 (bf16, causal and not) with
# FlexAttention compiled statically per shape, beside SDPA FLASH and CUDNN; forward
# CUDA-graph replays up to N = 2k.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
timeout 200 python -m pytest tests -o addopts="" -v -rf --tb=short -p no:warnings -p no:benchmark -n 10 --timeout 150 \
  -k "not cpu" > $OUT/pytest-gpu.txt 2>&1
echo "pytest rc=$?"; grep -E "^FAILED|^ERROR" $OUT/pytest-gpu.txt | head -20; tail -1 $OUT/pytest-gpu.txt
timeout 330 python -m flashtriton bench --suite prefill --out $OUT -- --head-dims 128 --graph-upto 2048 \
  --tag prefill-d128 2>&1 | grep -v Warning | grep -E "^\|" | head -40
