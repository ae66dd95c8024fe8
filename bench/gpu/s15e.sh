#!/usr/bin/env bash
# Session 15, final call: the whole GPU suite on the final tree (persistent fwd_ws.py,
# direct launches), the grid rows the persistent forward changes (D = 128 non-causal, D = 256
# both), the decode table without the variant sweep (its eager rows after the direct launch).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 230 python -m pytest tests -o addopts="" -q -rf --tb=short -p no:warnings -p no:benchmark \
  -n 10 --timeout 150 -k "not cpu" > $OUT/pytest-gpu-final.txt 2>&1
echo "pytest rc=$?"; grep -E "^FAILED|^ERROR" $OUT/pytest-gpu-final.txt | head -20; tail -1 $OUT/pytest-gpu-final.txt
timeout 150 python -m flashtriton bench --suite prefill --out $OUT -- --head-dims 128 --causal no --no-flex --tag s15-d128nc 2>&1 | grep -A12 "^###" | head -14
timeout 150 python -m flashtriton bench --suite prefill --out $OUT -- --head-dims 256 --causal both --no-flex --tag s15-d256 2>&1 | grep -A12 "^###" | head -28
timeout 120 python -m flashtriton.bench.decode --out $OUT/decode --no-variants 2>&1 | grep -v Warn | tail -40
