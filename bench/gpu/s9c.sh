#!/usr/bin/env bash
# Session 9, call 2: the dropout backward on bwd_ws.py under load, then its cost
# (bench/gpu/s9_dropout_bwd.py). s9b.sh's forward probes were dropped: call 1's GPU suite
# already found the reworked dropout forward's lse wrong (D = 256).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
WORKERS=10 SECONDS_EACH=150 timeout 330 python bench/gpu/s9_dropout_bwd.py 2>&1 | grep -v Warn | tee $OUT/s9-dropout-bwd.txt
