#!/usr/bin/env bash
# The whole test suite on the GPU, in parallel, one line per test (pyproject's
# addopts "-q" would cancel -v: overridden), failures and the slowest tests at the end.
# 2026-11-29 on the H200 (session 4): 604 passed, 1 skipped in 138 s. Log under $OUT (or
# /tmp). 10 workers: with 14, the float64 decode references of concurrent tests (several
# GiB each) once ran the 140 GiB card out of memory.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
out=${OUT:-/tmp}
python -m pytest tests -o addopts="" -v -rf -p no:warnings -n 10 --timeout 150 --durations=12 -k "not cpu" \
  > $out/pytest-gpu.txt 2>&1
rc=$?
grep -E "FAILED|ERROR" $out/pytest-gpu.txt | grep -v "^\[gw" | head -30
tail -2 $out/pytest-gpu.txt
exit $rc
