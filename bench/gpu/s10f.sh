#!/usr/bin/env bash
# Session 10, call 8 (final tree: the compute capability cached, _effective_window without a
# copy when nothing changes): the host split again, then the whole GPU suite.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 60 python bench/gpu/s10_hostsplit.py 2>&1 | grep -v Warn | tee $OUT/s10-hostsplit-8.txt | grep -v "^    " 
timeout 240 python -m pytest tests -o addopts="" -q -rf --tb=short -p no:warnings -p no:benchmark -n 10 --timeout 150 \
  -k "not cpu" > $OUT/pytest-gpu.txt 2>&1
echo "pytest rc=$?"; grep -E "^FAILED|^ERROR" $OUT/pytest-gpu.txt | head -20; tail -1 $OUT/pytest-gpu.txt
