#!/usr/bin/env bash
# Prepared in session 14 for the next session's first GPU call (bench/NOTES.md, "Session
# 14"): the whole GPU suite (the session's last commits - host-path Python, the dQ kernel's
# block order, the forward's prepared HEAVY_FIRST - did not get a whole-suite run), the
# D = 256 heavy-first forward A/B, and the host-time probe of eager decode steps against
# cuDNN. ~7 minutes.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 260 python -m pytest tests -o addopts="" -q -rf --tb=short -p no:warnings -p no:benchmark \
  -n 10 --timeout 150 -k "not cpu" > $OUT/pytest-gpu.txt 2>&1
echo "pytest rc=$?"; grep -E "^FAILED|^ERROR" $OUT/pytest-gpu.txt | head -20; tail -1 $OUT/pytest-gpu.txt
timeout 120 python bench/gpu/s15_fwd_heavy_first_ab.py 2>&1 | grep -v Warn | tee $OUT/s15-fwd-heavy-first.txt
timeout 120 python bench/gpu/s14_decode_eager.py 2>&1 | grep -v Warn | tee $OUT/s15-decode-eager.txt
