#!/bin/bash
# Session 53, call 3: FOLD applied (bench/wip/gluon-fwd-fold.patch): every test file whose forward runs the Gluon
# kernels' masked steps (causal, window, VARLEN, paged, dropout, masks, kvcache), 12 workers.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader
timeout -s INT 540 python -m pytest -o addopts="" -q -rf -p no:warnings -n 12 --timeout 150 -k "not cpu" \
  -m "not gpu_alone" tests/test_fwd_gluon*.py tests/test_varlen*.py tests/test_masks.py tests/test_dropout.py \
  tests/test_prefill.py tests/test_kvcache.py tests/test_sharing.py > $OUT/s53c_tests.txt 2>&1
echo "rc $?"; grep -E "FAILED|ERROR" $OUT/s53c_tests.txt | head -30; tail -3 $OUT/s53c_tests.txt
