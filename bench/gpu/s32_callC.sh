#!/usr/bin/env bash
# Session 32, call C (~7 min): the fused Gluon D = 256 backward (a session-32 helper, offline, never
# run): its smoke step + A/B (bench/gpu/s32_gluon_bwd_d256_ab.py: prediction and routing rule in its
# docstring; a barrier deadlock shows as the smoke's timeout), then its GPU tests. (Session 31's
# window BLOCK_N 64 A/B, prepared as call C, ran in call A.)
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
R=$OUT/s32; mkdir -p $R
L=$R/callC.log
step() { echo "== $1 $(date -u +%H:%M:%S)" >> $L; shift; "$@" 2>&1 | grep -v Warn >> $L; }
step "D = 256 Gluon backward A/B (smoke first)" timeout 250 python bench/gpu/s32_gluon_bwd_d256_ab.py
step "D = 256 Gluon backward GPU tests" timeout 180 python -m pytest -o addopts="" -q -rf -p no:warnings -n 8 \
  --timeout 120 -m "gpu and not gpu_alone" tests/test_bwd_gluon_d256.py
echo "== end $(date -u +%H:%M:%S)" >> $L
tail -c 11000 $L
cd $OUT && tar czf s32-callC.tgz s32
