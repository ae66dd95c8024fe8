#!/usr/bin/env bash
# Session 14, last call: the window backward on the split path (s14_window_split_ab.py),
# then the whole GPU suite on the session's final tree. ~5 minutes.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 90 python bench/gpu/s14_window_split_ab.py 2>&1 | grep -v Warn | tee $OUT/s14-window-split.txt
timeout 250 python -m pytest tests -o addopts="" -q -rf --tb=short -p no:warnings -p no:benchmark \
  -n 10 --timeout 150 -k "not cpu" > $OUT/pytest-gpu.txt 2>&1
echo "pytest rc=$?"; grep -E "^FAILED|^ERROR" $OUT/pytest-gpu.txt | head -20; tail -1 $OUT/pytest-gpu.txt
