#!/usr/bin/env bash
# Session 21, call 8 (~2 min): the dropout dK/dV loop's pointer loads at 8k
# (s21_rk_ahead_ab.py), and the pointer-load tests on the GPU.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
(cd bench/gpu && timeout 150 python s21_rk_ahead_ab.py 2>&1 | grep -v Warn | tee $OUT/rk-ahead-ab.txt)
timeout 90 python -m pytest tests/test_prefill.py -o addopts="" -q -rf -p no:warnings -n 8 --timeout 80 \
  -k "vector_pointer_loads" 2>&1 | tail -3
