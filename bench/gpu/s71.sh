#!/bin/bash
# Queued for session 71 (bench/NOTES.md "Next GPU session (71)"): the features table's float32 row re-timed (the
# session 69-70 tiles and register budgets; the README row is session 4's one reading), then the fp32 dK/dV tile
# timing (bench/gpu/s71_dkdv_fp32_tiles.py) in the time left. Outputs under $OUT.
#   bash bench/gpu/s71.sh
export PYTHONUNBUFFERED=1
out=${OUT:-/tmp}
nvidia-smi --query-gpu=name --format=csv,noheader
PYTHONPATH=$PWD/src python -c "import torch, triton; print(torch.__version__, triton.__version__)"
PYTHONPATH=$PWD/src timeout 200 python -m flashtriton.bench.features --cases float32 --rounds 3 --no-flex \
  --out $out/feat 2>&1 | tail -15
left=$((480 - SECONDS)); echo "dkdv timing budget ${left}s"
[ $left -gt 90 ] && PYTHONPATH=$PWD/src timeout $left python bench/gpu/s71_dkdv_fp32_tiles.py $((left - 40)) 2>&1 \
  | tee $out/s71_dkdv_tiles.txt
