#!/usr/bin/env bash
# Session 39, call D: the whole GPU suite (bench/gpu/tests.sh's two phases) on the session's final code, each phase
# under its own timeout so that the call returns inside the device's 600 s. Log under $OUT.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
out=${OUT:-/tmp}
timeout 480 python -m pytest tests -o addopts="" -v -rf -p no:warnings -n 11 --timeout 150 --durations=12 \
  -k "not cpu" -m "not gpu_alone" > $out/pytest-gpu.txt 2>&1
echo "phase 1 rc $?"
timeout 90 python -m pytest tests -o addopts="" -v -rf -p no:warnings --timeout 80 -m gpu_alone >> $out/pytest-gpu.txt 2>&1
echo "phase 2 rc $?"
grep -E "FAILED|ERROR" $out/pytest-gpu.txt | grep -v "^\[gw" | head -30
grep -E "^=+ .*(passed|failed|error).* in [0-9.]+s" $out/pytest-gpu.txt
