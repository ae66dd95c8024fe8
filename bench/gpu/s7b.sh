#!/usr/bin/env bash
# Session 7, call 3: the GPU tests after the dK/dV descriptor fix (2-D column descriptors,
# bench/gpu/s7_dk_probe.py) and the new split rule (backward only, causal N >= 4k), then
# the A/B at D = 128 (auto against FLASHTRITON_WARP_SPEC=0, fwd and fwd+bwd) and the
# feature rows (varlen, dropout, window).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
timeout 220 python -m pytest tests -o addopts="" -q -rf --tb=short -p no:warnings -p no:benchmark -n 10 --timeout 150 \
  -k "not cpu" > $OUT/pytest-gpu.txt 2>&1
echo "pytest rc=$?"; grep -E "^FAILED|^ERROR" $OUT/pytest-gpu.txt | head -20; tail -1 $OUT/pytest-gpu.txt
S6_AB_DIMS=128 S6_AB_FWD_BWD=1 timeout 200 python bench/gpu/s6_ws_ab.py 2>&1 | grep -v Warning | tee $OUT/s7-ws-ab.txt \
  | grep -v "^  "
timeout 120 python -m flashtriton.bench.features --cases varlen dropout window --out $OUT 2>&1 | grep -v Warning \
  | grep -E "^\| (varlen|dropout|determ|window)|Error|error" | cut -c1-200
