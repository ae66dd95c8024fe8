#!/usr/bin/env bash
# GPU call 1 (2026-11-29): tile sweep, then the prefill grid with the swept tiles,
# then the GPU tests. Writes everything under $OUT.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw --format=csv
python -m flashtriton info
timeout 240 python -m flashtriton.bench.tune --head-dims 64 128 --seqlen 4096 --out $OUT 2>&1 | tee $OUT/tune.txt
if [ -f $OUT/tiles.json ]; then export FLASHTRITON_TILES=$OUT/tiles.json; fi
timeout 200 python -m flashtriton bench --suite prefill --out $OUT -- --head-dims 64 128 --no-flex --memory --tag prefill-r1 2>&1 | tail -40
timeout 120 python -m pytest tests/test_prefill.py -m gpu -x -q -p no:warnings -n 8 2>&1 | tail -15
nvidia-smi --query-gpu=clocks.sm,temperature.gpu --format=csv
