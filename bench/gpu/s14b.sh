#!/usr/bin/env bash
# Session 14, second call: why capture failed (s14_capture_debug.py, one process per shape),
# then the resumed dK/dV layout A/B timed eagerly. ~5 minutes.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
for s in "2 8192 32 64" "1 8192 4 64" "1 4096 4 64" "4 4096 16 128" "1 16384 32 64"; do
  timeout 120 python bench/gpu/s14_capture_debug.py $s 2>&1 | tail -40 | tee -a $OUT/s14-capture.txt
done
timeout 240 python bench/gpu/s14_resume_rows_ab.py 2>&1 | grep -v Warn | tee $OUT/s14-resume-rows.txt
