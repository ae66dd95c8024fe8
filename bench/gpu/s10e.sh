#!/usr/bin/env bash
# Session 10, call 7 (final tree): the dropout mask as a float (kernels.common.dropout_keep_scale):
# feature rows, timing, the dropout / warp-specialized GPU tests, the stress.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 120 python -m flashtriton.bench.features --cases dropout --out $OUT 2>&1 | grep -v Warn | grep "^| dropout\|^| determ"
TIMING_ONLY=1 timeout 120 python bench/gpu/s10_dropout.py 2>&1 | grep -v Warn | tee $OUT/s10-dropout-timing-7.txt
timeout 150 python -m pytest tests -o addopts="" -q -rf --tb=short -p no:warnings -n 10 --timeout 140 \
  -k "(dropout or warp) and not cpu" > $OUT/pytest-dropout.txt 2>&1
echo "pytest rc=$?"; grep -E "^FAILED|^ERROR" $OUT/pytest-dropout.txt | head -20; tail -1 $OUT/pytest-dropout.txt
cd bench/gpu && WORKERS=10 SECONDS_EACH=45 timeout 120 python -c "import s10_dropout as s; s.stress()" 2>&1 | grep -v Warn | tee $OUT/s10-dropout-stress-7.txt; cd ../..
