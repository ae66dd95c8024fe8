#!/usr/bin/env bash
# Session 7, call 4: window forward main vs branch (s7_window_ab.py), then the prefill
# grids (D = 128 with Flex, D = 64) on the branch for the README.
set -u
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
for t in main branch main branch; do
  if [ $t = main ]; then p=$PWD/_main_src/src; else p=$PWD/src; fi
  PYTHONPATH=$p timeout 60 python bench/gpu/s7_window_ab.py $t 2>&1 | grep -v Warn | grep -v "^/"
done | tee $OUT/s7-window-ab.txt
export PYTHONPATH=$PWD/src
timeout 330 python -m flashtriton bench --suite prefill --out $OUT -- --head-dims 128 --graph-upto 2048 --tag prefill-d128 2>&1 \
  | grep -v Warning | tail -3
timeout 90 python -m flashtriton bench --suite prefill --out $OUT -- --head-dims 64 --no-flex --graph-upto 2048 --tag prefill-d64 2>&1 \
  | grep -v Warning | tail -3
