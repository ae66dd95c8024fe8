#!/usr/bin/env bash
# Session 3, GPU call B: the feature benchmark (after the dropout hash, the cu_seqlens
# check cache and the fp32 tiles), a tile sweep for sliding windows, then the GPU
# test suite with test names (addopts' -q would cancel -v) and durations.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
timeout 200 python -m flashtriton.bench.features --out $OUT 2>&1 | grep -v Warning | grep -E "^\| (varlen|window|dropout|determ|float32)|Error|error" | cut -c1-260
timeout 110 python -m flashtriton.bench.tune --head-dims 128 --seqlen 16384 --window 1024 --out $OUT/tune-window 2>&1 | grep -v Warning | tail -12
timeout 230 python -m pytest tests -o addopts="" -v -rf -p no:warnings -p no:benchmark -n 12 --timeout 100 --durations=15 -k "not cpu" > $OUT/pytest-gpu.txt 2>&1
echo "pytest rc=$?"
grep -E "FAILED|ERROR" $OUT/pytest-gpu.txt | grep -v "^\[gw" | head -30
grep -E "slowest|s call|s setup" $OUT/pytest-gpu.txt | head -16
tail -2 $OUT/pytest-gpu.txt
