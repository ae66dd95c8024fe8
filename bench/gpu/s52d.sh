#!/bin/bash
# Session 52, call 6: D = 128 plain from 512 on the O_STAGE persistent kernel (policy.GLUON_FWD_O_STAGE["plain"][128]
# (512, 4096)): the route's GPU tests, then the grid's D = 128 non-causal 512 / 1k rows, bf16 and fp16, five rounds.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader
timeout -s INT 300 python -m pytest -o addopts="" -q -rf -p no:warnings -n 8 --timeout 150 -k "not cpu" \
  -m "not gpu_alone" tests/test_fwd_gluon_o_stage.py tests/test_fwd_gluon.py tests/test_prefill.py tests/test_plans.py \
  > $OUT/s52d_tests.txt 2>&1
echo "rc $?"; grep -E "FAILED|ERROR" $OUT/s52d_tests.txt | head -20; tail -2 $OUT/s52d_tests.txt
timeout -s INT 240 python -m flashtriton.bench.prefill --head-dims 128 --causal no --seqlens 512 1024 \
  --dtypes bfloat16 float16 --rounds 5 --out $OUT --tag s52-d128p 2>&1 | grep -v "Warn\|warn" | tail -14
