#!/usr/bin/env bash
# Session 13, call 4: short forwards on fwd.py (policy.FWD_SHORT_ON_FWD_PY) taken: prefill and
# mask tests; grid rows D = 128 non-causal and D = 256 causal at 512 / 1k; host time of an
# eager call (s13_host.py); fwd.py D = 256 causal tiles at 2k / 4k. ~5 minutes.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 150 python -m pytest tests/test_prefill.py tests/test_masks.py -o addopts="" -q -rf --tb=short \
  -p no:warnings -p no:benchmark -n 10 --timeout 120 -k "not cpu" > $OUT/pytest-prefill.txt 2>&1
echo "pytest rc=$?"; grep -E "^FAILED|^ERROR" $OUT/pytest-prefill.txt | head -20; tail -1 $OUT/pytest-prefill.txt
timeout 100 python -m flashtriton bench --suite prefill --out $OUT -- --head-dims 128 --causal no --no-flex \
  --seqlens 512 1024 --graph-upto 1024 --tag prefill-d128nc-s13 2>&1 | grep -v Warn | tail -9
timeout 100 python -m flashtriton bench --suite prefill --out $OUT -- --head-dims 256 --causal yes --no-flex \
  --seqlens 512 1024 --graph-upto 1024 --tag prefill-d256c-s13 2>&1 | grep -v Warn | tail -9
timeout 80 python bench/gpu/s13_host.py 2>&1 | grep -v Warn | tee $OUT/s13-host.txt
timeout 60 python bench/gpu/s13_tiles_ab.py fwd256-long 2>&1 | grep -v Warn | tee $OUT/s13-fwd256-long.txt
