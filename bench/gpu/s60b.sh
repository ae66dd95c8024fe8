#!/bin/bash
# Session 60, call 2: call 1's script (s60a.sh) again with the fp32 few-rows forward tile (configs.FP32_FEW_ROWS),
# its outputs named s60b_*.
PREFIX=s60b exec bash bench/gpu/s60a.sh
