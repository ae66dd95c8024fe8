#!/usr/bin/env bash
# Session 10, call 2: dK/dV dropout mask used once against the previous form, the causal
# fwd+bwd timeline, then the dropout tests and stress on the final dK/dV form.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
cd bench/gpu && timeout 150 python s10_bwd_ab.py 2>&1 | grep -v Warn | tee $OUT/s10-bwd-ab.txt; cd ../..
rm -f src/flashtriton/kernels/_bwd_ws_prev.py
timeout 150 python -m pytest tests/test_dropout.py tests/test_prefill.py -o addopts="" -q -rf --tb=short -p no:warnings \
  -n 10 --timeout 140 -k "dropout or warp" > $OUT/pytest-dropout.txt 2>&1
echo "pytest rc=$?"; grep -E "^FAILED|^ERROR" $OUT/pytest-dropout.txt | head -20; tail -1 $OUT/pytest-dropout.txt
cd bench/gpu && WORKERS=10 SECONDS_EACH=30 timeout 100 python -c "import s10_dropout as s; s.stress()" 2>&1 | grep -v Warn | tee $OUT/s10-dropout-stress.txt; cd ../..
