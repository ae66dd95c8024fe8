#!/usr/bin/env bash
# Session 23, call 7 (~5 min): the Gluon forward wired in (policy.gluon_fwd: unmasked dense
# D = 128 forwards from N = 4k, launchers/forward_gluon.py): its tests and the GPU tests of
# the prefill, plans and determinism files; the A/B with the routed library call beside
# fwd_ws.py; the D = 128 non-causal grid rows (every provider, Flex included).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 200 python -m pytest tests/test_fwd_gluon.py tests/test_prefill.py tests/test_plans.py tests/test_determinism.py \
  -o addopts="" -q -rf --tb=short -p no:warnings -n 8 --timeout 120 -k "not cpu" -m "not gpu_alone" > $OUT/pytest.txt 2>&1
echo "tests rc=$?"; grep -E "^FAILED|^ERROR" $OUT/pytest.txt | head; tail -1 $OUT/pytest.txt
timeout 60 python -m pytest tests -o addopts="" -q -rf --tb=short -p no:warnings --timeout 60 -m gpu_alone \
  > $OUT/pytest-alone.txt 2>&1; echo "gpu_alone rc=$?"; tail -1 $OUT/pytest-alone.txt
timeout 150 python bench/gpu/s23_gluon_fwd_ab.py 2>&1 | grep -v Warn | grep -v "^    gluon" | tee $OUT/gluon-ab.txt
timeout 120 python -m flashtriton bench --suite prefill --out $OUT -- --head-dims 128 --causal no \
  --seqlens 512 1024 2048 4096 8192 16384 --tag s23-gluon-d128 2>&1 | grep -v Warn | tail -14
