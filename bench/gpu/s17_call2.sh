#!/usr/bin/env bash
# Session 17, call 2: the persistent dQ at D = 128 gave NaN rows (call 1); per-kernel
# diagnosis, then the A/B with dK/dV persistent only at D = 128 and both at D = 64.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 120 python bench/gpu/s17_bwd_persistent_ab.py diag 2>&1 | grep -v Warn | tee $OUT/diag.txt
timeout 220 python bench/gpu/s17_bwd_persistent_ab.py ab --head-dims 128 --kernels dkdv --seqlens 512 1024 2048 4096 16384 2>&1 | grep -v Warn | tee $OUT/ab128.txt
timeout 200 python bench/gpu/s17_bwd_persistent_ab.py ab --head-dims 64 --seqlens 512 1024 2048 4096 16384 2>&1 | grep -v Warn | tee $OUT/ab64.txt
