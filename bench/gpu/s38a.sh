#!/usr/bin/env bash
# Session 38, first GPU call: DQ_FOLD's GPU tests (timeout 200 s), then its A/B (370 s); logs under $OUT.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1; out=${OUT:-/tmp}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
timeout 200 python -m pytest -q -o addopts="" -p no:warnings -m gpu tests/test_bwd_gluon_dq_fold.py > $out/s38_dq_fold_tests.txt 2>&1
echo "tests rc $?"; tail -8 $out/s38_dq_fold_tests.txt
timeout 370 python bench/gpu/s38_dq_fold_ab.py > $out/s38_dq_fold_ab.txt 2>&1; echo "ab rc $?"
grep -E "^\||WRONG|False|Error|bitwise" $out/s38_dq_fold_ab.txt
