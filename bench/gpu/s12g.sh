#!/usr/bin/env bash
# Session 12, call 7: fwd_short_masked up to N = 4k at D = 128 (SHORT_MASKED_SEQLEN; call 6's
# graph A/B: +7% / +11% at 2k / 4k, -2.5% at 8k). Prediction: eager causal forward at 2k /
# 4k 353 / 421 -> ~375 / ~460 TFLOP/s; 8k / 16k unchanged.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 100 python -m pytest tests/test_prefill.py -o addopts="" -q -rf --tb=short -p no:warnings \
  -n 12 --timeout 90 -k "not cpu and (default_table or large_shapes or every_tuner)" > $OUT/pytest-prefill-7.txt 2>&1
echo "pytest rc=$?"; grep -E "^FAILED|^ERROR" $OUT/pytest-prefill-7.txt | head; tail -1 $OUT/pytest-prefill-7.txt
timeout 80 python -m flashtriton bench --suite prefill --out $OUT -- --head-dims 128 --causal yes --no-flex \
  --graph-upto 2048 --tag prefill-d128c-s12b 2>&1 | grep -v Warning | tail -18
