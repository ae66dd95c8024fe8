#!/usr/bin/env bash
# Session 22, call 8 (~3 min): dQ's window tile (64, 64, 4, 2): the features bench's window
# rows and the window / mask tests on the GPU.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 150 python -m flashtriton.bench.features --cases window --out $OUT/features 2>&1 | grep -v Warn | grep "window"
timeout 150 python -m pytest tests -o addopts="" -q -rf -p no:warnings -n 8 --timeout 120 -k "window and not cpu" 2>&1 | tail -3
