#!/bin/bash
# Session 43, call 1 (the working tree has bench/wip/gluon-bwd-timeline.patch and gluon-window-sched.patch applied;
# neither changes a route): their GPU tests, the window LPT A/B, the backward TIMELINE probe, then the D = 128 causal
# grid rows 512-4k (bf16, fp16) that session 42 left unmerged.
export PYTHONPATH=src
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv | tee $OUT/gpu.txt
timeout 150 python -m pytest -q -o addopts="" -m gpu tests/test_gluon_window_schedule.py tests/test_bwd_gluon_timeline.py \
  2>&1 | tail -5 | tee $OUT/s43_tests.txt
timeout 100 python bench/gpu/s43_window_sched_ab.py 2>&1 | tee $OUT/s43_window_sched_ab.txt
timeout 200 python bench/gpu/s43_bwd_timeline_probe.py --save $OUT/s43 2>&1 | tee $OUT/s43_bwd_timeline.txt
