#!/bin/bash
# Session 76, call 4 (any card): the ragged dense route on the packed Gluon kernels (launchers/dense_varlen.py):
# its GPU tests, then the A/B against the route before (bench/gpu/s76_dense_varlen_ab.py).   bash bench/gpu/s76d.sh
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src:$PWD/tests
out=${OUT:-/tmp}
date -u +%H:%M:%S
nvidia-smi --query-gpu=name --format=csv,noheader | tee $out/gpu.txt
timeout 150 python -m pytest tests/test_dense_varlen.py -q -p no:warnings -x > $out/s76d_tests.txt 2>&1
tail -n 15 $out/s76d_tests.txt | cut -c1-300
date -u +%H:%M:%S
timeout 140 python bench/gpu/s76_dense_varlen_ab.py $out/s76d_ab.json > $out/s76d_ab.txt 2>&1
cut -c1-700 $out/s76d_ab.txt | tail -n 12
date -u +%H:%M:%S
