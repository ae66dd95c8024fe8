#!/usr/bin/env bash
# Session 4, GPU call 7: decode tests (the capture-dependent combine: eager fused, the
# combine kernel inside CUDA graphs), and forward tile sweeps at D = 128 for N = 2k, 4k,
# 8k, where FlexAttention's static forward ran ahead of ours (prefill-d128.md).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 120 python -m pytest tests/test_kvcache.py tests/test_merge.py -o addopts="" -q -rf --tb=short -p no:warnings \
  -p no:benchmark -n 10 --timeout 100 > $OUT/pytest-s4d.txt 2>&1
echo "pytest rc=$?"; grep -E "^FAILED|^ERROR|Error" $OUT/pytest-s4d.txt | head -10; tail -1 $OUT/pytest-s4d.txt
for n in 2048 4096 8192; do
  mkdir -p $OUT/tune-$n
  timeout 150 python -m flashtriton.bench.tune --kernels fwd --head-dims 128 --seqlen $n --out $OUT/tune-$n 2>&1 \
    | grep -v Warning | grep -E "^\||compiled" | tail -4
done
