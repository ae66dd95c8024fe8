#!/bin/bash
# Session 49, call 1: the feature benchmark's window and dropout cases in three rotated rounds (first GPU run of
# the rounds protocol in bench.features).
export PYTHONPATH=$PWD/src
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv | tee $OUT/gpu.txt
mkdir -p $OUT/feat
start=$(date +%s)
timeout 500 python -m flashtriton.bench.features --cases window dropout --rounds 3 --out $OUT/feat 2>&1 | tail -60 \
  | tee $OUT/features.txt
echo "features took $(( $(date +%s) - start )) s" | tee -a $OUT/features.txt
