#!/usr/bin/env bash
# Session 30, optional (~4 min; only with device time to spare): the fp16 grid rows still
# from session 19 (D = 256 non-causal; causal 4k-16k), to merge into prefill-fp16.json.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
R=$OUT/s30; mkdir -p $R
L=$R/call4.log
step() { echo "== $1 $(date -u +%H:%M:%S)" >> $L; shift; "$@" 2>&1 | grep -v Warn >> $L; }
step "grid fp16 D=256 non-causal" timeout 140 python -m flashtriton bench --suite prefill --out $R -- --dtypes float16 --head-dims 256 --causal no --tag fp16d
step "grid fp16 D=256 causal long" timeout 90 python -m flashtriton bench --suite prefill --out $R -- --dtypes float16 --head-dims 256 --causal yes --seqlens 4096 8192 16384 --tag fp16e
echo "== end $(date -u +%H:%M:%S)" >> $L
grep -v "prefill \[" $L | tail -c 9000
