#!/usr/bin/env bash
# Session 38, fifth GPU call: OWN_TILES + PEEL_PLAIN's GPU tests, then the A/B with own1p (bench/gpu/s38_own_tiles_ab.py).
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1; out=${OUT:-/tmp}
timeout 150 python -m pytest -q -o addopts="" -p no:warnings -m gpu tests/test_fwd_gluon_own_tiles.py > $out/s38e_tests.txt 2>&1
echo "tests rc $?"; tail -4 $out/s38e_tests.txt
S38_NS=512,1024 timeout 300 python bench/gpu/s38_own_tiles_ab.py > $out/s38e_ab.txt 2>&1; echo "ab rc $?"
grep -E "^\||WRONG|DIFFER|Error|own1p" $out/s38e_ab.txt | cut -c1-400
