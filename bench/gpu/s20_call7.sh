#!/usr/bin/env bash
# Session 20, call 7 (~6 min): the short backward's profile against FA2 / cuDNN, then the
# whole GPU suite on the final tree.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-compute-apps=pid,name --format=csv
timeout 120 python bench/gpu/s20_short_bwd_profile.py 2>&1 | grep -v Warn | tee $OUT/short-bwd-profile.txt
timeout 330 bash bench/gpu/tests.sh 2>&1 | tail -6
