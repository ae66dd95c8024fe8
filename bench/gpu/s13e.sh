#!/usr/bin/env bash
# Session 13, call 6: the final tree (fused dQ removed, host-path changes): the whole GPU
# suite; host time of eager calls again (s13_host.py); the short grid rows; bench.latency.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 230 python -m pytest tests -o addopts="" -q -rf --tb=short -p no:warnings -p no:benchmark \
  -n 10 --timeout 150 -k "not cpu" > $OUT/pytest-gpu.txt 2>&1
echo "pytest rc=$?"; grep -E "^FAILED|^ERROR" $OUT/pytest-gpu.txt | head -20; tail -1 $OUT/pytest-gpu.txt
timeout 60 python bench/gpu/s13_host.py 2>&1 | grep -v Warn | grep -v "^ " | tee $OUT/s13-host.txt
for spec in "128 no" "64 yes" "256 yes"; do
  set -- $spec
  timeout 80 python -m flashtriton bench --suite prefill --out $OUT -- --head-dims $1 --causal $2 --no-flex \
    --seqlens 512 1024 --graph-upto 1024 --tag prefill-d$1-$2-s13e 2>&1 | grep -v Warn | grep "^| 512\|^| 1024\|^| bf"
done
timeout 90 python -m flashtriton.bench.latency 2>&1 | grep -v Warn | tee $OUT/latency.txt | tail -30
