#!/usr/bin/env bash
# Prepared in session 19 for session 20's first call (~6 min).
# 1. the split path's resumed launches on smaller tiles / query rows (A/B, gradients
#    against the default, NaN counted); 2. the split-path GPU tests; 3. the decode bench
#    alone (quiet host: its eager rows), for the README table.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-compute-apps=pid,name --format=csv
timeout 300 python bench/gpu/s20_resume_tiles_ab.py 2>&1 | grep -v Warn | tee $OUT/resume-tiles-ab.txt
timeout 120 python -m pytest tests/test_prefill.py -o addopts="" -q -rf -p no:warnings -n 8 --timeout 100 \
  -k "split or resume or warp_specialized_backward" 2>&1 | tail -3
timeout 200 python -m flashtriton.bench.decode --out $OUT/decode 2>&1 | grep -v Warn | tail -3
