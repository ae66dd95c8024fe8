#!/usr/bin/env bash
# Session 20, call 4 (~6 min): the split backward from 1k at D = 128 and from 4k at D = 64
# (persistent), resumed tiles halved in query rows at D = 64 too: the prefill-side GPU
# tests, then the grid's causal rows D = 64 at 2k-16k, D = 128 at 1k.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-compute-apps=pid,name --format=csv
timeout 260 python -m pytest tests/test_prefill.py tests/test_masks.py tests/test_varlen.py tests/test_determinism.py \
  -o addopts="" -q -rf -p no:warnings -n 10 --timeout 150 -k "not cpu" -m "not gpu_alone" 2>&1 | tail -4
timeout 200 python -m flashtriton bench --suite prefill --out $OUT -- --head-dims 64 --no-flex --causal yes \
  --seqlens 2048 4096 8192 16384 --tag s20-d64-causal 2>&1 | grep -v Warn | grep "^|\|^###"
timeout 100 python -m flashtriton bench --suite prefill --out $OUT -- --head-dims 128 --no-flex --causal yes \
  --seqlens 1024 --tag s20-d128-1k 2>&1 | grep -v Warn | grep "^|\|^###"
