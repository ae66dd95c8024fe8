#!/bin/bash
# Session 76 (any card): the dense sweep (bench/cpu/s66_varlen_fuzz.py with DENSE=1, new this session) on the GPU
# kernels, no one-key rows: lengths around the dense Gluon routes' thresholds (LENS=big) in bf16 / fp16, then short
# ones in every dtype. On an H200 first session 74's call (s74e.sh: the README's H200 float32 row).
#   bash bench/gpu/s76.sh            outputs: $OUT
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src ONE_KEY=0 DENSE=1
out=${OUT:-/tmp}
date -u +%H:%M:%S
nvidia-smi --query-gpu=name --format=csv,noheader | tee $out/gpu.txt
python -c "import torch, triton; print(torch.__version__, triton.__version__)" | tee -a $out/gpu.txt
if grep -q H200 $out/gpu.txt; then bash bench/gpu/s74e.sh 230 > $out/s74e.txt 2>&1; tail -30 $out/s74e.txt; fi
LENS=big timeout 260 python bench/cpu/s66_varlen_fuzz.py 7601 200 triton bf16 > $out/s76_dense_big_bf16.txt 2>&1
tail -n 1 $out/s76_dense_big_bf16.txt
LENS=big timeout 150 python bench/cpu/s66_varlen_fuzz.py 7602 90 triton fp16 > $out/s76_dense_big_fp16.txt 2>&1
tail -n 1 $out/s76_dense_big_fp16.txt
timeout 110 python bench/cpu/s66_varlen_fuzz.py 7603 60 triton any > $out/s76_dense_small_any.txt 2>&1
tail -n 1 $out/s76_dense_small_any.txt
grep -h "^FAIL\|^EXC" $out/s76_*.txt | head -30 | cut -c1-330
date -u +%H:%M:%S
