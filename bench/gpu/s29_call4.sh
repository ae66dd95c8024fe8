#!/usr/bin/env bash
# Session 29, call 4 (~6 min, the last of the session's device time): the D = 64 one-tile
# dK/dV fix (pointer loads, backward.WS_DKDV_ONE_TILE_VEC_PTR) re-probed and its GPU
# regression test; the grid rows call 3 did not reach (bf16 D = 64 causal 4k-16k; fp16
# D = 128 causal; fp16 D = 256 causal 512-2k).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
R=$OUT/s29; mkdir -p $R
L=$R/call4.log
step() { echo "== $1 $(date -u +%H:%M:%S)" >> $L; shift; "$@" 2>&1 | grep -v Warn >> $L; }
S29_NS=1024,4096 S29_DEFAULT=0 step "onetile probe (fixed)" timeout 50 python bench/gpu/s29_bwd_ws_onetile_probe.py 200
step "fix tests" timeout 70 python -m pytest -o addopts="" -q -p no:warnings --timeout 60 tests/test_prefill.py \
  -k "one_tile_dkdv or persistent_backward_repeatable or vec_ptr"
step "grid bf16 D=64 causal long" timeout 70 python -m flashtriton bench --suite prefill --out $R -- --head-dims 64 --causal yes --seqlens 4096 8192 16384 --tag d64c
step "grid fp16 D=128 causal" timeout 95 python -m flashtriton bench --suite prefill --out $R -- --dtypes float16 --head-dims 128 --causal yes --tag fp16b
step "grid fp16 D=256 causal short" timeout 75 python -m flashtriton bench --suite prefill --out $R -- --dtypes float16 --head-dims 256 --causal yes --seqlens 512 1024 2048 --tag fp16c
echo "== end $(date -u +%H:%M:%S)" >> $L
grep -v "prefill \[" $L | tail -c 6000
