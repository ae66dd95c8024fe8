#!/bin/bash
# Session 69's GPU call: the fp32 paged forward's few-rows tile (configs.DEFAULTS_FP32["fwd_few_rows"] for
# "fwd_paged"). Outputs under $OUT.
#   bash bench/gpu/s69.sh a   # GPU tests (kvcache / paged / one-row / decode / ALiBi / fp32, ten workers: the
#                             # session-68 selection that ran the card out of memory), timing A B (before = the
#                             # launcher's rows argument removed and configs.FP32_MAXNREG_AT emptied by two seds),
#                             # then bench/gpu/s69_fp32_regs_time.py (maxnreg off / on / a candidate tile, one
#                             # process) in the time left
#   bash bench/gpu/s69.sh b   # shorter: tests of test_varlen_paged.py / test_fp32.py, timing A B, the rest as a
#                             # (for a short device budget)
#   bash bench/gpu/s69.sh c   # shortest: the fp32 one-query paged tests, timing A B, ~2 min of regs timing
export PYTHONUNBUFFERED=1
out=${OUT:-/tmp}
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$gpu"
PYTHONPATH=$PWD/src python -c "import torch, triton; print(torch.__version__, triton.__version__)"
rm -rf /tmp/s69_before; mkdir -p /tmp/s69_before; cp -r src /tmp/s69_before/
sed -i 's/, q.element_size(), rows=varlen.max_seqlen_q)$/, q.element_size())/' \
  /tmp/s69_before/src/flashtriton/launchers/forward_paged.py
sed -i 's/^FP32_MAXNREG_AT = {.*}$/FP32_MAXNREG_AT = {}/' /tmp/s69_before/src/flashtriton/kernels/configs.py
echo "before: $(grep -c '^FP32_MAXNREG_AT = {}$' /tmp/s69_before/src/flashtriton/kernels/configs.py) + $(grep -c 'default_tile("fwd_paged", bd, varlen.max_seqlen_q, q.element_size())$' \
  /tmp/s69_before/src/flashtriton/launchers/forward_paged.py) line(s)"
sel="(kvcache or paged or one_row or one_query or decode or alibi or ALiBi or bench_tools or fp32) and not cpu"
total=430; tlim=240
[ "$1" = b ] && sel="(test_varlen_paged or test_fp32) and not cpu" && total=300 && tlim=120
[ "$1" = c ] && sel="(one_query_sharp_scale or one_query_paged_tile or register_budget) and not cpu" && total=180 \
  && tlim=60
PYTHONPATH=$PWD/src timeout -s INT $tlim python -m pytest tests -o addopts="" -q -rf -p no:warnings -n 10 \
  --timeout 200 -k "$sel" -m "not gpu_alone" > $out/s69a_tests.txt 2>&1
echo "tests rc $?"; tail -1 $out/s69a_tests.txt; grep -E "^(FAILED|ERROR)" $out/s69a_tests.txt | head -20
ab() {
  for t in before after; do
    p=$PWD/src; [ $t = before ] && p=/tmp/s69_before/src
    PYTHONPATH=$p timeout 60 python bench/gpu/s69_paged_fp32_few_rows_time.py $t
  done 2>&1 | tee $out/s69a_time.txt
}
regs() {
  left=$((total - SECONDS)); echo "regs timing budget ${left}s"
  [ $left -gt 60 ] && PYTHONPATH=$PWD/src timeout $left python bench/gpu/s69_fp32_regs_time.py $((left - 30)) 2>&1 | tee $out/s69a_fp32_regs.txt
}
if [ "$1" = c ]; then regs; [ $SECONDS -lt 150 ] && ab; else ab; regs; fi
