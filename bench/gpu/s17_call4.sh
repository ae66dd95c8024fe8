#!/usr/bin/env bash
# Session 17, call 4: the backward policy with persistent bwd_ws.py (launchers.backward.
# WS_PERSISTENT, D = 128 capped at N = 4k): 3-process stress of what it takes (and of the
# one-tile D = 128 16k launch, which the cap leaves: NOT PERSISTENT is expected there),
# the persistent / warp-spec tests, then grid rows D = 64 / 128.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
export S17_STRESS="128,16384,0,0;64,16384,0,0;64,4096,0,0;128,4096,0,0;128,2048,1,0;128,4096,0,0.1"
for i in 1 2 3; do timeout 150 python bench/gpu/s17_bwd_persistent_ab.py stress 6 > $OUT/stress-$i.txt 2>&1 & done; wait
cat $OUT/stress-*.txt | grep -v Warn
timeout 120 python -m pytest tests/test_prefill.py -o addopts="" -q -rf --tb=short -p no:warnings -p no:benchmark \
  -n 8 --timeout 100 -k "persistent or warp_spec" > $OUT/pytest.txt 2>&1
echo "pytest rc=$?"; grep -E "^FAILED|^ERROR" $OUT/pytest.txt | head -20; tail -1 $OUT/pytest.txt
timeout 300 python -m flashtriton bench --suite prefill --out $OUT -- --head-dims 64 128 --no-flex \
  --seqlens 512 1024 2048 4096 16384 --tag s17-bwd 2>&1 | grep -v Warn | tail -60
