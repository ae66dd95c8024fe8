#!/usr/bin/env bash
# Session 31, call B (~7.5 min, after routing call A's winners; straight before call C while
# the machine is warm): the grid rows they change (D = 64 bf16 / fp16 both masks for DQ_SPLIT_M;
# the features window row for LEAN_MASK). Drop the steps of a patch that was not routed.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
R=$OUT/s31; mkdir -p $R
L=$R/callB.log
step() { echo "== $1 $(date -u +%H:%M:%S)" >> $L; shift; "$@" 2>&1 | grep -v Warn >> $L; }
step "grid bf16 D=64" timeout 170 python -m flashtriton bench --suite prefill --out $R -- --head-dims 64 --causal both --tag d64
step "grid fp16 D=64" timeout 170 python -m flashtriton bench --suite prefill --out $R -- --dtypes float16 --head-dims 64 --causal both --tag fp16a
step "features window" timeout 120 python -m flashtriton.bench.features --cases window --out $R/features
echo "== end $(date -u +%H:%M:%S)" >> $L
grep -v "prefill \[" $L | tail -c 11000
cd $OUT && tar czf s31-callB.tgz s31
