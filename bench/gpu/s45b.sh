#!/bin/bash
# Session 45, call 2: the TWO_CTAS forms of the causal D = 64 forward (kernels/fwd_gluon.py; a helper, offline; not
# routed). Their GPU tests first (float64 criterion, bitwise the same-arithmetic 1-CTA kernels, repeatable; they also
# compile every form the A/B times) and call 1's route test (D = 64 causal 4k bf16 -> O_STAGE), then the A/B against
# the route and cuDNN at 2k / 4k / 8k, bf16 and fp16 (prediction and routing rule in s45_two_ctas_ab.py's docstring:
# route a form at a length if >= 2% over the route in every round, both dtypes), then the grid's D = 64 causal bf16
# rows at 2k / 4k / 8k on the new 4k route.
# The TWO_CTAS code was not taken: it lives in bench/wip/gluon-fwd-two-ctas.patch (git apply it to re-run this).
export PYTHONPATH=$PWD/src
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv | tee $OUT/gpu.txt
timeout 300 python -m pytest -q -o addopts="" -m gpu tests/test_fwd_gluon_two_ctas.py \
  tests/test_fwd_gluon_o_stage.py::test_route_d64_causal_4k_gpu 2>&1 | tail -15 | tee $OUT/s45_tests.txt
(cd bench/gpu && timeout 200 python s45_two_ctas_ab.py 2>&1 | tee $OUT/s45_two_ctas_ab.txt)
timeout 200 python -m flashtriton bench --suite prefill --out $OUT -- --head-dims 64 --causal yes \
  --seqlens 2048 4096 8192 --tag s45-d64c 2>&1 | tail -12
