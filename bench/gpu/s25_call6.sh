#!/usr/bin/env bash
# Session 25, call 6 (~3 min): the eager Gluon forward's host cost (bench/gpu/s25_route_probe.py),
# the fused backward at D = 64 causal 2k and non-causal 1k D = 128 again, the features' dropout rows again.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 120 python bench/gpu/s25_route_probe.py 2>&1 | grep -v Warn
timeout 60 python bench/gpu/s25_gluon_fused_ab.py shapes 64:2048:1 64:1024:1 2>&1 | grep -v Warn | grep -v "^    fused ok"
timeout 80 python -m flashtriton.bench.features --cases dropout --out $OUT/f 2>&1 | grep "^| dropout\|^| determ"
