#!/usr/bin/env bash
# Session 13, call 7: is the slow bench.latency of call 6 a host-path regression? HEAD (16b04aa,
# copied to tmp_head/src) against the working tree, alternating, twice each.
set -u
export PYTHONUNBUFFERED=1
run() { PYTHONPATH=$1 timeout 70 python -c "
import functools
from flashtriton.bench import latency as L
L.decode_steps = functools.partial(L.decode_steps, ((1, 8192),))
L.main(((1, 128, 16, 128), (1, 512, 16, 128)))" 2>&1 | grep -v Warn | grep "flashtriton\|cudnn" | sed "s/^/$2 /"; }
for i in 1 2; do run $PWD/src new; run $PWD/tmp_head/src head; done
