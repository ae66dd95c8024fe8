#!/bin/bash
# Session 77, call 1 (any card; the prefill rows are for the README when an H200 comes): session 76's ragged dense
# route (launchers/dense_varlen.py) - its GPU tests with the default table, the ragged windows' A/B (not timed in
# session 76), then ragged prefill rows against every provider, under a time guard.
# Superseded by bench/gpu/s77b.sh (session 77: the same steps, split into two calls under deadlines).
#   bash bench/gpu/s77a.sh [SECONDS]      outputs: $OUT
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src:$PWD/tests
out=${OUT:-/tmp}
start=$(date +%s)
g=${1:-480}
date -u +%H:%M:%S
nvidia-smi --query-gpu=name --format=csv,noheader | tee $out/gpu.txt
timeout 150 python -m pytest tests/test_dense_varlen.py -q -p no:warnings > $out/s77a_tests.txt 2>&1
tail -n 5 $out/s77a_tests.txt | cut -c1-300
S76_CASES=windows timeout 120 python bench/gpu/s76_dense_varlen_ab.py $out/s77a_windows.json > $out/s77a_windows.txt 2>&1
cut -c1-600 $out/s77a_windows.txt | tail -n 4
left=$(( g - ($(date +%s) - start) ))
echo "prefill: ${left} s left"
if [ $left -gt 90 ]; then
  timeout $left python -m flashtriton.bench.prefill --seqlens 1000 2100 4000 --head-dims 64 128 --rounds 3 \
    --out $out --tag prefill-ragged > $out/s77a_prefill.txt 2>&1
  tail -n 25 $out/s77a_prefill.txt | cut -c1-300
fi
date -u +%H:%M:%S
