#!/bin/bash
# Session 58: s56a.sh reordered for a short budget (eight refused starts first): on a copy with
# bench/wip/fp32-one-row-slices.patch applied, the prefill probe at Nq = 1, the fp32 / kvcache / prefill GPU tests,
# the decode probe; then HEAD's decode probe (information only) last. Rule: bench/wip/fp32-one-row-slices.md.
export PYTHONUNBUFFERED=1
ROOT=$PWD
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
python -c "import torch, triton; print(torch.__version__, triton.__version__)"
rm -rf /tmp/slices && mkdir -p /tmp/slices && cp -r src tests bench /tmp/slices/
(cd /tmp/slices && git apply $ROOT/bench/wip/fp32-one-row-slices.patch) || exit 3
cd /tmp/slices
PYTHONPATH=src timeout -s INT 90 python bench/gpu/s55_fp32_probe.py cuda 1 2>&1 | grep "^D=" | tee $OUT/s58a_probe.txt
PYTHONPATH=src timeout -s INT 240 python -m pytest -o addopts="" -q -rf -p no:warnings -n 8 --timeout 200 \
  -k "not cpu and (fp32 or float32 or one_query)" tests/test_fp32.py tests/test_kvcache.py tests/test_prefill.py \
  > $OUT/s58a_tests.txt 2>&1; echo "tests rc $?"; tail -3 $OUT/s58a_tests.txt
grep -E "FAILED|ERROR" $OUT/s58a_tests.txt | head -10
PYTHONPATH=src timeout -s INT 110 python bench/gpu/s56_kvcache_fp32_probe.py cuda 2>&1 | grep "^kvcache" \
  | tee $OUT/s58a_kvcache_probe.txt
cd $ROOT
PYTHONPATH=src timeout -s INT 100 python bench/gpu/s56_kvcache_fp32_probe.py cuda 2>&1 | grep "^kvcache" \
  | tee $OUT/s58a_kvcache_probe_head.txt
