#!/bin/bash
# Session 59, call 4: the one-row fp32 backward (dP in score slices, dQ's dS K a tile apart: kernels/common.dot_apart,
# which also replaces the forward's pv_tile_dot with the same sums) - the grad probe, the fp32 / kvcache / prefill /
# varlen / paged GPU tests, then the forward probe (its ratios must equal call 1's: the same chains).
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader
PYTHONPATH=src timeout -s INT 120 python bench/gpu/s59_fp32_one_row_grad_probe.py 2>&1 | tee $OUT/s59d_grad_probe.txt | grep -v "^  FAIL" | tail -20
PYTHONPATH=src timeout -s INT 150 python -m pytest -o addopts="" -q -rf -p no:warnings -n 8 --timeout 140 \
  -k "not cpu and (fp32 or float32 or one_query)" tests/test_fp32.py tests/test_kvcache.py tests/test_prefill.py \
  tests/test_varlen.py tests/test_varlen_paged.py > $OUT/s59d_tests.txt 2>&1; echo "tests rc $?"; tail -2 $OUT/s59d_tests.txt
grep -E "FAILED|ERROR" $OUT/s59d_tests.txt | head -10
PYTHONPATH=src timeout -s INT 90 python bench/gpu/s55_fp32_probe.py cuda 1 2>&1 | grep "^D=" > $OUT/s59d_probe.txt
diff <(sed 's/ours max.*//' $OUT/s59d_probe.txt) <(sed 's/ours max.*//' bench/results/nvidia-h200/s59/s59a_probe.txt) && echo "forward probe: the same ratios as call 1"
