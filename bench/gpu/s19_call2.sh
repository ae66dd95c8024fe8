#!/usr/bin/env bash
# Session 19, call 2 (~7 min): bench/wip/bwd-ws-flat-descs.patch applied (the persistent
# kernels' input descriptors through one helper; PTX differs offline) and the VEC_PTR
# kind rule (2 unmasked). 1. persistent stress of the patched kernels, one process;
# 2. the whole GPU suite (parallel part, then gpu_alone serially).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-compute-apps=pid,name --format=csv
timeout 150 python bench/gpu/s18_long_stress.py 25 128:4096:0:0 64:16384:0:0 128:4096:0:0.1 128:2048:1:0 2>&1 | grep -v Warn | tee $OUT/flat-descs-stress.txt
timeout 400 bash bench/gpu/tests.sh
