#!/bin/bash
# Session 45, call 3: GPU tests after the session's merges: the kvcache suites (the triton step key now shares
# _options_key with the CPU step memo and refuses a zero scale / a -0.0 softcap), the Gluon forward suites (the D = 64
# causal 4k bf16 O_STAGE route), then the rest of the suite in parallel as far as the time allows.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv | tee $OUT/gpu.txt
timeout 280 python -m pytest -o addopts="" -q -rf -p no:warnings -n 10 --timeout 150 -k "not cpu" -m "not gpu_alone" \
  tests/test_kvcache.py tests/test_kvcache_checks.py tests/test_fwd_gluon.py tests/test_fwd_gluon_o_stage.py \
  tests/test_fwd_gluon_causal_3wg.py tests/test_fwd_gluon_3wg.py > $OUT/s45_gpu_tests.txt 2>&1
echo "rc $?"; tail -4 $OUT/s45_gpu_tests.txt
timeout 270 python -m pytest tests -o addopts="" -q -rf -p no:warnings -n 10 --timeout 150 -k "not cpu" \
  -m "not gpu_alone" --deselect tests/test_kvcache.py --deselect tests/test_kvcache_checks.py \
  --deselect tests/test_fwd_gluon.py --deselect tests/test_fwd_gluon_o_stage.py \
  --deselect tests/test_fwd_gluon_causal_3wg.py --deselect tests/test_fwd_gluon_3wg.py > $OUT/s45_gpu_rest.txt 2>&1
echo "rc $?"; grep -E "FAILED|ERROR" $OUT/s45_gpu_rest.txt | head -20; tail -3 $OUT/s45_gpu_rest.txt
