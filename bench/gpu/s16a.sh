#!/usr/bin/env bash
# Session 16, first call: the whole GPU suite on main 0ecf20a (session 15's window rule,
# decode memo and review commits had CI only), the persistent forward's bitwise stress
# (3 processes sharing the GPU), dropout's forward+backward ratio with the persistent
# dropout forward (issue 3), and the eager decode probe after the structure memo (issue 5).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 250 python -m pytest tests -o addopts="" -q -rf --tb=short -p no:warnings -p no:benchmark \
  -n 10 --timeout 150 -k "not cpu" > $OUT/pytest-gpu.txt 2>&1
echo "pytest rc=$?"; grep -E "^FAILED|^ERROR" $OUT/pytest-gpu.txt | head -20; tail -1 $OUT/pytest-gpu.txt
for i in 1 2 3; do timeout 130 python bench/gpu/s16_persistent_stress.py 10 > $OUT/stress-$i.txt 2>&1 & done; wait
cat $OUT/stress-*.txt | grep -v Warn
timeout 100 python -m flashtriton.bench.features --cases dropout --out $OUT/features 2>&1 | grep -v Warn | tail -12
timeout 100 python bench/gpu/s14_decode_eager.py 2>&1 | grep -v Warn | tee $OUT/decode-eager.txt
