#!/usr/bin/env bash
# Session 3, GPU call C: feature benchmark (window tiles, varlen heaviest-first order),
# then the GPU test suite with names (fp32 tiles, GPU-only test fixes).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 190 python -m flashtriton.bench.features --out $OUT 2>&1 | grep -v Warning | grep -E "^\| (varlen|window|dropout|determ|float32)|Error|error" | cut -c1-250
timeout 235 python -m pytest tests -o addopts="" -v -rf -p no:warnings -p no:benchmark -n 14 --timeout 150 --durations=12 -k "not cpu" > $OUT/pytest-gpu.txt 2>&1
echo "pytest rc=$?"
grep -E "FAILED|ERROR" $OUT/pytest-gpu.txt | grep -v "^\[gw" | head -30
grep -E "s (call|setup) " $OUT/pytest-gpu.txt | head -12
tail -2 $OUT/pytest-gpu.txt
