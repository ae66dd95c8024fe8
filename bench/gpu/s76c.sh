#!/bin/bash
# Session 76, call 3 (any card): s76b.sh's sweep on new seeds with ROUTES=1 (which routed launchers each case
# reached), bf16 then fp16, no one-key rows.   bash bench/gpu/s76c.sh
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src ONE_KEY=0 DENSE=1 LENS=big GLUON=1 ROUTES=1
out=${OUT:-/tmp}
date -u +%H:%M:%S
nvidia-smi --query-gpu=name --format=csv,noheader | tee $out/gpu.txt
timeout 280 python bench/cpu/s66_varlen_fuzz.py 7606 220 triton bf16 > $out/s76c_gluon_bf16.txt 2>&1
grep "^routes\|^seed" $out/s76c_gluon_bf16.txt
timeout 170 python bench/cpu/s66_varlen_fuzz.py 7607 110 triton fp16 > $out/s76c_gluon_fp16.txt 2>&1
grep "^routes\|^seed" $out/s76c_gluon_fp16.txt
grep -h "^FAIL\|^EXC" $out/s76c_*.txt | head -30 | cut -c1-330
date -u +%H:%M:%S
