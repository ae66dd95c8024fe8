#!/usr/bin/env bash
# Session 18, call 5 (~2 min): the gpu_alone tests in one process (bench/gpu/tests.sh's
# second step), with the new test_dkdv_long_loop_repeatable_gpu.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 200 python -m pytest tests -o addopts="" -q -rf --tb=short -p no:warnings --timeout 150 -m gpu_alone 2>&1 | tail -8
