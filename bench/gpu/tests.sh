#!/usr/bin/env bash
# The whole test suite on the GPU, in parallel, one line per test (pyproject's
# addopts "-q" would cancel -v: overridden), failures and the slowest tests at the end.
# 2026-11-29 on the H200 (session 4): 604 passed, 1 skipped in 138 s. Log under $OUT (or
# /tmp). 10 workers: with 14, the float64 decode references of concurrent tests (several
# GiB each) once ran the 140 GiB card out of memory.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
out=${OUT:-/tmp}
# Then the gpu_alone tests in this one process: ten workers time-slice the GPU, under
# which the warp-specialized kernels can give NaN (launchers/sharing.py; session 18: one
# of these failed once in the parallel run). conftest sets FLASHTRITON_GPU_SHARED=0, so
# the rest still test the kernels a process alone gets.
python -m pytest tests -o addopts="" -v -rf -p no:warnings -n 10 --timeout 150 --durations=12 \
  -k "not cpu" -m "not gpu_alone" > $out/pytest-gpu.txt 2>&1
rc=$?
python -m pytest tests -o addopts="" -v -rf -p no:warnings --timeout 300 -m gpu_alone >> $out/pytest-gpu.txt 2>&1
rc=$(( rc | $? ))
grep -E "FAILED|ERROR" $out/pytest-gpu.txt | grep -v "^\[gw" | head -30
grep -E "^=+ .*(passed|failed|error).* in [0-9.]+s" $out/pytest-gpu.txt   # both runs' summaries
exit $rc
