#!/usr/bin/env bash
# Session 11, call 4: the query-rows dK/dV taken (D = 128 / 256). The whole GPU suite, the
# D = 128 / 256 bf16 grids (no Flex) and the window feature row.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 260 python -m pytest tests -o addopts="" -q -rf --tb=short -p no:warnings -p no:benchmark -n 10 --timeout 150 \
  -k "not cpu" > $OUT/pytest-gpu.txt 2>&1
echo "pytest rc=$?"; grep -E "^FAILED|^ERROR" $OUT/pytest-gpu.txt | head -20; tail -1 $OUT/pytest-gpu.txt
timeout 200 python -m flashtriton bench --suite prefill --out $OUT -- --head-dims 256 128 --no-flex --graph-upto 2048 \
  --tag prefill-s11 2>&1 | grep -v Warning | tail -1
timeout 100 python -m flashtriton.bench.features --cases window --out $OUT 2>&1 | grep -v Warn | tail -12
