#!/bin/bash
# Session 42, call 3: O_STAGE A/B and its TIMELINE (the working tree has bench/wip/gluon-fwd-timeline.patch applied)
export PYTHONPATH=src
timeout 420 python bench/gpu/s42_o_stage_ab.py 2>&1 | tee $OUT/s42_o_stage_ab.txt
timeout 120 python bench/gpu/s42_timeline_probe.py ostage 2>&1 | tee $OUT/s42_timeline_ostage.txt
