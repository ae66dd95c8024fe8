#!/bin/bash
# Session 45, call 1 (bench/wip/gluon-fwd-o-stage3.patch applied on the device's copy only; it changes no route):
# D = 64 causal 4k, the routed 3-consumer one-block kernel against the 2-consumer O_STAGE with the host's deal, per
# dtype. Sessions 43 / 44 read the 2-consumer form +4.3-6.9% / +3.0-5.3% in bf16 but -0.5..+3.6% in fp16 (the
# both-dtypes rule failed). Rule written before this run, per dtype: route the 2-consumer O_STAGE scheduled kernel
# at D = 64 causal 4k for a dtype if it reads >= 2% over the route in every round of this fresh run (3 rounds).
# Prediction: bf16 passes (+3-6%), fp16 does not (level).
export PYTHONPATH=$PWD/src
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv | tee $OUT/gpu.txt
git apply bench/wip/gluon-fwd-o-stage3.patch || exit 1
cd bench/gpu
for dt in bf16 fp16; do
  S43O_DTYPE=$dt S43O_N=4096 timeout 200 python s43_o_stage3_ab.py 2>&1 | tee $OUT/s45_ostage_$dt.txt
done
