#!/usr/bin/env bash
# Session 23, call 1 (~4 min; prepared in session 22): bwd.py's dK/dV as two launches
# (launchers.backward.DKDV_PARTS) against one (s23_dkdv_parts_ab.py), and the parts test
# on the GPU.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
(cd bench/gpu && timeout 300 python s23_dkdv_parts_ab.py 2>&1 | grep -v Warn | tee $OUT/dkdv-parts-ab.txt)
timeout 120 python -m pytest tests/test_prefill.py -o addopts="" -q -rf -p no:warnings -n 8 --timeout 100 \
  -k "dkdv_parts or dkdv_layouts" 2>&1 | tail -3
