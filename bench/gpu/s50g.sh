#!/bin/bash
# Session 50, call 7: the fused Gluon backward's VARLEN WINDOW variant: its GPU tests (the whole VARLEN backward
# file), then its A/B against the route before (bench/gpu/s50_bwd_varlen_window_ab.py).
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 200 python -m pytest -o addopts="" -q -p no:warnings -n 8 --timeout 150 tests/test_bwd_gluon_varlen.py \
  2>&1 | grep -v "^    \|^$\|Warning\|warner" | tail -30 > $OUT/pytest.txt
tail -4 $OUT/pytest.txt
grep -q " failed\| error" $OUT/pytest.txt && exit 1
timeout 240 python bench/gpu/s50_bwd_varlen_window_ab.py 2>&1 | tail -12 | tee $OUT/window_ab.txt
