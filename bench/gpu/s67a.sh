#!/bin/bash
# Session 67, call 2: the ALiBi anchor (flashtriton/alibi_anchor.py) on the GPU: the ALiBi tests of the GPU suite,
# the far-row accuracy probe (session 66's, bench/gpu/s66_alibi_far_rows.py), and the anchor's cost against the
# tree before it (a copy of src with scores_log2's one line reverted), A B B A.
#   bash bench/gpu/s67a.sh
export PYTHONUNBUFFERED=1
out=${OUT:-/tmp}
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$gpu"
PYTHONPATH=$PWD/src python -c "import torch, triton; print(torch.__version__, triton.__version__)"
old=/tmp/s67_before; rm -rf $old; mkdir -p $old; cp -r src $old/
sed -i 's/tl.abs(tl.maximum(q_idx + diag, 0) - k_idx)/tl.abs(q_idx + diag - k_idx)/' $old/src/flashtriton/kernels/common.py
grep -c "tl.abs(q_idx + diag - k_idx)" $old/src/flashtriton/kernels/common.py
PYTHONPATH=$PWD/src timeout -s INT 260 python -m pytest tests -o addopts="" -q -rf -p no:warnings -n 10 \
  --timeout 200 -k "(alibi or ALiBi) and not cpu" -m "not gpu_alone" > $out/s67a_tests.txt 2>&1
echo "tests rc $?"; tail -1 $out/s67a_tests.txt; grep -E "^(FAILED|ERROR)" $out/s67a_tests.txt | head -20
PYTHONPATH=$PWD/src timeout 150 python bench/gpu/s66_alibi_far_rows.py cuda triton 2>&1 | tee $out/s67a_far_rows.txt
for t in before after after before; do
  if [ $t = before ]; then p=$old/src; else p=$PWD/src; fi
  PYTHONPATH=$p timeout 120 python bench/gpu/s67_alibi_anchor_time.py $t
done 2>&1 | tee $out/s67a_time.txt
