#!/usr/bin/env bash
# Session 22, call 6 (~9 min): host-made descriptors in the D = 128 causal backward
# (launchers.common.host_desc_default, from call 5): the GPU suite, the D = 128 causal grid
# rows, and the window / dropout features.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 150 python -m flashtriton bench --suite prefill --out $OUT -- --head-dims 128 --no-flex --causal yes \
  --seqlens 512 1024 2048 4096 8192 16384 --tag s22-d128c 2>&1 | grep -v Warn | grep "^|\|^###"
timeout 150 python -m flashtriton.bench.features --cases window dropout --out $OUT/features 2>&1 | grep -v Warn | tail -12
timeout 280 bash bench/gpu/tests.sh
