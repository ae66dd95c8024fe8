#!/usr/bin/env bash
# Session 25, call 3: the Gluon tests that failed in call 2 (dQ kernel: _tile_coords'
# new signature; the fused dk / dv bitwise test: ROTATE's order; dK/dV 3 stages causal
# D = 128: refused), then the fused backward at the shapes quick did not cover (routing
# thresholds), whole backward against the library's and cuDNN's.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 240 python -m pytest tests/test_bwd_gluon.py tests/test_bwd_gluon_dq.py -o addopts="" -q -rf -p no:warnings \
  -n 10 --timeout 200 > $OUT/pytest-gluon-bwd.txt 2>&1
grep -E "FAILED|ERROR|passed|failed" $OUT/pytest-gluon-bwd.txt | grep -v "^\[gw" | tail -25
timeout 300 python bench/gpu/s25_gluon_fused_ab.py shapes 128:1024:0 128:2048:0 128:8192:0 128:1024:1 128:2048:1 \
  128:4096:1 128:8192:1 64:2048:0 64:4096:0 64:8192:0 64:4096:1 64:16384:1 128:512:0 2>&1 | grep -v Warn | tee $OUT/fused-shapes.txt
