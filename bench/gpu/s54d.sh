#!/bin/bash
# Prepared in session 53 (low priority, after s54a-c): the backward's masked probabilities in one FMA
# (bench/wip/bwd-py-fold.md: prediction and rule): the A/B of this tree against this tree + bench/wip/bwd-py-fold.patch,
# then the backward GPU tests on the patched tree.
export PYTHONUNBUFFERED=1
ROOT=$PWD
for t in old bwdpy; do rm -rf /tmp/$t; mkdir -p /tmp/$t; cp -r src tests bench /tmp/$t/; done
(cd /tmp/bwdpy && (git apply $ROOT/bench/wip/bwd-py-fold.patch 2>/dev/null \
  || git apply $ROOT/bench/wip/bwd-py-fold-after-fwd.patch)) || exit 3   # the second: fwd-py-fold.patch applied first
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader
PYTHONPATH=src timeout -s INT 300 python bench/gpu/s52_fold_ab.py --cases bwd_py --old /tmp/old \
  --new bwdpy=/tmp/bwdpy --rounds ${ROUNDS:-5} 2>&1 | tee $OUT/s54d_ab.txt
cd /tmp/bwdpy && PYTHONPATH=src timeout -s INT 240 python -m pytest -o addopts="" -q -rf -p no:warnings -n 12 \
  --timeout 150 -k "not cpu" -m "not gpu_alone" tests/test_prefill.py tests/test_masks.py tests/test_determinism.py \
  tests/test_bwd_one_loop.py tests/test_bwd_rows_first.py tests/test_dropout.py > $OUT/s54d_tests.txt 2>&1
echo "rc $?"; grep -E "FAILED|ERROR" $OUT/s54d_tests.txt | head -20; tail -2 $OUT/s54d_tests.txt
