#!/usr/bin/env bash
# Prepared in session 12 for the next session's first GPU call (bench/NOTES.md, "Session 12",
# "Next GPU session"): the whole GPU suite (the fused atomic-dQ tests run on the GPU for
# the first time: test_fused_atomic_dq*, test_plans' fused case), the fused dQ A/B
# (s13_fused_dq_ab.py, prediction in its docstring), the D = 64 causal short-forward A/B.
# Expected ~7-8 minutes.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 240 python -m pytest tests -o addopts="" -q -rf --tb=short -p no:warnings -p no:benchmark \
  -n 10 --timeout 150 -k "not cpu" > $OUT/pytest-gpu.txt 2>&1
echo "pytest rc=$?"; grep -E "^FAILED|^ERROR" $OUT/pytest-gpu.txt | head -20; tail -1 $OUT/pytest-gpu.txt
timeout 200 python bench/gpu/s13_fused_dq_ab.py 2>&1 | grep -v Warn | tee $OUT/s13-fused-dq.txt
timeout 60 python bench/gpu/s12_fwd_short_ab.py 64c 2>&1 | grep -v Warn | tee $OUT/s13-fwd-short-64c.txt
