#!/bin/bash
# Session 49, call 7: the Gluon forward's GPU tests (every variant file: the kernel's shared code paths changed for
# VARLEN), launch plans, masks and prefill core on the H200, in parallel.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv | tee $OUT/gpu.txt
timeout 420 python -m pytest -o addopts="" -q -rf -p no:warnings -n 10 --timeout 200 tests/test_fwd_gluon.py \
  tests/test_fwd_gluon_3wg.py tests/test_fwd_gluon_causal_3wg.py tests/test_fwd_gluon_d256.py \
  tests/test_fwd_gluon_o_stage.py tests/test_fwd_gluon_own_tiles.py tests/test_fwd_gluon_window_early_q.py \
  tests/test_fwd_gluon_window_lean_mask.py tests/test_fwd_gluon_varlen.py tests/test_gluon_schedule.py \
  tests/test_gluon_window_schedule.py tests/test_plans.py tests/test_masks.py tests/test_varlen_paged.py \
  -m "not gpu_alone" 2>&1 | tail -12 | tee $OUT/pytest.txt
