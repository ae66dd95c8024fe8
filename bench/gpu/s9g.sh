#!/usr/bin/env bash
# Session 9, call 5: the dropout backward with 1 / (1 - p) folded out of bwd_ws.py's loops
# (dK, dV, dQ scaled once; delta times (1 - p) once a row): a short stress against bwd.py
# and its timing (bench/gpu/s9_dropout_bwd.py, as call 2), the prefill and dropout tests,
# and the feature benchmark's dropout rows.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
WORKERS=8 SECONDS_EACH=30 timeout 120 python bench/gpu/s9_dropout_bwd.py 2>&1 | grep -v Warn | tee $OUT/s9-dropout-bwd-fold.txt
timeout 150 python -m pytest tests/test_prefill.py tests/test_dropout.py -o addopts="" -q -rf --tb=short -p no:warnings \
  -p no:benchmark -n 10 --timeout 120 -k "not cpu" > $OUT/pytest-gpu-prefill.txt 2>&1
echo "pytest rc=$?"; grep -E "^FAILED|^ERROR" $OUT/pytest-gpu-prefill.txt | head -20; tail -1 $OUT/pytest-gpu-prefill.txt
timeout 120 python -m flashtriton.bench.features --cases dropout --out $OUT 2>&1 | grep -v Warn | grep "dropout\|determ"
