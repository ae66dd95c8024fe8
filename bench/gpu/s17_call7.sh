#!/usr/bin/env bash
# Session 17, call 7: the sharing guard (launchers/sharing.py): 3 processes, default mode.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
for i in 1 2 3; do timeout 60 python bench/gpu/s17_ws_off_stress.py 25 > $OUT/guard-$i.txt 2>&1 & done; wait
cat $OUT/guard-*.txt | grep -v Warn
timeout 40 python bench/gpu/s17_ws_off_stress.py 5 2>&1 | grep -v Warn
timeout 60 python -m pytest tests/test_plans.py tests/test_prefill.py -o addopts="" -q -p no:warnings -n 8 -k "plans or rule" 2>&1 | tail -2
