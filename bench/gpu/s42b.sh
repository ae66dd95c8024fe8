#!/bin/bash
# Session 42, call 4: O_STAGE's GPU tests, the routing lengths (s42_o_stage_ab.py route)
export PYTHONPATH=src
timeout 330 python -m pytest -o addopts="" -q -m gpu -x tests/test_fwd_gluon_o_stage.py 2>&1 | tail -5 | tee $OUT/s42b_tests.txt
timeout 240 python bench/gpu/s42_o_stage_ab.py route 2>&1 | tee $OUT/s42b_route.txt
