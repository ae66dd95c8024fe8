#!/bin/bash
# Session 44, call 3 (bench/wip/gluon-window-edge64.patch applied; nothing routed): the window forward's 64-key
# edge steps (EDGE64) A/B against the routed window kernel (prediction in the script), then its GPU tests.
# Rule written before: route at (1024, 0) if >= 2% every round at 16k and not below -1% at 4k, outputs bitwise.
export PYTHONPATH=$PWD/src
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv | tee $OUT/gpu.txt
timeout 200 python bench/gpu/s44_window_edge64_ab.py 2>&1 | tee $OUT/s44_edge64_ab.txt
timeout 330 python -m pytest -q -o addopts="" -m gpu -x tests/test_fwd_gluon_window_edge64.py 2>&1 | tail -5 | tee $OUT/s44_edge64_tests.txt
