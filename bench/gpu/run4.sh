#!/usr/bin/env bash
# GPU call 4 (2026-11-29): decode tests and benchmark, D=256 tile sweep, small-shape latency.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 150 python -m pytest tests/test_kvcache.py tests/test_merge.py -x -q -p no:warnings -n 8 2>&1 | tail -6
timeout 180 python -m flashtriton bench --suite decode --out $OUT 2>&1 | tail -40
mkdir -p $OUT/d256
timeout 120 python -m flashtriton.bench.tune --head-dims 256 --seqlen 4096 --out $OUT/d256 2>&1 | grep -v "^failed" | tail -12
timeout 60 python -m flashtriton.bench.latency
