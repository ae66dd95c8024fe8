#!/bin/bash
# Session 72's first GPU call: (1) session 71's illegal-memory-access repro, each variant in a fresh process;
# (2) the tf32x3 tile sweep at D = 192; (3) the features table's float32 row (an H200 re-time if an H200 came).
# Outputs under $OUT.   bash bench/gpu/s72a.sh
export PYTHONUNBUFFERED=1
out=${OUT:-/tmp}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $out/gpu.txt
PYTHONPATH=$PWD/src timeout 330 python bench/gpu/s71_ima_repro.py 2>&1 | tee $out/s72_ima_repro.txt
PYTHONPATH=$PWD/src:$PWD/tests:$PWD/bench/gpu timeout 150 python bench/gpu/s72_x3_d192.py 130 2>&1 \
  | tee $out/s72_x3_d192.txt
PYTHONPATH=$PWD/src timeout 100 python -m flashtriton.bench.features --cases float32 --rounds 3 --no-flex \
  --out $out/feat 2>&1 | tail -9
