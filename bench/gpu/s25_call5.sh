#!/usr/bin/env bash
# Session 25, call 5 (~8-9 min): with the fused Gluon backward routed for deterministic=False
# (policy.GLUON_BWD_FUSED_MIN_N) and the Gluon WINDOW forward routed (GLUON_FWD_WINDOW_MIN_N):
# the tests call 4 failed or never ran, then the grid (D = 128 and 64, causal both), then the
# feature benchmark's window and deterministic rows. Everything under $OUT/s25 in one tar
# (the device returns at most 8 files).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
R=$OUT/s25; mkdir -p $R
L=$R/call5.log
step() { echo "== $1 $(date -u +%H:%M:%S)" >> $L; shift; "$@" 2>&1 | grep -v Warn >> $L; }
step "tests" timeout 120 python -m pytest -o addopts="" -q -rf -p no:warnings \
  "tests/test_prefill.py::test_persistent_backward_repeatable_gpu" tests/test_prefill.py::test_dkdv_long_loop_repeatable_gpu \
  tests/test_determinism.py::test_nondeterministic_backward_routes_fused_gpu \
  tests/test_fwd_gluon.py::test_flash_attn_func_takes_gluon_window_gpu \
  tests/test_bwd_gluon.py::test_fused_dkdv_bitwise_and_repeated_launches_gpu
step "grid D=128" timeout 210 python -m flashtriton bench --suite prefill --out $R -- --head-dims 128 --causal both \
  --seqlens 512 1024 2048 4096 8192 16384 --tag s25-d128
step "grid D=64" timeout 120 python -m flashtriton bench --suite prefill --out $R -- --head-dims 64 --causal both \
  --seqlens 2048 4096 16384 --tag s25-d64
step "features" timeout 120 python -m flashtriton.bench.features --cases window dropout --out $R/features
echo "== end $(date -u +%H:%M:%S)" >> $L
tail -c 6000 $L
cd $OUT && tar czf s25.tgz s25 && rm -rf s25/*.json s25/*.png s25/features
