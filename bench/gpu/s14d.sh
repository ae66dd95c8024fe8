#!/usr/bin/env bash
# Session 14, call 7: the plans / kvcache / ops GPU tests after the direct launch learnt
# the global scratch (in-kernel descriptors), the host-time A/B again (s14_host_ab.py,
# HEAD's src in bench/gpu/_old/src), then the decode bench. ~6 minutes.
set -u
export PYTHONUNBUFFERED=1
PYTHONPATH=$PWD/src timeout 150 python -m pytest tests/test_plans.py tests/test_kvcache.py tests/test_ops.py -o addopts="" \
  -q -rf --tb=short -p no:warnings -p no:benchmark -n 10 --timeout 120 -k "not cpu" > $OUT/pytest-gpu-plans.txt 2>&1
echo "pytest rc=$?"; grep -E "^FAILED|^ERROR|^E  " $OUT/pytest-gpu-plans.txt | head -20; tail -1 $OUT/pytest-gpu-plans.txt
for rep in 1 2; do
  for t in old new; do
    if [ $t = old ]; then src=$PWD/bench/gpu/_old/src; else src=$PWD/src; fi
    PYTHONPATH=$src timeout 120 python bench/gpu/s14_host_ab.py $t 2>&1 | grep -v Warn | tee -a $OUT/s14-host-ab.txt
  done
done
PYTHONPATH=$PWD/src timeout 200 python -m flashtriton.bench.decode --out $OUT 2>&1 | grep -v Warning | tail -30
