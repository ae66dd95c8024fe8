#!/usr/bin/env bash
# Session 19, call 3 (~9 min): the prefill grid at D = 64 / 128, 1k-16k, with cuDNN and
# FA2 in the same run, after the VEC_PTR kind rule and the flat-descriptor helper
# (both changed the backward's kernels); then the features dropout rows.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-compute-apps=pid,name --format=csv
timeout 400 python -m flashtriton bench --suite prefill --out $OUT -- --head-dims 64 128 --no-flex \
  --seqlens 1024 2048 4096 8192 16384 --tag s19-grid 2>&1 | grep -v Warn | grep "^|\|^###"
timeout 100 python -m flashtriton.bench.features --cases dropout --out $OUT/features 2>&1 | grep -v Warn | tail -9
