#!/bin/bash
# Session 43, call 5: the route tests after their refactor (graph_replay / spy), then the causal 8k A/B.
export PYTHONPATH=src
timeout 120 python -m pytest -q -o addopts="" -m gpu tests/test_gluon_window_schedule.py tests/test_fwd_gluon_o_stage.py \
  -k "flash_attn_func" 2>&1 | tail -3 | tee $OUT/s43e_tests.txt
cd bench/gpu && timeout 150 python s43_causal8k_ab.py 2>&1 | tee $OUT/s43_causal8k_ab.txt
