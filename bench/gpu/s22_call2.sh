#!/usr/bin/env bash
# Session 22, call 2 (~6 min): the forward's host-made descriptors for short eager calls
# (s22_host_desc_ab.py), then the GPU suite on the tree (D = 64 plain forwards on the
# persistent fwd_ws.py, causal D = 128 512 on it, host descriptors always).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
(cd bench/gpu && timeout 200 python s22_host_desc_ab.py 2>&1 | grep -v Warn | tee $OUT/host-desc-ab.txt)
timeout 330 bash bench/gpu/tests.sh
