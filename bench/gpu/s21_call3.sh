#!/usr/bin/env bash
# Session 21, call 3 (~5 min): the rows BWD_FUSED_DELTA reaches (bwd.py's own path):
# D = 64 / 128 non-causal 512-2k, D = 256 both 512-4k; and the window / dropout features.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-compute-apps=pid,name --format=csv
timeout 150 python -m flashtriton bench --suite prefill --out $OUT -- --head-dims 64 128 --no-flex --causal no \
  --seqlens 512 1024 2048 --tag s21-short-nc 2>&1 | grep -v Warn | grep "^|\|^###"
timeout 180 python -m flashtriton bench --suite prefill --out $OUT -- --head-dims 256 --no-flex --causal both \
  --seqlens 512 1024 2048 4096 --tag s21-d256 2>&1 | grep -v Warn | grep "^|\|^###"
timeout 200 python -m flashtriton.bench.features --cases window dropout --out $OUT/features 2>&1 | grep -v Warn | tail -25
