#!/bin/bash
# Session 53, call 1: the D = 64 cases of test_route_plain_o_stage_short_gpu (added after session 52's last GPU call),
# the O_STAGE route tests, then the grid's D = 64 non-causal 512 / 1k rows (bf16 and fp16, five rounds).
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader
timeout -s INT 200 python -m pytest -o addopts="" -q -rf -p no:warnings -n 8 --timeout 150 -k "not cpu" \
  -m "not gpu_alone" tests/test_fwd_gluon_o_stage.py > $OUT/s53a_tests.txt 2>&1
echo "rc $?"; grep -E "FAILED|ERROR" $OUT/s53a_tests.txt | head -20; tail -2 $OUT/s53a_tests.txt
timeout -s INT 330 python -m flashtriton.bench.prefill --head-dims 64 --causal no --seqlens 512 1024 \
  --dtypes bfloat16 float16 --rounds 5 --out $OUT --tag s53-d64p 2>&1 | grep -v "Warn\|warn" | tail -14
