#!/usr/bin/env bash
# Session 34, call C (~5 min; prepared in session 33), with the three session-33 patches applied (plan:
# bench/NOTES.md "Next GPU session (34)"): the PERSISTENT fused D = 128 backward (grid = SMs, items
# phased by a running ring count, the next item's K / V and first Q / dO loaded under the dK / dV
# epilogue; prediction +2.5-3.5% at 2k plain, +1.2-1.8% 4k, +0.3-0.5% 16k, causal 4k +1-4%, 16k -1 to
# +2%: the A/B's docstring, bench/wip/gluon-bwd-persistent.md). Its A/B smokes programs=1 / 3 in a
# subprocess under a 60 s watchdog first (a phase bug hangs), then f64 checks, then timings; then the
# GPU tests (98, never run). Route by the docstring's rule (policy.GLUON_BWD_FUSED_PERSISTENT).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
L=$OUT/callC.log
step() { echo "== $1 $(date -u +%H:%M:%S)" >> $L; shift; "$@" 2>&1 | grep -v Warn >> $L; }
step "persistent bwd A/B" timeout 200 python bench/gpu/s34_bwd_persistent_ab.py
step "persistent bwd GPU tests" timeout 150 python -m pytest -o addopts="" -q -rf -p no:warnings -n 8 --timeout 120 \
  -m "gpu and not gpu_alone" tests/test_bwd_gluon_persistent.py
echo "== end $(date -u +%H:%M:%S)" >> $L
grep -E "^\||^== |passed|failed|FAIL|Error|smoke|SMOKE|hang" $L | tail -60
