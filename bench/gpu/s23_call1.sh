#!/usr/bin/env bash
# Session 23, call 1 (~6 min; prepared in session 22): the GPU suite on session 22's final
# tree (its review fixes and new tests ran under the interpreter only: the D = 64 case of
# test_persistent_forward_repeatable_gpu, the varlen D = 256 regression test, ...), then
# the D = 256 varlen forward on fwd_ws_varlen.py against fwd.py (s23_varlen_d256_ab.py).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 330 bash bench/gpu/tests.sh
(cd bench/gpu && timeout 150 python s23_varlen_d256_ab.py 2>&1 | grep -v Warn | tee $OUT/varlen-d256-ab.txt)
