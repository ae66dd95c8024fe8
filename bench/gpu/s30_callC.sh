#!/usr/bin/env bash
# Session 30, call C (~8.5 min): the grid rows the session's routes change (bf16 and fp16 D = 64,
# both masks: the wide fused backward, plain from 2k; the causal 3-consumer forward from 4k),
# the fp16 D = 256 rows still from session 19, and the D = 64 dropout one-tile probe.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
R=$OUT/s30; mkdir -p $R
L=$R/callC.log
step() { echo "== $1 $(date -u +%H:%M:%S)" >> $L; shift; "$@" 2>&1 | grep -v Warn >> $L; }
step "grid bf16 D=64" timeout 120 python -m flashtriton bench --suite prefill --out $R -- --head-dims 64 --causal both --tag d64
step "grid fp16 D=64" timeout 120 python -m flashtriton bench --suite prefill --out $R -- --dtypes float16 --head-dims 64 --causal both --tag fp16a
S29_DROPOUT=0.1 S29_NS=1024,4096 step "D = 64 dropout one-tile probe" timeout 60 python bench/gpu/s29_bwd_ws_onetile_probe.py 100
step "grid fp16 D=256 non-causal" timeout 140 python -m flashtriton bench --suite prefill --out $R -- --dtypes float16 --head-dims 256 --causal no --tag fp16d
step "grid fp16 D=256 causal long" timeout 90 python -m flashtriton bench --suite prefill --out $R -- --dtypes float16 --head-dims 256 --causal yes --seqlens 4096 8192 16384 --tag fp16e
echo "== end $(date -u +%H:%M:%S)" >> $L
grep -v "prefill \[" $L | tail -c 11000
cd $OUT && tar czf s30-callC.tgz s30
