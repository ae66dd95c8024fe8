#!/usr/bin/env bash
# Session 38: DQ_FOLD's GPU tests, then its A/B (bench/gpu/s38_dq_fold_ab.py); logs under $OUT (or /tmp).
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1; out=${OUT:-/tmp}; python -m pytest -q -o addopts="" -p no:warnings -m gpu tests/test_bwd_gluon_dq_fold.py > $out/s38_dq_fold_tests.txt 2>&1; tail -5 $out/s38_dq_fold_tests.txt; timeout 590 python bench/gpu/s38_dq_fold_ab.py 2>&1 | tee $out/s38_dq_fold_ab.txt | grep -E "^\||WRONG|False|Error"
