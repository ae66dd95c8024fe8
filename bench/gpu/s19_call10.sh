#!/usr/bin/env bash
# Session 19, last call (~7 min): D = 256 backward tiles at 512 / 1k, then the fp16 grid
# (prefill-fp16.md dates from 2026-11-30 01:56 UTC, before sessions 13-19's kernels).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-compute-apps=pid,name --format=csv
timeout 170 python bench/gpu/s19_d256_bwd_tiles.py 2>&1 | grep -v Warn | tee $OUT/d256-bwd-tiles.txt
timeout 300 python -m flashtriton bench --suite prefill --out $OUT -- --head-dims 64 128 256 --dtypes float16 \
  --no-flex --tag prefill-fp16 2>&1 | grep -v Warn | grep "^|\|^###"
