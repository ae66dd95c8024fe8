#!/bin/bash
# Session 42, call 5: the D = 128 grid (bf16, fp16) and the window feature row with O_STAGE routed
export PYTHONPATH=src
python -m flashtriton bench --suite prefill --out $OUT -- --head-dims 128 --tag s42-d128 2>&1 | tail -40
python -m flashtriton bench --suite prefill --out $OUT -- --head-dims 128 --dtypes float16 --tag s42-d128-fp16 2>&1 | tail -30
python -m flashtriton.bench.features --out $OUT --cases window 2>&1 | tail -15
