#!/usr/bin/env bash
# Session 9, call 3: the reworked warp-specialized dropout forward (row keys hashed at the
# iota rows; column keys hashed or through a descriptor): probe, stress, timing
# (bench/gpu/s9_dropout_fwd.py); then the prefill and dropout tests on the GPU.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
WORKERS=10 SECONDS_EACH=60 timeout 240 python bench/gpu/s9_dropout_fwd.py 2>&1 | grep -v Warn | tee $OUT/s9-dropout-fwd.txt
timeout 200 python -m pytest tests/test_prefill.py tests/test_dropout.py -o addopts="" -q -rf --tb=short -p no:warnings \
  -p no:benchmark -n 10 --timeout 150 -k "not cpu" > $OUT/pytest-gpu-prefill.txt 2>&1
echo "pytest rc=$?"; grep -E "^FAILED|^ERROR" $OUT/pytest-gpu-prefill.txt | head -20; tail -1 $OUT/pytest-gpu-prefill.txt
