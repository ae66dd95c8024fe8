#!/bin/bash
# Session 76, call 2 (any card): the dense sweep restricted to what the dense Gluon kernels take (GLUON=1: D 64 /
# 128 / 256, no ALiBi or softcap, lengths 300-4200), bf16 then fp16, no one-key rows.   bash bench/gpu/s76b.sh
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src ONE_KEY=0 DENSE=1 LENS=big GLUON=1
out=${OUT:-/tmp}
date -u +%H:%M:%S
nvidia-smi --query-gpu=name --format=csv,noheader | tee $out/gpu.txt
timeout 300 python bench/cpu/s66_varlen_fuzz.py 7604 230 triton bf16 > $out/s76b_gluon_bf16.txt 2>&1
tail -n 1 $out/s76b_gluon_bf16.txt
timeout 180 python bench/cpu/s66_varlen_fuzz.py 7605 120 triton fp16 > $out/s76b_gluon_fp16.txt 2>&1
tail -n 1 $out/s76b_gluon_fp16.txt
grep -h "^FAIL\|^EXC" $out/s76b_*.txt | head -30 | cut -c1-330
date -u +%H:%M:%S
