#!/usr/bin/env bash
# Session 19, call 11 (~4 min): configs.DEFAULTS["dkdv_short"][256] = (64, 32, 4, 2)
# (s19_d256_bwd_tiles.py): the prefill-side GPU tests (head dims 192 / 256 take BLOCK_D
# 256), then the D = 256 bf16 grid rows at 512 / 1k with it.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 200 python -m pytest tests/test_prefill.py tests/test_masks.py tests/test_dropout.py tests/test_varlen.py \
  tests/test_ops.py tests/test_determinism.py tests/test_fp32.py -o addopts="" -q -rf -p no:warnings -n 10 \
  --timeout 150 -k "not cpu" -m "not gpu_alone" > $OUT/pytest.txt 2>&1
echo "pytest rc=$?"; grep -E "^FAILED|^ERROR" $OUT/pytest.txt | head; tail -1 $OUT/pytest.txt
timeout 70 python -m flashtriton bench --suite prefill --out $OUT -- --head-dims 256 --no-flex \
  --seqlens 512 1024 --tag s19-d256-short 2>&1 | grep -v Warn | grep "^|\|^###"
