#!/usr/bin/env bash
# Next session, first call on branch wip/s10-plan: the launch plans on the GPU.
# 1. tests/test_plans.py (replays bitwise equal to the launchers, now through CompiledKernel.run);
# 2. the host split with plans on and off (s10_hostsplit.py);
# 3. the whole GPU suite (plans off there, as in CI), to see nothing else moved.
# Prediction (bench/NOTES.md, "Session 10"): forward host time 140-260 us -> ~60-90 us; the
# causal fwd+bwd at 4k 1.4-1.9 ms -> ~0.5 ms.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 200 python -m pytest tests/test_plans.py -o addopts="" -q -rf --tb=short -p no:warnings > $OUT/pytest-plans.txt 2>&1
echo "plans tests rc=$?"; grep -E "^FAILED|^ERROR" $OUT/pytest-plans.txt | head; tail -1 $OUT/pytest-plans.txt
for flag in 0 1; do
  echo "FLASHTRITON_PLANS=$flag"
  FLASHTRITON_PLANS=$flag timeout 60 python bench/gpu/s10_hostsplit.py 2>&1 | grep -v Warn | grep -v "^    "
done
timeout 240 python -m pytest tests -o addopts="" -q -rf --tb=short -p no:warnings -p no:benchmark -n 10 --timeout 150 \
  -k "not cpu" > $OUT/pytest-gpu.txt 2>&1
echo "pytest rc=$?"; grep -E "^FAILED|^ERROR" $OUT/pytest-gpu.txt | head -20; tail -1 $OUT/pytest-gpu.txt
