#!/bin/bash
# Session 45, call 4: call 3's stale route test (D = 128 causal 1k / 2k run PERSISTENT O_STAGE since session 42), fixed;
# then the suite without call 3's first files in full (call 3's run of it hit its 270 s limit at ~85%, no failure
# so far), then the gpu_alone tests in one process.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv | tee $OUT/gpu.txt
timeout 90 python -m pytest -o addopts="" -q -rf -p no:warnings tests/test_fwd_gluon.py \
  -k test_flash_attn_func_takes_gluon_causal_gpu > $OUT/s45_fixed.txt 2>&1; echo "rc $?"; tail -2 $OUT/s45_fixed.txt
timeout 400 python -m pytest tests -o addopts="" -q -rf -p no:warnings -n 10 --timeout 150 -k "not cpu" \
  -m "not gpu_alone" --ignore tests/test_kvcache.py --ignore tests/test_kvcache_checks.py \
  --ignore tests/test_fwd_gluon.py --ignore tests/test_fwd_gluon_o_stage.py \
  --ignore tests/test_fwd_gluon_causal_3wg.py --ignore tests/test_fwd_gluon_3wg.py > $OUT/s45_gpu_rest.txt 2>&1
echo "rc $?"; grep -E "FAILED|ERROR" $OUT/s45_gpu_rest.txt | head -20; tail -3 $OUT/s45_gpu_rest.txt
timeout 80 python -m pytest tests -o addopts="" -q -rf -p no:warnings --timeout 300 -m gpu_alone \
  > $OUT/s45_gpu_alone.txt 2>&1; echo "rc $?"; tail -3 $OUT/s45_gpu_alone.txt
