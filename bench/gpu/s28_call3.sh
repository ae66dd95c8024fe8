#!/usr/bin/env bash
# Session 28, call 3 (~4 min): page-16 A/B again (call 2's script read a captured graph's
# output before any replay: fixed), and the fused WINDOW backward at the lengths / head dim
# call 2 did not measure (D = 128 at 1k / 2k, D = 64 at 4k / 16k) to set its route.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
R=$OUT/s28c3; mkdir -p $R
L=$R/call3.log
step() { echo "== $1 $(date -u +%H:%M:%S)" >> $L; shift; "$@" 2>&1 | grep -v Warn >> $L; }
step "paged16 ab" timeout 150 python bench/gpu/s28_decode_paged16_ab.py 3
S28_SHAPES=2048:8,1024:16 step "window ab D128 short" timeout 120 python bench/gpu/s28_gluon_bwd_window_ab.py ab
S28_D=64 S28_SHAPES=16384:1,4096:4,2048:8 step "window ab D64" timeout 150 python bench/gpu/s28_gluon_bwd_window_ab.py all
echo "== end $(date -u +%H:%M:%S)" >> $L
grep -v "^check\|^ab round\|_warn\|run_backward" $L | tail -c 11000
cd $OUT && tar czf s28-call3.tgz s28c3
