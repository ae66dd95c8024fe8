#!/bin/bash
# Session 43, call 3: the window route with the host's deal (GPU tests, then the features bench's window case) and
# the backward TAIL order (GPU tests, then bench/gpu/s43_bwd_tail_ab.py).
export PYTHONPATH=src
timeout 170 python -m pytest -q -o addopts="" -m gpu tests/test_gluon_window_schedule.py tests/test_fwd_gluon_o_stage.py \
  tests/test_bwd_gluon_fused_band.py -k "flash_attn_func or tail or route" 2>&1 | tail -4 | tee $OUT/s43c_tests.txt
timeout 110 python -m flashtriton.bench.features --cases window --out $OUT/features 2>&1 | tail -12
timeout 300 python bench/gpu/s43_bwd_tail_ab.py 2>&1 | tee $OUT/s43_bwd_tail_ab.txt
