#!/usr/bin/env bash
# Session 16, call 2: the persistent forward's descriptors made once (the fix of the race
# call 1's stress found). Its tests, the single-process repeatability of the old and new
# kernels, the 3-process stress again, and the grid rows it runs (timing unchanged?).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 120 python -m pytest tests/test_prefill.py -o addopts="" -q -rf --tb=short -p no:warnings -p no:benchmark \
  -n 4 --timeout 100 -k "persistent or warp_spec" 2>&1 | tail -4
timeout 120 python bench/gpu/s16_repeat.py 30 2>&1 | grep -v Warn
for i in 1 2 3; do timeout 130 python bench/gpu/s16_persistent_stress.py 10 > $OUT/stress-$i.txt 2>&1 & done; wait
cat $OUT/stress-*.txt | grep -v Warn
timeout 150 python -m flashtriton bench --suite prefill --out $OUT -- --head-dims 128 --causal no --no-flex --tag s16-d128nc 2>&1 | grep -A12 "^###" | head -14
timeout 150 python -m flashtriton bench --suite prefill --out $OUT -- --head-dims 256 --causal both --no-flex --tag s16-d256 2>&1 | grep -A12 "^###" | head -28
