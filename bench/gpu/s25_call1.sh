#!/usr/bin/env bash
# Session 25, call 1 (prepared in session 24; ~6-8 min). First apply the three patches here:
#   git am bench/wip/gluon-fused.patch bench/wip/gluon-window.patch bench/wip/gluon-dq.patch
# Then: the fused backward's first GPU run (smoke: a hang = barrier bug, cut by its timeout;
# "launching" is printed before each kernel runs, after its compile), its quick A/B against
# the library's backward and cuDNN's; the window forward's smoke and A/B. Each step under
# its own timeout, the log written as it goes.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
L=$OUT/call1.log
step() { echo "== $1 $(date -u +%H:%M:%S)" >> $L; shift; "$@" 2>&1 | grep -v Warn >> $L; }
step "fused smoke" timeout 240 python bench/gpu/s25_gluon_fused_ab.py smoke
step "fused quick" timeout 150 python bench/gpu/s25_gluon_fused_ab.py quick
step "window smoke" timeout 200 python bench/gpu/s25_gluon_window_ab.py smoke
step "window ab" timeout 150 python bench/gpu/s25_gluon_window_ab.py ab
echo "== end $(date -u +%H:%M:%S)" >> $L
