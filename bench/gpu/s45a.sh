#!/bin/bash
# Session 45, call 1: the TWO_CTAS forms of the causal D = 64 forward (kernels/fwd_gluon.py; not routed). Its GPU tests
# first (float64 criterion, bitwise the same-arithmetic 1-CTA kernels, repeatable; they also compile every form the
# A/B times), then the A/B against the route and cuDNN at 2k / 4k / 8k, bf16 and fp16 (prediction and routing rule in
# s45_two_ctas_ab.py's docstring: route a form at a length if >= 2% over the route in every round, both dtypes).
export PYTHONPATH=$PWD/src
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv | tee $OUT/gpu.txt
timeout 300 python -m pytest -q -o addopts="" -m gpu tests/test_fwd_gluon_two_ctas.py 2>&1 | tail -15 | tee $OUT/s45_tests.txt
cd bench/gpu
timeout 200 python s45_two_ctas_ab.py 2>&1 | tee $OUT/s45_two_ctas_ab.txt
