#!/usr/bin/env bash
# Session 27, call 1 (prepared in session 26; <= ~9 min): the causal dropout forward's two
# keep forms (CAUSAL_DROPOUT_KEEP float / lean, each in its own process), the decode host
# A/B (layouts interleaved; api / replay / raw C launch; TMA against pointer loads), the
# Gluon forward's PV_OVERLAP A/B (off by default; its GPU test runs in call 2's suite), the
# features' dropout case. Log written as it goes; results under $OUT/s27.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
R=$OUT/s27; mkdir -p $R
L=$R/call1.log
step() { echo "== $1 $(date -u +%H:%M:%S)" >> $L; shift; "$@" 2>&1 | grep -v Warn >> $L; }
step "causal dropout keep forms" timeout 240 python bench/gpu/s26_gluon_dropout_fwd_ab.py ab-causal
step "pv overlap ab" timeout 150 python bench/gpu/s27_gluon_pv_overlap_ab.py
step "decode host ab" timeout 90 python bench/gpu/s27_decode_host_ab.py 7 200
step "features dropout" timeout 60 python -m flashtriton.bench.features --cases dropout --out $R/features
echo "== end $(date -u +%H:%M:%S)" >> $L
tail -c 9000 $L
cd $OUT && tar czf s27-call1.tgz s27
