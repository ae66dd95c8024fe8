#!/bin/bash
# Prepared in session 53 for session 54's first GPU call: FOLD for kernels/fwd.py (bench/wip/fwd-py-fold.md: its
# prediction and rule): the A/B of two trees built here (this tree, and this tree + bench/wip/fwd-py-fold.patch),
# then the GPU tests that run fwd.py on the patched tree.
export PYTHONUNBUFFERED=1
ROOT=$PWD
for t in old fwdpy; do rm -rf /tmp/$t; mkdir -p /tmp/$t; cp -r src tests bench /tmp/$t/; done
(cd /tmp/fwdpy && git apply $ROOT/bench/wip/fwd-py-fold.patch) || exit 3
grep -c "visible_keys" /tmp/old/src/flashtriton/kernels/fwd.py /tmp/fwdpy/src/flashtriton/kernels/fwd.py
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader
PYTHONPATH=src timeout -s INT 300 python bench/gpu/s52_fold_ab.py --cases fwd_py --old /tmp/old \
  --new fwdpy=/tmp/fwdpy --rounds ${ROUNDS:-5} 2>&1 | tee $OUT/s54a_ab.txt
cd /tmp/fwdpy && PYTHONPATH=src timeout -s INT 240 python -m pytest -o addopts="" -q -rf -p no:warnings -n 12 \
  --timeout 150 -k "not cpu" -m "not gpu_alone" tests/test_masks.py tests/test_prefill.py tests/test_varlen.py \
  tests/test_fp32.py tests/test_dropout.py > $OUT/s54a_tests.txt 2>&1
echo "rc $?"; grep -E "FAILED|ERROR" $OUT/s54a_tests.txt | head -20; tail -2 $OUT/s54a_tests.txt
