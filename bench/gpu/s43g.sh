#!/bin/bash
# Session 43, call 8 (bench/wip/gluon-fwd-o-stage3.patch applied): O_STAGE for the 3-consumer D = 64 kernel: GPU tests,
# the A/B (bench/gpu/s43_o_stage3_ab.py).
export PYTHONPATH=$PWD/src
timeout 150 python -m pytest -q -o addopts="" -m gpu tests/test_fwd_gluon_o_stage3.py -x 2>&1 | tail -4 \
  | tee $OUT/s43g_tests.txt
cd bench/gpu && timeout 170 python s43_o_stage3_ab.py 2>&1 | tee $OUT/s43_o_stage3_ab.txt
