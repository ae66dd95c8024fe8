#!/usr/bin/env bash
# Session 26, call 4 (the last; ~8.5 min of device time left): the lean dropout forward
# (4 instructions an element; smoke, tests -k dropout, A/B, the feature rows' dropout
# case), the decode value checks in one Triton launch (probe, kvcache GPU tests), the
# fused backward at causal 512 (route it there?), the short causal eager probe. Each step
# under its own timeout (sum 510 s), most valuable first; the log written as it goes.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
L=$OUT/call4.log
step() { echo "== $1 $(date -u +%H:%M:%S)" >> $L; shift; "$@" 2>&1 | grep -v Warn >> $L; }
step "fwd dropout smoke" timeout 80 python bench/gpu/s26_gluon_dropout_fwd_ab.py smoke
step "fwd dropout tests" timeout 80 python -m pytest tests/test_fwd_gluon.py -o addopts="" -q -rf -p no:warnings \
  -n 8 -m gpu -k dropout
step "fwd dropout ab" timeout 65 python bench/gpu/s26_gluon_dropout_fwd_ab.py ab
step "features dropout" timeout 60 python -m flashtriton.bench.features --cases dropout --out $OUT/features
step "decode host probe" timeout 55 python bench/gpu/s26_decode_host_probe.py
step "kvcache tests" timeout 60 python -m pytest tests/test_kvcache.py tests/test_kvcache_checks.py -o addopts="" -q -rf \
  -p no:warnings -n 8 -k "not cpu"
step "fused causal 512" timeout 45 python bench/gpu/s25_gluon_fused_ab.py shapes 128:512:1 64:512:1
step "short causal probe" timeout 40 python bench/gpu/s26_short_causal_probe.py
echo "== end $(date -u +%H:%M:%S)" >> $L
tail -c 12000 $L
