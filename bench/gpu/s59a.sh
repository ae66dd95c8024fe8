#!/bin/bash
# Session 59, call 1: the one-row fp32 prefill (score slices + each tile's P V summed apart from the accumulator,
# kernels/common.pv_tile_dot) on the working tree: the prefill probe at Nq = 1, the fp32 / kvcache / prefill GPU
# tests (test_fp32_one_query_sharp_scale no longer xfails), then the fp32 one-row speed with and without.
# Rule (bench/NOTES.md "Session 59"): take it if the probe has 0 of 72 cells over and every test passes.
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
python -c "import torch, triton; print(torch.__version__, triton.__version__)"
PYTHONPATH=src timeout -s INT 120 python bench/gpu/s55_fp32_probe.py cuda 1 2>&1 | grep "^D=" | tee $OUT/s59a_probe.txt
PYTHONPATH=src timeout -s INT 240 python -m pytest -o addopts="" -q -rf -p no:warnings -n 8 --timeout 200 \
  -k "not cpu and (fp32 or float32 or one_query)" tests/test_fp32.py tests/test_kvcache.py tests/test_prefill.py \
  tests/test_varlen.py > $OUT/s59a_tests.txt 2>&1; echo "tests rc $?"; tail -3 $OUT/s59a_tests.txt
grep -E "FAILED|ERROR" $OUT/s59a_tests.txt | head -10
PYTHONPATH=src timeout -s INT 150 python bench/gpu/s59_fp32_one_row_speed.py 2>&1 | tee $OUT/s59a_speed.txt
# With what is left of the call: the test_f* files that session 58's time limit may have cut (the last ones).
PYTHONPATH=src timeout -s INT 200 python -m pytest -o addopts="" -q -p no:warnings -n 10 -k "not cpu" -m "not gpu_alone" \
  tests/test_fwd_gluon_window_lean_mask.py tests/test_fwd_gluon_window_early_q.py tests/test_fwd_gluon_varlen.py \
  tests/test_fwd_gluon_paged.py tests/test_fwd_gluon_own_tiles.py tests/test_fwd_gluon_o_stage.py \
  > $OUT/s59a_gpu_f_tail.txt 2>&1; echo "f-tail rc $?"; grep -E "passed|failed|FAILED" $OUT/s59a_gpu_f_tail.txt | tail -5
