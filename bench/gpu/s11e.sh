#!/usr/bin/env bash
# Session 11, call 5: test_dkdv_layouts after its fix (call 4: its D = 64 query-rows case ran
# key rows on the GPU, whose default D = 64 tile has 32 query rows: the test's expectation was
# wrong, not the kernel), and the D = 256 / 128 / 64 backward tests.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 200 python -m pytest tests/test_prefill.py tests/test_masks.py -o addopts="" -q -rf --tb=short -p no:warnings -n 10 \
  --timeout 150 -k "not cpu" > $OUT/pytest-dkdv.txt 2>&1
echo "pytest rc=$?"; grep -E "^FAILED|^ERROR" $OUT/pytest-dkdv.txt | head -20; tail -1 $OUT/pytest-dkdv.txt
timeout 240 python bench/gpu/s11_dkdv_ab.py 2 2>&1 | grep -v Warn | tee $OUT/s11-dkdv-ab2.txt
