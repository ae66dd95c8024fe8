#!/bin/bash
# Session 67's GPU calls: the ALiBi anchor (flashtriton/alibi_anchor.py) on the Triton kernels. Each call times
# trees made from this one by a sed on a copy of src (one line of kernels/common.py or launchers/forward.py), in
# interleaved rounds, and most run the ALiBi tests and the far-row probe first. Outputs: bench/results/nvidia-h100/s67/.
#   bash bench/gpu/s67.sh a   # call 2, run on 6cf264f (the integer anchored form): ALiBi tests, far rows, before /
#                             # after A B B A (its sed matches that tree's common.py only)
#   bash bench/gpu/s67.sh b   # call 3: the anchor gated by alibi_anchor.needed; + test_masks / test_varlen whole
#   bash bench/gpu/s67.sh c   # call 4: the float32 anchored form; before / after / floatall, A B C C B A
#   bash bench/gpu/s67.sh d   # call 5: kvcache far rows, varlen ALiBi before / after, the H200-only s66a probe
#   bash bench/gpu/s67.sh e   # call 6: the float32 form for every forward (fwdfloat) against this tree
export PYTHONUNBUFFERED=1
out=${OUT:-/tmp}
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$gpu"
PYTHONPATH=$PWD/src python -c "import torch, triton; print(torch.__version__, triton.__version__)"
COMMON=src/flashtriton/kernels/common.py

tree() {  # tree NAME FILE SED: /tmp/s67_NAME/src, a copy of src with SED applied to FILE; prints the match count
  rm -rf /tmp/s67_$1; mkdir -p /tmp/s67_$1; cp -r src /tmp/s67_$1/
  sed -i "$3" /tmp/s67_$1/$2
  echo "$1: $(grep -c "$4" /tmp/s67_$1/$2) line(s) now read '$4'"
}
gpu_tests() {  # gpu_tests LOG K_EXPR
  PYTHONPATH=$PWD/src timeout -s INT 300 python -m pytest tests -o addopts="" -q -rf -p no:warnings -n 10 \
    --timeout 200 -k "$2" -m "not gpu_alone" > $out/$1.txt 2>&1
  echo "tests rc $?"; tail -1 $out/$1.txt; grep -E "^(FAILED|ERROR)" $out/$1.txt | head -20
}
far_rows() { PYTHONPATH=$PWD/src timeout 150 python bench/gpu/s66_alibi_far_rows.py cuda triton 2>&1 | tee $out/$1.txt; }
rounds() {  # rounds LOG "SCRIPT [ARGS]..." TREE...: each script once per tree, in the order given (after = this tree)
  local log=$1 scripts=$2; shift 2
  for t in "$@"; do
    if [ $t = after ]; then p=$PWD/src; else p=/tmp/s67_$t/src; fi
    while read -r script args; do
      [ -n "$script" ] && PYTHONPATH=$p timeout 120 python $script $t $args
    done <<< "$scripts"
  done 2>&1 | tee $out/$log.txt
}
TIME=bench/gpu/s67_alibi_anchor_time.py
VARLEN=bench/gpu/s67_alibi_varlen_time.py
case "$1" in
  a) tree before $COMMON 's/tl.abs(tl.maximum(q_idx + diag, 0) - k_idx)/tl.abs(q_idx + diag - k_idx)/' \
       "tl.abs(q_idx + diag - k_idx)"
     gpu_tests s67a_tests "(alibi or ALiBi) and not cpu"; far_rows s67a_far_rows
     rounds s67a_time "$TIME" before after after before ;;
  b|c) tree before $COMMON 's/        if HAS_ALIBI == 2:/        if False:/' "        if False:"
     [ $1 = c ] && tree floatall $COMMON 's/        if HAS_ALIBI == 2:/        if True:/' "        if True:"
     gpu_tests s67$1_tests "(alibi or ALiBi or test_masks or test_varlen) and not cpu"; far_rows s67$1_far_rows
     if [ $1 = b ]; then rounds s67b_time "$TIME" before after after before
     else rounds s67c_time "$TIME" before after floatall floatall after before; fi ;;
  d) PYTHONPATH=$PWD/src timeout 120 python bench/cpu/s67_kvcache_far_rows.py cuda 2>&1 | tee $out/s67d_kvcache_far_rows.txt
     tree before $COMMON 's/        if HAS_ALIBI == 2:/        if False:/' "        if False:"
     rounds s67d_varlen_time "$VARLEN" before after after before
     bash bench/gpu/s66a.sh ;;
  e) tree fwdfloat src/flashtriton/launchers/forward.py \
       's/\*\*_common_scalars(params, alibi, alibi_anchor.needed(seqlen_q, seqlen_k, params.window_right, is_varlen))/**_common_scalars(params, alibi, True)/' \
       "_common_scalars(params, alibi, True)"
     rounds s67e_time "$TIME
$VARLEN
$VARLEN causal" after fwdfloat fwdfloat after ;;
esac
