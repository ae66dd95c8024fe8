#!/usr/bin/env bash
# Session 38, fourth GPU call: OWN_TILES' GPU tests (tests/test_fwd_gluon_own_tiles.py, the D = 256 forward's),
# then its A/B (bench/gpu/s38_own_tiles_ab.py); logs under $OUT.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1; out=${OUT:-/tmp}
timeout 240 python -m pytest -q -o addopts="" -p no:warnings -m gpu tests/test_fwd_gluon_own_tiles.py \
  tests/test_fwd_gluon_d256.py > $out/s38d_tests.txt 2>&1; echo "tests rc $?"; tail -4 $out/s38d_tests.txt
timeout 300 python bench/gpu/s38_own_tiles_ab.py > $out/s38d_ab.txt 2>&1; echo "ab rc $?"
grep -E "^\||WRONG|DIFFER|Error" $out/s38d_ab.txt
