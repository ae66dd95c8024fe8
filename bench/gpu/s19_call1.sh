#!/usr/bin/env bash
# Prepared in session 18 for session 19's first call (~9 min). Apply the wip patch here
# first (`git am bench/wip/dkdv-vec-ptr-ahead.patch` on a branch) for part 3.
# 1. decode first, while the host is quiet (session 18's eager rows came after a
#    10-worker pytest and read 3-4x high for every provider);
# 2. the masked split path made persistent beyond 4k (window (1024, 0) 16k, causal 8k / 16k);
# 3. with the patch: the dK/dV pointer loads one iteration ahead, A/B then stress.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-compute-apps=pid,name --format=csv
timeout 200 python -m flashtriton.bench.decode --out $OUT/decode 2>&1 | grep -v Warn | sed -n '/### Contiguous/,/^$/p'
timeout 150 python bench/gpu/s19_split_persistent_ab.py 2>&1 | grep -v Warn | tee $OUT/split-persistent.txt
if grep -q WS_DKDV_VEC_PTR_KIND src/flashtriton/launchers/backward.py; then
  timeout 100 python bench/gpu/s19_vec_ptr_ab.py 2>&1 | grep -v Warn | tee $OUT/vec-ptr-ab.txt
  timeout 150 python bench/gpu/s19_vec_ptr_ab.py stress 40 2>&1 | grep -v Warn | tee $OUT/vec-ptr-stress.txt
else
  echo "bench/wip/dkdv-vec-ptr-ahead.patch not applied: part 3 skipped"
fi
