#!/bin/bash
# One GPU call of session 72's shape: a timing script from bench/gpu (its seconds budget, under a guard 30 s longer;
# output $OUT/<script>.txt), then the fp32 GPU tests under FLASHTRITON_ALLOW_TF32=x3 (bench/gpu/fp32_tests.sh).
#   bash bench/gpu/sweep_then_fp32_tests.sh SCRIPT.py BUDGET_S TESTS_NAME TESTS_GUARD_S [script args...]
export PYTHONUNBUFFERED=1
out=${OUT:-/tmp}
script=$1 budget=$2 name=$3 guard=$4
shift 4
nvidia-smi --query-gpu=name --format=csv,noheader | tee $out/gpu.txt
PYTHONPATH=$PWD/src:$PWD/tests:$PWD/bench/gpu timeout $((budget + 30)) python bench/gpu/$script $budget "$@" 2>&1 \
  | tee $out/${script%.py}.txt
bash bench/gpu/fp32_tests.sh $name $guard x3
