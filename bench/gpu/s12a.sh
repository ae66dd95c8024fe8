#!/usr/bin/env bash
# Prepared in session 11 for the next session's first GPU call (bench/NOTES.md, "Session 11",
# "Next GPU session"): the two A/Bs written offline, then the whole GPU suite with the launch
# plans on (conftest turns them off unless FLASHTRITON_PLANS is set), so that every test's
# second call of a signature replays. A test that spies on a launcher function and calls one
# signature twice can fail there for that reason alone: read each failure. Expected ~6-7 minutes.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 90 python bench/gpu/s12_fwd_short_ab.py 2>&1 | grep -v Warn | tee $OUT/s12-fwd-short.txt
timeout 150 python bench/gpu/s12_dkdv_separate.py 2>&1 | grep -v Warn | tee $OUT/s12-dkdv-separate.txt
FLASHTRITON_PLANS=1 timeout 280 python -m pytest tests -o addopts="" -q -rf --tb=short -p no:warnings -p no:benchmark \
  -n 10 --timeout 150 -k "not cpu" > $OUT/pytest-gpu-plans.txt 2>&1
echo "pytest (plans on) rc=$?"; grep -E "^FAILED|^ERROR" $OUT/pytest-gpu-plans.txt | head -20; tail -1 $OUT/pytest-gpu-plans.txt
