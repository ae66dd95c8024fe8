#!/usr/bin/env bash
# Session 20, call 2 (~6 min): resumed tiles halved with query rows by default
# (launchers.backward.RESUME_HALVED / RESUME_QUERY_ROWS): the GPU suite, then the grid's
# causal rows D = 64 / 128 at 1k-16k (to merge into prefill.json).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-compute-apps=pid,name --format=csv
timeout 330 bash bench/gpu/tests.sh 2>&1 | tail -6
timeout 250 python -m flashtriton bench --suite prefill --out $OUT -- --head-dims 64 128 --no-flex --causal yes \
  --seqlens 1024 2048 4096 8192 16384 --tag s20-causal 2>&1 | grep -v Warn | grep "^|\|^###"
