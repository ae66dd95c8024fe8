#!/bin/bash
# Session 70's second GPU call: the fp32 tests of the paged forward's new tile (32 x 32 x 8 at block_d 128 / 256) and
# of the register budget (configs.FP32_MAXNREG_AT: dQ and dK dV at 256, the paged forward at 128 / 256), then
# bench/gpu/s70_fp32_regs_split.py in the time left. Outputs under $OUT.
#   bash bench/gpu/s70.sh
export PYTHONUNBUFFERED=1
out=${OUT:-/tmp}
nvidia-smi --query-gpu=name --format=csv,noheader
PYTHONPATH=$PWD/src python -c "import torch, triton; print(torch.__version__, triton.__version__)"
PYTHONPATH=$PWD/src timeout -s INT 100 python -m pytest tests -o addopts="" -q -rf -p no:warnings -n 8 --timeout 90 \
  -k "(test_varlen_paged or test_fp32 or register_budget or paged_tile) and not cpu" -m "not gpu_alone" \
  > $out/s70_tests.txt 2>&1
echo "tests rc $?"; tail -1 $out/s70_tests.txt; grep -E "^(FAILED|ERROR)" $out/s70_tests.txt | head -20
left=$((320 - SECONDS)); echo "timing budget ${left}s"
PYTHONPATH=$PWD/src timeout $left python bench/gpu/s70_fp32_regs_split.py $((left - 40)) 2>&1 | tee $out/s70_regs_split.txt
