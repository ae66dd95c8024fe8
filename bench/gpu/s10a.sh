#!/usr/bin/env bash
# Session 10, call 1: dropout with grouped column keys (bench/gpu/s10_dropout.py): timing and
# per-kernel backward breakdown, the dropout and warp-specialized GPU tests, the stress, and
# the feature benchmark's dropout rows.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader
TIMING_ONLY=1 timeout 120 python bench/gpu/s10_dropout.py 2>&1 | grep -v Warn | tee $OUT/s10-dropout-timing.txt
timeout 150 python -m pytest tests/test_dropout.py tests/test_prefill.py -o addopts="" -q -rf --tb=short -p no:warnings \
  -n 10 --timeout 140 -k "dropout or warp" > $OUT/pytest-dropout.txt 2>&1
echo "pytest rc=$?"; grep -E "^FAILED|^ERROR" $OUT/pytest-dropout.txt | head -20; tail -1 $OUT/pytest-dropout.txt
cd bench/gpu && WORKERS=10 SECONDS_EACH=40 timeout 120 python -c "import s10_dropout as s; s.stress()" 2>&1 | grep -v Warn | tee $OUT/s10-dropout-stress.txt; cd ../..
timeout 120 python -m flashtriton.bench.features --cases dropout --out $OUT 2>&1 | grep -v Warn | tail -12
