#!/bin/bash
# Session 67, call 5: flash_attn_with_kvcache on rows before every key on the GPU (its decode kernel keeps the
# plain ALiBi bias), the anchored form's cost on non-causal varlen ALiBi calls (A B B A against the anchored branch
# compiled out), and on an H200 the queued fp32 one-row route probe (bench/gpu/s66a.sh).
#   bash bench/gpu/s67d.sh
export PYTHONUNBUFFERED=1
out=${OUT:-/tmp}
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$gpu"
PYTHONPATH=$PWD/src python -c "import torch, triton; print(torch.__version__, triton.__version__)"
PYTHONPATH=$PWD/src timeout 120 python bench/cpu/s67_kvcache_far_rows.py cuda 2>&1 | tee $out/s67d_kvcache_far_rows.txt
rm -rf /tmp/s67_before; mkdir -p /tmp/s67_before; cp -r src /tmp/s67_before/
sed -i 's/        if HAS_ALIBI == 2:/        if False:/' /tmp/s67_before/src/flashtriton/kernels/common.py
for t in before after after before; do
  if [ $t = after ]; then p=$PWD/src; else p=/tmp/s67_before/src; fi
  PYTHONPATH=$p timeout 120 python bench/gpu/s67_alibi_varlen_time.py $t
done 2>&1 | tee $out/s67d_varlen_time.txt
bash bench/gpu/s66a.sh
