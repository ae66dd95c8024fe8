#!/usr/bin/env bash
# RECORD ONLY (ran in session 31): DK_RS was measured slower and reverted (ac367ba); its tests, A/B
# script and policy table went with the revert; recover them with `git show 56062e4`.
# Session 31, call D (~8 min): the rebased DK_RS patch (bench/wip/fused-bwd-d128-dkrs.patch, applied
# with its switch off): its GPU tests, its A/B (prediction in the script's docstring), then the
# D = 128 bf16 grid rows (both masks) with DK_RS forced on in-process, kept only if the A/B wins.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
R=$OUT/s31; mkdir -p $R
L=$R/callD.log
step() { echo "== $1 $(date -u +%H:%M:%S)" >> $L; shift; "$@" 2>&1 | grep -v Warn >> $L; }
step "DK_RS GPU tests" timeout 120 python -m pytest -o addopts="" -q -rf -p no:warnings -n 10 --timeout 100 \
  -m "gpu and not gpu_alone" tests/test_bwd_gluon_dkrs.py
step "DK_RS A/B (D = 128 fused backward)" timeout 250 python bench/gpu/s32_fused_bwd_dkrs_ab.py
step "grid bf16 D=128, DK_RS on" timeout 190 python -c "
import sys
from flashtriton.launchers import policy
policy.GLUON_BWD_FUSED_DK_RS = {'plain': frozenset({128}), 'causal': frozenset({128})}
from flashtriton.bench import prefill
prefill.main(['--head-dims', '128', '--causal', 'both', '--tag', 'd128dkrs', '--out', '$R'])
"
echo "== end $(date -u +%H:%M:%S)" >> $L
grep -v "prefill \[" $L | tail -c 11000
cd $OUT && tar czf s31-callD.tgz s31
