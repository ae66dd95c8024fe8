#!/usr/bin/env bash
# Prepared in session 13 for the next session's first GPU call (bench/NOTES.md, "Session 13",
# "Next GPU session"): the whole GPU suite (test_split_backward_resumes_in_query_rows runs on
# the GPU for the first time, and test_forward_exp2_on_fma / test_exp2_fma_accuracy), the
# resumed dK/dV layout A/B (s14_resume_rows_ab.py) and the FMA-pipe exponentials A/B
# (s14_exp_poly_ab.py); predictions in their docstrings. ~10 minutes.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 240 python -m pytest tests -o addopts="" -q -rf --tb=short -p no:warnings -p no:benchmark \
  -n 10 --timeout 150 -k "not cpu" > $OUT/pytest-gpu.txt 2>&1
echo "pytest rc=$?"; grep -E "^FAILED|^ERROR" $OUT/pytest-gpu.txt | head -20; tail -1 $OUT/pytest-gpu.txt
timeout 200 python bench/gpu/s14_resume_rows_ab.py 2>&1 | grep -v Warn | tee $OUT/s14-resume-rows.txt
timeout 150 python bench/gpu/s14_exp_poly_ab.py 2>&1 | grep -v Warn | tee $OUT/s14-exp-poly.txt
timeout 150 python bench/gpu/s14_exp_poly_ab.py bwd 2>&1 | grep -v Warn | tee $OUT/s14-exp-poly-bwd.txt
