#!/bin/bash
# Session 67, call 3: the ALiBi anchor gated (alibi_anchor.needed: HAS_ALIBI = 2 only where a row may sit before
# every key) on the GPU: the ALiBi tests and tests/test_masks.py / test_varlen.py whole, the far-row accuracy
# probe, and the cost against the same tree with the anchor branch off (`if False:`), A B B A.
#   bash bench/gpu/s67b.sh
export PYTHONUNBUFFERED=1
out=${OUT:-/tmp}
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$gpu"
PYTHONPATH=$PWD/src python -c "import torch, triton; print(torch.__version__, triton.__version__)"
old=/tmp/s67_before; rm -rf $old; mkdir -p $old; cp -r src $old/
sed -i 's/        if HAS_ALIBI == 2:/        if False:/' $old/src/flashtriton/kernels/common.py
grep -c "        if False:" $old/src/flashtriton/kernels/common.py
PYTHONPATH=$PWD/src timeout -s INT 300 python -m pytest tests -o addopts="" \
  -q -rf -p no:warnings -n 10 --timeout 200 -k "(alibi or ALiBi or test_masks or test_varlen) and not cpu" \
  -m "not gpu_alone" > $out/s67b_tests.txt 2>&1
echo "tests rc $?"; tail -1 $out/s67b_tests.txt; grep -E "^(FAILED|ERROR)" $out/s67b_tests.txt | head -20
PYTHONPATH=$PWD/src timeout 150 python bench/gpu/s66_alibi_far_rows.py cuda triton 2>&1 | tee $out/s67b_far_rows.txt
for t in before after after before; do
  if [ $t = before ]; then p=$old/src; else p=$PWD/src; fi
  PYTHONPATH=$p timeout 120 python bench/gpu/s67_alibi_anchor_time.py $t
done 2>&1 | tee $out/s67b_time.txt
