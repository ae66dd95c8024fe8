#!/bin/bash
# Session 61, call 6 (only if an H200 is lent): the one-row route re-timed there, bf16 and fp32.
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader
PYTHONPATH=src timeout -s INT 80 python bench/gpu/s60_one_row_route_probe.py 2>&1 | tee $OUT/s61f_route_bf16.txt | grep -v Warn
PYTHONPATH=src timeout -s INT 80 python bench/gpu/s60_one_row_route_probe.py fp32 256,1024,8192,32768 2>&1 | tee $OUT/s61f_route_fp32.txt | grep -v Warn
