#!/usr/bin/env bash
# Session 21, call 5 (~5 min): the split dropout backward by default
# (policy.BWD_SPLIT_DROPOUT_MAX_N, persistent masked dropout kinds): dropout and persistent
# tests on the GPU, the features bench's dropout rows, and the non-causal dropout
# backward's whole call against bwd.py at 4k / 8k.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-compute-apps=pid,name --format=csv
timeout 150 python -m pytest tests/test_dropout.py tests/test_prefill.py -o addopts="" -q -rf -p no:warnings -n 8 \
  --timeout 120 -k "dropout or persistent or split" 2>&1 | tail -3
timeout 150 python -m flashtriton.bench.features --cases dropout --out $OUT/features 2>&1 | grep -v Warn | grep "dropout\|determ"
(cd bench/gpu && timeout 120 python s21_dropout_whole_ab.py 2>&1 | grep -v Warn | tee $OUT/dropout-whole-ab.txt)
