#!/usr/bin/env bash
# Session 11, call 3: bwd.py's dK/dV in the query-rows layout (s11_dkdv_ab.py; prediction in
# its docstring), then both layouts through the GPU tests that target them.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 240 python bench/gpu/s11_dkdv_ab.py 2>&1 | grep -v Warn | tee $OUT/s11-dkdv-ab.txt
timeout 200 python -m pytest tests/test_prefill.py -o addopts="" -q -rf --tb=short -p no:warnings -n 8 --timeout 150 \
  -k "dkdv_layouts or large_shapes or every_tuner_config" > $OUT/pytest-dkdv.txt 2>&1
echo "pytest rc=$?"; grep -E "^FAILED|^ERROR" $OUT/pytest-dkdv.txt | head -20; tail -1 $OUT/pytest-dkdv.txt
