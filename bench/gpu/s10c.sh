#!/usr/bin/env bash
# Session 10, call 3: host profile of eager fwd+bwd (s10_host.py); the D = 256 dropout stress
# (the warp-specialized forward's 64-key tiles hashing per tile again).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 120 python bench/gpu/s10_host.py 2>&1 | grep -v Warn | tee $OUT/s10-host.txt | head -150
cd bench/gpu && ONLY_D=256 WORKERS=10 SECONDS_EACH=60 timeout 150 python -c "import s10_dropout as s; s.stress()" 2>&1 | grep -v Warn | tee $OUT/s10-dropout-stress-d256.txt; cd ../..
