#!/usr/bin/env bash
# (Needs bench/wip/gluon-bwd-named-ds.patch applied: NAMED_DS was measured slower and reverted, session 39.)
# Session 39, call B: NAMED_DS (the fused backward's dS^T hand-over by named barriers): GPU tests, then the A/B at
# D = 128 and D = 64 (bench/gpu/s39_named_ds_ab.py). Logs under $OUT.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1; out=${OUT:-/tmp}
timeout 220 python -m pytest -q -o addopts="" -p no:warnings -m gpu -x tests/test_bwd_gluon_named_ds.py \
  > $out/s39b_tests.txt 2>&1; echo "tests rc $?"; tail -4 $out/s39b_tests.txt
timeout 200 python bench/gpu/s39_named_ds_ab.py > $out/s39b_ab128.txt 2>&1; echo "ab128 rc $?"
grep -E "^\||FAILED|ERROR|WRONG|differ|bitwise|Error" $out/s39b_ab128.txt | cut -c1-300
S39_D=64 timeout 150 python bench/gpu/s39_named_ds_ab.py > $out/s39b_ab64.txt 2>&1; echo "ab64 rc $?"
grep -E "^\||FAILED|ERROR|WRONG|differ|bitwise|Error" $out/s39b_ab64.txt | cut -c1-300
