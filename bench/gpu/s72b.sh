#!/bin/bash
# Session 72's second GPU call: the new block_d 256 tensor-core fp32 tiles at D = 256, causal, plain tf32, and
# 1-stage tiles at block_d 128 (s72_x3_tiles2.py); then the fp32 GPU tests under x3 on the new table.
# Outputs under $OUT.   bash bench/gpu/s72b.sh   (as run: timing guard 250 s)
bash bench/gpu/sweep_then_fp32_tests.sh s72_x3_tiles2.py 220 s72b_tests_x3 200
