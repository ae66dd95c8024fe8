#!/usr/bin/env bash
# Session 24, call 4: the routes of call 3 (policy: GLUON_FWD_MIN_N {128: 1k, 64: 4k}
# PERSISTENT, GLUON_FWD_CAUSAL_MIN_N {128: 4k, 64: 16k} one block a CTA): the whole GPU
# suite, then the grid rows those routes changed, every provider (Flex included).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
rm -f tests/test_bwd_gluon.py   # the helper's Gluon backward, in progress (call 5)
timeout 280 bash bench/gpu/tests.sh
g() { timeout 120 python -m flashtriton bench --suite prefill --out $OUT -- "$@" 2>&1 | grep -v Warn | grep "^| [0-9]" ; }
g --head-dims 128 --causal no --seqlens 1024 2048 4096 8192 16384 --tag s24-d128n
g --head-dims 128 --causal yes --seqlens 4096 --tag s24-d128c4k
g --head-dims 64 --causal no --seqlens 4096 8192 16384 --tag s24-d64n
g --head-dims 64 --causal yes --seqlens 16384 --tag s24-d64c16k
