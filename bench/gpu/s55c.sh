#!/bin/bash
# Session 55, call 3: the GPU fp32 probe (s55_fp32_probe.py), then a fp32-only fuzz on the GPU kernels.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout -s INT 200 python bench/gpu/s55_fp32_probe.py 2>&1 | grep -v "Warn\|warn" | tee $OUT/s55c_probe.txt
timeout -s INT 150 python bench/cpu/s54_cpu_accuracy_fuzz.py 56 120 fp32 triton > $OUT/s55c_fuzz32.txt 2>&1
cut -c1-260 $OUT/s55c_fuzz32.txt | tail -20
