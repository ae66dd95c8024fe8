#!/usr/bin/env bash
# Session 12, call 5: the whole GPU suite on the final tree (launchers/prefill.py split into
# common / policy / forward / backward, code moved verbatim), the D = 128 causal short-forward
# tile A/B (prediction in s12_fwd_short_ab.py), and the eager latencies (plans on).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 280 python -m pytest tests -o addopts="" -q -rf --tb=short -p no:warnings -p no:benchmark \
  -n 10 --timeout 150 -k "not cpu" > $OUT/pytest-gpu.txt 2>&1
echo "pytest rc=$?"; grep -E "^FAILED|^ERROR" $OUT/pytest-gpu.txt | head -20; tail -1 $OUT/pytest-gpu.txt
timeout 80 python bench/gpu/s12_fwd_short_ab.py 128c 2>&1 | grep -v Warn | tee $OUT/s12-fwd-short-128c.txt
timeout 70 python -m flashtriton.bench.latency 2>&1 | grep -v Warn | tee $OUT/s12-latency.txt
