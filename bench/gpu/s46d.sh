#!/bin/bash
# Session 46, call 4 (bench/wip/gluon-bwd-m80.patch applied on the device's copy only; it changes no route): the
# 80-row (64 + 16) fused Gluon backward at D = 128, non-causal. GPU tests first (numerics), then the A/B (bf16).
# Rule, written before the run: take it (route non-causal D = 128 from where it wins) only if it reads >= 2% over
# the 64-row kernel in every round at 4k, 8k and 16k. Prediction (the script's docstring): -5 to +6% at 8k / 16k,
# centre level; most likely not taken.
export PYTHONPATH=$PWD/src
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv | tee $OUT/gpu.txt
git apply bench/wip/gluon-bwd-m80.patch || exit 1
timeout 200 python -m pytest -q -o addopts="" -m gpu tests/test_bwd_gluon_m80.py -x 2>&1 | tail -15 > $OUT/s46_m80_tests.txt
cat $OUT/s46_m80_tests.txt
timeout 300 python bench/gpu/s46_bwd_m80_ab.py 2>&1 | tee $OUT/s46_m80_ab.txt
