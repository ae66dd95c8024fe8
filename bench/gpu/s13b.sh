#!/usr/bin/env bash
# Session 13, call 2: fused dQ by TMA bulk reduction (DQ_ATOMIC=2) A/B, its GPU tests,
# and the D = 64 causal short-forward tile from N = 2k. ~4 minutes.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 120 python -m pytest tests -o addopts="" -q -rf --tb=short -p no:warnings -p no:benchmark \
  -n 8 --timeout 100 -k "fused and not cpu" > $OUT/pytest-fused.txt 2>&1
echo "pytest rc=$?"; grep -E "^FAILED|^ERROR" $OUT/pytest-fused.txt | head -20; tail -1 $OUT/pytest-fused.txt
timeout 260 python bench/gpu/s13_fused_dq_tma_ab.py 2>&1 | grep -v Warn | tee $OUT/s13-fused-dq-tma.txt
timeout 80 python bench/gpu/s12_fwd_short_ab.py 64c-long 2>&1 | grep -v Warn | tee $OUT/s13-fwd-short-64c-long.txt
