#!/usr/bin/env bash
# Session 17, call 6: is the multi-process NaN of the warp-specialized kernels a collision
# of identical virtual addresses across processes (in-kernel TMA descriptors in global
# scratch, the SMs' descriptor cache)? Each process pads its allocations differently;
# then the ring scratch; then the fixed persistent test.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
for i in 1 2 3; do S17_PAD_MB=$((i * 72 + 5)) timeout 70 python bench/gpu/s17_ws_off_stress.py 30 > $OUT/pad-$i.txt 2>&1 & done; wait
cat $OUT/pad-*.txt | grep -v Warn
for i in 1 2 3; do FLASHTRITON_DESC_SCRATCH=ring timeout 70 python bench/gpu/s17_ws_off_stress.py 30 > $OUT/ring-$i.txt 2>&1 & done; wait
cat $OUT/ring-*.txt | grep -v Warn
timeout 60 python -m pytest tests/test_prefill.py -o addopts="" -q -p no:warnings -n 4 -k "backward_persistent or ragged" 2>&1 | tail -2
