#!/bin/bash
# Session 67, call 6: the float32 ALiBi distance for every forward (the launcher passes HAS_ALIBI = 2 to fwd.py
# whatever the shape; the backward keeps alibi_anchor.needed) against this tree, A B B A: dense 4k non-causal /
# causal and Nq = 8k, Nk = 2k (bench/gpu/s67_alibi_anchor_time.py), varlen 16k non-causal / causal
# (bench/gpu/s67_alibi_varlen_time.py).
#   bash bench/gpu/s67e.sh
export PYTHONUNBUFFERED=1
out=${OUT:-/tmp}
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$gpu"
PYTHONPATH=$PWD/src python -c "import torch, triton; print(torch.__version__, triton.__version__)"
rm -rf /tmp/s67_fwdfloat; mkdir -p /tmp/s67_fwdfloat; cp -r src /tmp/s67_fwdfloat/
sed -i 's/\*\*_common_scalars(params, alibi, alibi_anchor.needed(seqlen_q, seqlen_k, params.window_right, is_varlen))/**_common_scalars(params, alibi, True)/' /tmp/s67_fwdfloat/src/flashtriton/launchers/forward.py
grep -c "_common_scalars(params, alibi, True)" /tmp/s67_fwdfloat/src/flashtriton/launchers/forward.py
for t in after fwdfloat fwdfloat after; do
  if [ $t = after ]; then p=$PWD/src; else p=/tmp/s67_fwdfloat/src; fi
  PYTHONPATH=$p timeout 120 python bench/gpu/s67_alibi_anchor_time.py $t
  PYTHONPATH=$p timeout 60 python bench/gpu/s67_alibi_varlen_time.py $t
  PYTHONPATH=$p timeout 60 python bench/gpu/s67_alibi_varlen_time.py $t causal
done 2>&1 | tee $out/s67e_time.txt
