#!/bin/bash
# Session 66, call 3 (any card): the varlen sweep (bench/cpu/s66_varlen_fuzz.py) on the GPU kernels, no one-key rows:
# long sequences (the Gluon VARLEN routes among them) in bf16 / fp16, then short ones in every dtype.
#   bash bench/gpu/s66c.sh
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src ONE_KEY=0
out=${OUT:-/tmp}
nvidia-smi --query-gpu=name --format=csv,noheader
python -c "import torch, triton; print(torch.__version__, triton.__version__)"
LENS=big timeout 330 python bench/cpu/s66_varlen_fuzz.py 72 260 triton bf16 > $out/s66c_varlen_big_bf16.txt 2>&1
tail -n 1 $out/s66c_varlen_big_bf16.txt; grep -c "^FAIL\|^EXC" $out/s66c_varlen_big_bf16.txt
LENS=big timeout 150 python bench/cpu/s66_varlen_fuzz.py 73 100 triton fp16 > $out/s66c_varlen_big_fp16.txt 2>&1
tail -n 1 $out/s66c_varlen_big_fp16.txt
timeout 150 python bench/cpu/s66_varlen_fuzz.py 74 110 triton any > $out/s66c_varlen_small_any.txt 2>&1
tail -n 1 $out/s66c_varlen_small_any.txt
grep -h "^FAIL\|^EXC" $out/s66c_*.txt | head -20 | cut -c1-300
