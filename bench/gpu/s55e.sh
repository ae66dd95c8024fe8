#!/bin/bash
# Session 55, call 5: kernels/common.qk_dot (fp32 scores summed in four quarters of the head dim): the fp32 probe at
# Nq = 1 against cuBLAS's math (was median ~3.5x, 14 of 72 cells over the criterion), the fp32 GPU tests, and the
# fp32 speed against HEAD's tree (the one-chain dot).
export PYTHONUNBUFFERED=1
ROOT=$PWD
rm -rf /tmp/old && mkdir -p /tmp/old && git archive HEAD src | tar -x -C /tmp/old
PYTHONPATH=src timeout -s INT 70 python bench/gpu/s55_fp32_probe.py cuda 1 2>&1 | grep "^D=" | tee $OUT/s55e_probe.txt
PYTHONPATH=src timeout -s INT 110 python -m pytest -o addopts="" -q -rf -p no:warnings -n 8 --timeout 100 \
  -k "not cpu and (fp32 or float32)" tests/test_fp32.py tests/test_kvcache.py > $OUT/s55e_tests.txt 2>&1; echo "tests rc $?"; tail -3 $OUT/s55e_tests.txt
grep -E "FAILED|ERROR" $OUT/s55e_tests.txt | head -8
for t in new old; do P=src; [ $t = old ] && P=/tmp/old/src; echo "== $t"; PYTHONPATH=$P timeout -s INT 45 python bench/gpu/s55_fp32_speed.py 2>&1 | grep fp32; done | tee $OUT/s55e_speed.txt
