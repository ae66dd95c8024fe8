#!/usr/bin/env bash
# Next GPU session, call 1 (branch wip/next-gpu): the GPU tests with the split
# warp-specialized forward (causal / right window / ragged) and the rows-first varlen
# grid and the warp-specialized dK/dV kernel, then their A/B: s6_ws_ab.py at D = 128
# (auto against FLASHTRITON_WARP_SPEC=0, causal rows now split; fwd+bwd too) and the
# varlen feature rows.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
timeout 200 python -m pytest tests -o addopts="" -q -rf --tb=short -p no:warnings -p no:benchmark -n 10 --timeout 150 \
  -k "not cpu" > $OUT/pytest-gpu.txt 2>&1
echo "pytest rc=$?"; grep -E "^FAILED|^ERROR" $OUT/pytest-gpu.txt | head -20; tail -1 $OUT/pytest-gpu.txt
S6_AB_DIMS=128 S6_AB_FWD_BWD=1 timeout 200 python bench/gpu/s6_ws_ab.py 2>&1 | grep -v Warning | tee $OUT/s7-ws-ab.txt
timeout 100 python -m flashtriton.bench.features --cases varlen dropout window --out $OUT 2>&1 | grep -v Warning \
  | grep -E "^\| (varlen|dropout|determ|window)|Error|error" | cut -c1-260
