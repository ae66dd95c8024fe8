#!/bin/bash
# Session 68's GPU call: the ALiBi anchor in the forward-only Triton kernels (decode, paged prefill;
# flashtriton/alibi_anchor.py). Outputs under $OUT (bench/results/<gpu>/s68/).
#   bash bench/gpu/s68.sh a   # GPU tests (kvcache / paged / one-row / decode / ALiBi), the far-row probes on this
#                             # tree and on "before" (the launchers' anchor switched off by two seds: the kernels
#                             # then run as before the change), timing A B B A, then the H200-only s66a probe
#   bash bench/gpu/s68.sh b   # the same with the tests of test_kvcache.py / test_varlen_paged.py and the
#                             # regression tests alone, and no s66a (for a short device budget)
#   bash bench/gpu/s68.sh c   # shorter still: the regression tests, test_varlen_paged.py and the ALiBi tests
#   bash bench/gpu/s68.sh d   # the regression tests alone, timing A B
export PYTHONUNBUFFERED=1
out=${OUT:-/tmp}
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$gpu"
PYTHONPATH=$PWD/src python -c "import torch, triton; print(torch.__version__, triton.__version__)"

before_tree() {  # /tmp/s68_before/src: the anchor off in both launchers; prints what the seds matched
  rm -rf /tmp/s68_before; mkdir -p /tmp/s68_before; cp -r src /tmp/s68_before/
  sed -i 's/^    anchored = alibi_slopes is not None and params.window_right != 0 and seqlen_q > 1$/    anchored = False/' \
    /tmp/s68_before/src/flashtriton/launchers/decode.py
  sed -i 's/alibi_anchor.needed(0, 0, params.window_right, True)/False/' \
    /tmp/s68_before/src/flashtriton/launchers/forward_paged.py
  echo "before: $(grep -c '^    anchored = False$' /tmp/s68_before/src/flashtriton/launchers/decode.py) +" \
       "$(grep -c '_common_scalars(params, alibi, False)' /tmp/s68_before/src/flashtriton/launchers/forward_paged.py) line(s)"
}
case "$1" in
  a|b|c|d) before_tree
     if [ $1 = a ]; then sel="(kvcache or paged or one_row or decode or alibi or ALiBi or bench_tools) and not cpu"
     elif [ $1 = b ]; then sel="(test_kvcache or test_varlen_paged or rows_before_keys) and not cpu"
     elif [ $1 = c ]; then sel="(rows_before_keys or test_varlen_paged or alibi) and not cpu"
     else sel="rows_before_keys and not cpu"; fi
     order="before after after before"; [ $1 = d ] && order="before after"
     PYTHONPATH=$PWD/src timeout -s INT 330 python -m pytest tests -o addopts="" -q -rf -p no:warnings -n 10 \
       --timeout 200 -k "$sel" -m "not gpu_alone" > $out/s68a_tests.txt 2>&1
     echo "tests rc $?"; tail -1 $out/s68a_tests.txt; grep -E "^(FAILED|ERROR)" $out/s68a_tests.txt | head -20
     for t in after before; do
       p=$PWD/src; [ $t = before ] && p=/tmp/s68_before/src
       PYTHONPATH=$p timeout 120 python bench/cpu/s68_far_rows_forward_only.py cuda triton 2>&1 | tee $out/s68a_far_rows_$t.txt
       PYTHONPATH=$p timeout 60 python bench/cpu/s67_kvcache_far_rows.py cuda 2>&1 | tee -a $out/s68a_far_rows_$t.txt
     done
     for t in $order; do
       p=$PWD/src; [ $t = before ] && p=/tmp/s68_before/src
       PYTHONPATH=$p timeout 120 python bench/gpu/s68_forward_only_alibi_time.py $t
     done 2>&1 | tee $out/s68a_time.txt
     if [ $1 = a ] && [ $SECONDS -lt 380 ]; then bash bench/gpu/s66a.sh; else echo "s66a not run (${SECONDS}s)"; fi ;;
esac
