#!/usr/bin/env bash
# Session 27, call 3 (~8 min): the plan tests as fixed after call 2 (a kvcache step runs two
# plans: the value checks and the decode), the decode table, the features' dropout case
# twice more (call 1's causal 1.140x against session 26's 1.174x: is it under 1.15x?), then
# the fused backward's exp-overlap A/B on this copy with bench/wip/gluon-bwd-exp-overlap.patch
# applied (last: it edits the sources of this device copy only).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
R=$OUT/s27; mkdir -p $R
L=$R/call3.log
step() { echo "== $1 $(date -u +%H:%M:%S)" >> $L; shift; "$@" 2>&1 | grep -v Warn >> $L; }
step "plan tests" timeout 90 python -m pytest -q tests/test_plans.py
step "decode table" timeout 240 python -m flashtriton.bench.decode --out $R/decode --no-variants
for i in 1 2; do
  step "features dropout $i" timeout 60 python -m flashtriton.bench.features --cases dropout --out $R/features$i
done
git apply bench/wip/gluon-bwd-exp-overlap.patch && \
  step "bwd exp overlap ab" timeout 150 python bench/gpu/s27_gluon_bwd_exp_overlap_ab.py
echo "== end $(date -u +%H:%M:%S)" >> $L
tail -c 11000 $L
cd $OUT && tar czf s27-call3.tgz s27
