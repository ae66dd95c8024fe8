#!/usr/bin/env bash
# Session 29, call 3 (~8 min): the one-tile D = 64 bwd_ws.py NaN probe, the GPU tests of
# the two routes taken after call 2 (3 consumers at D = 64 from 2k; the D = 256 causal
# one-loop backward to 1k), the grid rows they change (bf16 D = 64; D = 256 causal 512-2k),
# then the fp16 grid at D = 64 and 128 (stale since session 19).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
R=$OUT/s29; mkdir -p $R
L=$R/call3.log
step() { echo "== $1 $(date -u +%H:%M:%S)" >> $L; shift; "$@" 2>&1 | grep -v Warn >> $L; }
step "onetile probe" timeout 100 python bench/gpu/s29_bwd_ws_onetile_probe.py 200
step "route tests" timeout 150 python -m pytest -o addopts="" -q -p no:warnings -n 8 --timeout 120 -k "not cpu" \
  tests/test_fwd_gluon_3wg.py tests/test_bwd_one_loop.py tests/test_fwd_gluon.py tests/test_bwd_rows_first.py
step "grid bf16 D=64" timeout 110 python -m flashtriton bench --suite prefill --out $R -- --head-dims 64 --causal both --tag d64
step "grid bf16 D=256 causal" timeout 90 python -m flashtriton bench --suite prefill --out $R -- --head-dims 256 --causal yes --seqlens 512 1024 2048 --tag d256c
step "grid fp16 D=64,128" timeout 230 python -m flashtriton bench --suite prefill --out $R -- --dtypes float16 --head-dims 64 128 --causal both --tag fp16a
echo "== end $(date -u +%H:%M:%S)" >> $L
grep -v "^ab round\|^N=.*round" $L | tail -c 9000
cd $OUT && tar czf s29-call3.tgz s29
