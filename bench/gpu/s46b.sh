#!/bin/bash
# Session 46, call 2 (bench/wip/gluon-fwd-o-stage3.patch applied on the device's copy only; it changes no route).
# (1) D = 64 causal, nine rounds (the A/B script's three made nine with S43O_ROUNDS): fp16 4k (route: the 3-consumer
#     one-block kernel; candidate the 2-consumer O_STAGE with the host's deal, bf16's route since session 45) and
#     8k bf16 / fp16 (route: 3-consumer one block; candidate the 3-consumer O_STAGE scheduled, O_STAGE3).
#     Rule, written before this run: route a candidate for a (length, dtype) where the median of its nine per-round
#     ratios to the route is >= 1.02 and no round is below 1.00.
#     Prediction: fp16 4k median +2-3% with a round under 1.00 (not routed, 50 / 50); 8k +1-2% (not routed).
# (2) Causal efficiency, kernel-only (s46_cudnn_spread.py, five rounds): D = 64 and D = 256, 8k / 16k, causal and not,
#     bf16. Prediction: D = 64 forward causal / non-causal 0.87-0.90 at 8k, 0.88-0.91 at 16k; D = 256 0.85-0.90 at 8k.
export PYTHONPATH=$PWD/src
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv | tee $OUT/gpu.txt
git apply bench/wip/gluon-fwd-o-stage3.patch || exit 1
cd bench/gpu
sed -i 's/    for _ in range(3):                                          # three interleaved rounds/    for _ in range(int(os.environ.get("S43O_ROUNDS", "3"))):/' s43_o_stage3_ab.py
grep -q S43O_ROUNDS s43_o_stage3_ab.py || exit 2
S43O_ROUNDS=9 S43O_DTYPE=fp16 S43O_N=4096,8192 timeout 240 python s43_o_stage3_ab.py 2>&1 | tee $OUT/s46_ostage_fp16.txt
S43O_ROUNDS=9 S43O_DTYPE=bf16 S43O_N=8192 timeout 150 python s43_o_stage3_ab.py 2>&1 | tee $OUT/s46_ostage_bf16.txt
for d in 64 256; do for c in 0 1; do
  S46_ROUNDS=5 S46_D=$d S46_CAUSAL=$c S46_NS=8192,16384 timeout 120 python s46_cudnn_spread.py 2>&1 \
    | tee $OUT/s46_eff_d${d}_c$c.txt
done; done
