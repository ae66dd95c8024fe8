#!/usr/bin/env bash
# Session 14, call 6: host-time A/B of the direct launches and decode workspaces
# (s14_host_ab.py; HEAD's src copied to bench/gpu/_old/src before the call), then the
# whole GPU suite on the new tree. ~6 minutes.
set -u
export PYTHONUNBUFFERED=1
for rep in 1 2; do
  for t in old new; do
    if [ $t = old ]; then src=$PWD/bench/gpu/_old/src; else src=$PWD/src; fi
    PYTHONPATH=$src timeout 120 python bench/gpu/s14_host_ab.py $t 2>&1 | grep -v Warn | tee -a $OUT/s14-host-ab.txt
  done
done
export PYTHONPATH=$PWD/src
timeout 260 python -m pytest tests -o addopts="" -q -rf --tb=short -p no:warnings -p no:benchmark \
  -n 10 --timeout 150 -k "not cpu" > $OUT/pytest-gpu.txt 2>&1
echo "pytest rc=$?"; grep -E "^FAILED|^ERROR" $OUT/pytest-gpu.txt | head -20; tail -1 $OUT/pytest-gpu.txt
