#!/usr/bin/env bash
# Session 12, call 4: the new CUDA-graph tests (forward+backward captured in one graph;
# dropout in a graph), then the small-N backward A/B with the harness fixed (call 3 ran
# the forward outside the capture: its backward went to the legacy stream, capture error).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 150 python -m pytest tests/test_ops.py -o addopts="" -q -rf --tb=short -p no:warnings -n 6 --timeout 140 \
  -k "cuda_graph" > $OUT/pytest-graphs.txt 2>&1
echo "pytest rc=$?"; grep -E "^FAILED|^ERROR|Error|assert" $OUT/pytest-graphs.txt | head -30; tail -1 $OUT/pytest-graphs.txt
timeout 300 python bench/gpu/s12_bwd_small_ab.py 2>&1 | grep -v Warn | tee $OUT/s12-bwd-small.txt
