#!/usr/bin/env bash
# Prepared in session 16 for session 17 (after the persistent-backward calls s17a / s17b of
# bench/wip/bwd-persistent-flat.patch): the multi-process fault under the probabilities'
# GEMM mix, every call judged against cuDNN (s17_mix_stress.py, 3 processes); the D = 64
# and short causal forwards on the persistent kernel (s17_d64_fwd_ab.py); dropout's ratio
# after the causal D = 128 forward moved. ~9 minutes.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
for i in 1 2 3; do timeout 110 python bench/gpu/s17_mix_stress.py 80 > $OUT/mix-$i.txt 2>&1 & done; wait
cat $OUT/mix-*.txt | grep -v Warn
echo "--- fresh inputs, descriptor scratch from a ring (FLASHTRITON_DESC_SCRATCH=ring: H1's candidate fix)"
for i in 1 2 3; do FLASHTRITON_DESC_SCRATCH=ring timeout 110 python bench/gpu/s17_mix_stress.py 80 > $OUT/mixr-$i.txt 2>&1 & done; wait
cat $OUT/mixr-*.txt | grep -v Warn
echo "--- the same, fixed inputs (S17_FIXED=1)"
for i in 1 2 3; do S17_FIXED=1 timeout 110 python bench/gpu/s17_mix_stress.py 80 > $OUT/mixf-$i.txt 2>&1 & done; wait
cat $OUT/mixf-*.txt | grep -v Warn
timeout 150 python bench/gpu/s17_d64_fwd_ab.py 2>&1 | grep -v Warn | tee $OUT/d64-fwd-ab.txt
timeout 90 python -m flashtriton.bench.features --cases dropout --out $OUT/features 2>&1 | grep -v Warn | tail -9
