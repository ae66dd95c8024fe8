#!/usr/bin/env bash
# Session 24, call 5 (the last: ~330 s of device time left): the Gluon dK/dV kernel's first
# GPU run (smoke-lite: 7 cases; a hang = barrier bug, cut by timeout), the SCHEDULED causal
# forward (smoke, then a short A/B), the D = 64 grid rows call 4's files lost, then the
# dK/dV A/B's quick form. Each step under its own timeout; the log is written as it goes.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
L=$OUT/call5.log
echo "== bwd smoke-lite $(date -u +%H:%M:%S)" >> $L
timeout 90 python bench/gpu/s24_gluon_bwd_ab.py smoke-lite 2>&1 | grep -v Warn >> $L
echo "== sched smoke + quick A/B $(date -u +%H:%M:%S)" >> $L
timeout 75 python bench/gpu/s25_gluon_sched_ab.py smoke quick 2>&1 | grep -v Warn >> $L
echo "== grid D = 64 $(date -u +%H:%M:%S)" >> $L
timeout 100 python -m flashtriton bench --suite prefill --out $OUT -- --head-dims 64 --causal both \
  --seqlens 4096 8192 16384 --tag s24-d64 2>&1 | grep -v Warn | grep "^| [0-9]" >> $L
echo "== bwd quick A/B $(date -u +%H:%M:%S)" >> $L
timeout 120 python bench/gpu/s24_gluon_bwd_ab.py quick 2>&1 | grep -v Warn >> $L
echo "== end $(date -u +%H:%M:%S)" >> $L
