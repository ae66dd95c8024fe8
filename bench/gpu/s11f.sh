#!/usr/bin/env bash
# Session 11, call 6: D = 64 causal dK/dV in query rows at more lengths (s11_dkdv_ab.py 3), and
# the dropout feature rows (causal dropout's backward runs bwd.py's dK/dV, now query rows at
# D = 128). Prediction: dropout causal fwd+bwd ratio 1.21x -> ~1.19x (both sides gain).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 150 python bench/gpu/s11_dkdv_ab.py 3 2>&1 | grep -v Warn | tee $OUT/s11-dkdv-ab3.txt
timeout 150 python -m flashtriton.bench.features --cases dropout --out $OUT 2>&1 | grep -v Warn | tail -12
