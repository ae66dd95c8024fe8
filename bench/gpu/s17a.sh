#!/usr/bin/env bash
# Session 17, first GPU call: the persistent bwd_ws.py (launchers.backward.WS_PERSISTENT,
# empty by default; descriptors made once over (B * N, H-span) views). Its tests (the
# interpreter-checked bitwise ones, now on the GPU, and the GPU repeat test), then the
# bitwise stress in 3 processes sharing the GPU (any "differ" > 0 is a bug), then the A/B.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 150 python -m pytest tests/test_prefill.py -o addopts="" -q -rf --tb=short -p no:warnings -p no:benchmark \
  -n 8 --timeout 120 -k "backward_persistent or persistent_backward or warp_specialized_backward or split_backward" \
  > $OUT/pytest.txt 2>&1
echo "pytest rc=$?"; grep -E "^FAILED|^ERROR" $OUT/pytest.txt | head -20; tail -1 $OUT/pytest.txt
for i in 1 2 3; do timeout 200 python bench/gpu/s17_bwd_persistent_ab.py stress 10 > $OUT/stress-$i.txt 2>&1 & done; wait
cat $OUT/stress-*.txt | grep -v Warn
