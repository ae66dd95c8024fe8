#!/usr/bin/env bash
# Session 30, call E (~8 min): the bf16 D = 64 causal 16k grid row (call C's grid step ran
# out of its 120 s there), then the whole GPU suite again after the D = 64 bwd_ws compile
# fix (VEC_PTR 2 under masks, no dropout; call D's 9 failures).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
R=$OUT/s30; mkdir -p $R
L=$R/callE.log
step() { echo "== $1 $(date -u +%H:%M:%S)" >> $L; shift; "$@" 2>&1 | grep -v Warn >> $L; }
step "grid bf16 D=64 causal 16k" timeout 50 python -m flashtriton bench --suite prefill --out $R -- --head-dims 64 --causal yes --seqlens 16384 --tag d64c16
OUT=$R step "tests" timeout 430 bash bench/gpu/tests.sh
echo "== end $(date -u +%H:%M:%S)" >> $L
grep -v "prefill \[" $L | tail -c 8000
cd $OUT && tar czf s30-callE.tgz s30
