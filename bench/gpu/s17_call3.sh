#!/usr/bin/env bash
# Session 17, call 3: TILE_STAGES is 1 at D = 128 now (launchers.backward._tile_stages).
# Both persistent kernels at D = 128 in one process (diag2), the A/B with both kernels,
# the dropout ratio with the persistent dropout backward, and the 3-process stress.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 100 python bench/gpu/s17_bwd_persistent_ab.py diag2 2>&1 | grep -v Warn | tee $OUT/diag2.txt
timeout 150 python bench/gpu/s17_bwd_persistent_ab.py ab --head-dims 128 --no-1buf --seqlens 512 1024 2048 4096 16384 2>&1 | grep -v Warn | tee $OUT/ab128-both.txt
timeout 60 python bench/gpu/s17_bwd_persistent_ab.py dropout 2>&1 | grep -v Warn | tee $OUT/dropout.txt
for i in 1 2 3; do timeout 150 python bench/gpu/s17_bwd_persistent_ab.py stress 8 > $OUT/stress-$i.txt 2>&1 & done; wait
cat $OUT/stress-*.txt | grep -v Warn
