#!/usr/bin/env bash
# Session 21, call 7 (~2 min): where the dropout backward's time goes at 4k against 8k.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
(cd bench/gpu && timeout 200 python s21_dropout_profile.py 2>&1 | grep -v Warn | tee $OUT/dropout-profile.txt)
