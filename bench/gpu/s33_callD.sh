#!/usr/bin/env bash
# Session 33, call D (~5 min; prepared in session 32): CAUSAL_BANDS, the one-block causal Gluon
# forward launched in banded heaviest-first order (bench/wip/gluon-causal-d128-gap.md; locally first:
# git am -3 bench/wip/gluon-causal-d128-after-window.patch on top of gluon-window-opt.patch, or
# gluon-causal-d128.patch alone if the window patch is not applied). GPU tests, then the A/B in bf16
# and fp16 (prediction and routing rule in bench/gpu/s33_causal_d128_ab.py's docstring).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
R=$OUT/s33; mkdir -p $R
L=$R/callD.log
step() { echo "== $1 $(date -u +%H:%M:%S)" >> $L; shift; "$@" 2>&1 | grep -v Warn >> $L; }
step "CAUSAL_BANDS GPU tests" timeout 200 python -m pytest -o addopts="" -q -rf -p no:warnings -n 8 --timeout 120 \
  -m gpu tests/test_fwd_gluon_causal_bands.py
step "CAUSAL_BANDS A/B bf16" timeout 170 python bench/gpu/s33_causal_d128_ab.py
step "CAUSAL_BANDS A/B fp16" env S33_DTYPE=fp16 timeout 170 python bench/gpu/s33_causal_d128_ab.py
echo "== end $(date -u +%H:%M:%S)" >> $L
tail -c 11000 $L
cd $OUT && tar czf s33-callD.tgz s33
