#!/bin/bash
# Session 44, call 1 (bench/wip/gluon-fwd-o-stage3.patch applied; it changes no route): the D = 64 causal 2k / 4k
# A/B of the routed 3-consumer one-block kernel against O_STAGE (2 and 3 consumers, host's deal), bf16 and fp16,
# three interleaved rounds each (session 43 measured only bf16). Rule written before: route the 2-consumer O_STAGE
# scheduled kernel at a length if it reads >= 2% over the route in its best AND in every round, both dtypes.
export PYTHONPATH=$PWD/src
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv | tee $OUT/gpu.txt
timeout 150 python -m pytest -q -o addopts="" -m gpu tests/test_fwd_gluon_o_stage3.py 2>&1 | tail -3 | tee $OUT/s44_tests.txt
cd bench/gpu
for dt in bf16 fp16; do
  S43O_DTYPE=$dt S43O_N=2048,4096 timeout 200 python s43_o_stage3_ab.py 2>&1 | tee $OUT/s44_ostage_$dt.txt
done
