#!/usr/bin/env bash
# Session 21, call 2 (~8 min): BWD_FUSED_DELTA = {64, 128, 256} and RESUME_ONE_LOOP =
# {64, 128} by default (s21/call1's A/B): the GPU suite, then the grid's causal rows
# D = 64 / 128 at 512-16k (to merge into prefill.json).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-compute-apps=pid,name --format=csv
timeout 330 bash bench/gpu/tests.sh 2>&1 | tail -8
timeout 240 python -m flashtriton bench --suite prefill --out $OUT -- --head-dims 64 128 --no-flex --causal yes \
  --seqlens 512 1024 2048 4096 8192 16384 --tag s21-causal 2>&1 | grep -v Warn | grep "^|\|^###"
