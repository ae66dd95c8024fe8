#!/usr/bin/env bash
# Session 23, call 2 (~4 min): the D = 256 varlen forward A/B with its timing fixed (call 1
# timed return_attn_probs' S_dmask), the D = 128 window forward on the persistent fwd_ws.py,
# and a per-kernel profile of the D = 256 backward against FA2 and cuDNN.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
cd bench/gpu
timeout 120 python s23_varlen_d256_ab.py 2>&1 | grep -v Warn | tee $OUT/varlen-d256-ab.txt
timeout 120 python s23_window_fwd_ab.py 2>&1 | grep -v Warn | tee $OUT/window-fwd-ab.txt
timeout 200 python s23_d256_bwd_profile.py 2>&1 | grep -v Warn | tee $OUT/d256-bwd-profile.txt
