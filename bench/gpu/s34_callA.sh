#!/usr/bin/env bash
# Session 34, call A (~6 min; prepared in session 33). FIRST, locally:
#   git am -3 bench/wip/gluon-d256-split-dq.patch bench/wip/gluon-window-s34.patch
# (they compose: 256 CPU tests of both passed together, session 33), their CPU tests, commit. Then here:
# the D = 256 backward split as FlashAttention-2 splits it (DKDV_ONLY + the Gluon dQ kernel at D = 256;
# prediction 1.10-1.21x the routed fused kernel at 4k, 0.98-1.09x cuDNN: the A/B's docstring), smoke
# first (each variant in a subprocess with a timeout: the D = 256 dQ tiles never ran on hardware),
# then the A/B, then the GPU tests. Route by the docstring's rule (policy.GLUON_BWD_D256_SPLIT_DQ).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
L=$OUT/callA.log
step() { echo "== $1 $(date -u +%H:%M:%S)" >> $L; shift; "$@" 2>&1 | grep -v Warn >> $L; }
step "split smoke" timeout 90 python bench/gpu/s34_d256_split_dq_ab.py smoke split
step "split A/B" timeout 240 python bench/gpu/s34_d256_split_dq_ab.py
step "split GPU tests" timeout 200 python -m pytest -o addopts="" -q -rf -p no:warnings -n 8 --timeout 120 \
  -m "gpu and not gpu_alone" tests/test_bwd_gluon_d256_split.py tests/test_bwd_gluon_dq.py tests/test_bwd_gluon_d256.py
echo "== end $(date -u +%H:%M:%S)" >> $L
grep -E "^\||^== |passed|failed|FAIL|Error|SMOKE|smoke" $L | tail -70
