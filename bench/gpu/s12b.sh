#!/usr/bin/env bash
# Session 12, call 2: fwd_short = (128, 64, 4, 3) for D <= 64 (call 1's A/B at D = 64);
# DKDV_SEPARATE / PARTS removed (slower in every variant, call 1). The prefill and fp32
# tests on the GPU, the short tile at D = 32 / 16, the D = 64 bf16 grid, the decode grid.
# Predictions: D = 32 like D = 64 (+50-65% non-causal at 512 / 1k as graphs); D = 64
# non-causal forward eager rows 234 / 238 -> ~280 / ~330 at 512 / 1k (host-bound at 512);
# decode eager rows at small B ~100-150 us lower than the 2026-11-29 grid (launch plans).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 150 python -m pytest tests/test_prefill.py tests/test_fp32.py -o addopts="" \
  -q -rf --tb=short -p no:warnings -n 12 --timeout 140 -k "not cpu" > $OUT/pytest-prefill.txt 2>&1
echo "pytest rc=$?"; grep -E "^FAILED|^ERROR" $OUT/pytest-prefill.txt | head -20; tail -1 $OUT/pytest-prefill.txt
timeout 60 python bench/gpu/s12_fwd_short_ab.py 32 16 2>&1 | grep -v Warn | tee $OUT/s12-fwd-short-d32.txt
timeout 200 python -m flashtriton bench --suite prefill --out $OUT -- --head-dims 64 --no-flex --graph-upto 2048 \
  --tag prefill-d64-s12 2>&1 | grep -v Warning | tail -30
timeout 170 python -m flashtriton.bench.decode --out $OUT 2>&1 | grep -v Warning | tail -40
