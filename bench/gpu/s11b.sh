#!/usr/bin/env bash
# Session 11, call 2 (main with the launch plans merged):
# 1. s11_probe.py: the slow backwards (window D = 128, causal D = 128 at 2k / 4k, D = 256) per
#    kernel, warp-specialized split on and off;
# 2. latency with the plans off and on (forward, fwd+bwd, decode steps);
# 3. the bf16 grid D = 64 / 128 / 256 (no Flex: prefill-d128.md keeps its Flex column), eager
#    with plans (the default), for the README.
# Prediction (bench/NOTES.md, "Session 11"): eager backward at N = 512 / 1k up by the host
# time the plans save (~0.3-0.5 ms of ~1 ms a call at 512); N >= 4k unchanged.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 150 python bench/gpu/s11_probe.py 2>&1 | grep -v Warn | tee $OUT/s11-probe.txt
for flag in 0 1; do
  echo "FLASHTRITON_PLANS=$flag"
  FLASHTRITON_PLANS=$flag timeout 60 python -m flashtriton.bench.latency 2>&1 | grep -v Warn
done | tee $OUT/s11-latency.txt
timeout 330 python -m flashtriton bench --suite prefill --out $OUT -- --head-dims 128 64 256 --no-flex --graph-upto 2048 \
  --tag prefill 2>&1 | grep -v Warning | tail -2
ls $OUT
