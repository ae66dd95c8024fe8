#!/bin/bash
# Session 67, call 4: the anchored ALiBi distance in float32 (kernels/common.scores_log2, HAS_ALIBI = 2): the ALiBi
# tests and tests/test_masks.py / test_varlen.py whole, the far-row probe, and the time of three trees, A B C C B A:
# before (the anchored branch compiled out: the integer form everywhere), after (integer form plain, float32 form
# anchored), floatall (the float32 form everywhere).
#   bash bench/gpu/s67c.sh
export PYTHONUNBUFFERED=1
out=${OUT:-/tmp}
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$gpu"
PYTHONPATH=$PWD/src python -c "import torch, triton; print(torch.__version__, triton.__version__)"
for v in before floatall; do rm -rf /tmp/s67_$v; mkdir -p /tmp/s67_$v; cp -r src /tmp/s67_$v/; done
sed -i 's/        if HAS_ALIBI == 2:/        if False:/' /tmp/s67_before/src/flashtriton/kernels/common.py
sed -i 's/        if HAS_ALIBI == 2:/        if True:/' /tmp/s67_floatall/src/flashtriton/kernels/common.py
grep -c "        if False:" /tmp/s67_before/src/flashtriton/kernels/common.py
grep -c "        if True:" /tmp/s67_floatall/src/flashtriton/kernels/common.py
PYTHONPATH=$PWD/src timeout -s INT 300 python -m pytest tests -o addopts="" \
  -q -rf -p no:warnings -n 10 --timeout 200 -k "(alibi or ALiBi or test_masks or test_varlen) and not cpu" \
  -m "not gpu_alone" > $out/s67c_tests.txt 2>&1
echo "tests rc $?"; tail -1 $out/s67c_tests.txt; grep -E "^(FAILED|ERROR)" $out/s67c_tests.txt | head -20
PYTHONPATH=$PWD/src timeout 150 python bench/gpu/s66_alibi_far_rows.py cuda triton 2>&1 | tee $out/s67c_far_rows.txt
for t in before after floatall floatall after before; do
  if [ $t = after ]; then p=$PWD/src; else p=/tmp/s67_$t/src; fi
  PYTHONPATH=$p timeout 120 python bench/gpu/s67_alibi_anchor_time.py $t
done 2>&1 | tee $out/s67c_time.txt
