#!/usr/bin/env bash
# Session 20, call 6 (~4 min): the resumed tiles' stages / warps (s20_resume_sweep.py).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-compute-apps=pid,name --format=csv
timeout 330 python bench/gpu/s20_resume_sweep.py 2>&1 | grep -v Warn | tee $OUT/resume-sweep.txt
