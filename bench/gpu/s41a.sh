#!/usr/bin/env bash
# Session 41, call 2: Q_PREFETCH's GPU tests and A/B (bench/gpu/s41_q_prefetch_ab.py), then the Gluon forward's
# GPU tests (the kernel gained the QP parameter for every variant). Needs `git apply bench/wip/gluon-fwd-q-prefetch.patch`
# (reverted after its A/B: bench/NOTES.md "Session 41").
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
mkdir -p $OUT/s41
timeout 150 python -m pytest -m gpu -q -o addopts="" -p no:cacheprovider tests/test_fwd_gluon_q_prefetch.py \
  > $OUT/s41/q_prefetch_tests.txt 2>&1; echo "q_prefetch tests rc $?"; tail -3 $OUT/s41/q_prefetch_tests.txt
timeout 220 python bench/gpu/s41_q_prefetch_ab.py 2>&1 | grep -v Warning > $OUT/s41/q_prefetch_ab.txt
echo "ab rc $?"; grep RESULT $OUT/s41/q_prefetch_ab.txt
timeout 180 python -m pytest -m gpu -q -o addopts="" -p no:cacheprovider -x tests/test_fwd_gluon.py \
  > $OUT/s41/fwd_gluon_tests.txt 2>&1; echo "fwd_gluon tests rc $?"; tail -3 $OUT/s41/fwd_gluon_tests.txt
