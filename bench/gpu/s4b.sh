#!/usr/bin/env bash
# (Record of the call: the LAZY_RESCALE experiment it timed (bench/gpu/s4_lazy.py) was removed after it; see bench/NOTES.md.)
# Session 4, GPU call 2: tests of the changed paths (dropout key tables, decode plan,
# lazy rescale, graph capture), the dropout feature rows, the lazy-rescale A/B, and the
# decode benchmark with the new split-regime defaults.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 150 python -m pytest tests -o addopts="" -q -rf --tb=short -p no:warnings -p no:benchmark -n 14 --timeout 120 \
  -k "not cpu and (dropout or varlen or kvcache or lazy or determinism)" > $OUT/pytest-s4b.txt 2>&1
echo "pytest rc=$?"; grep -E "FAILED|ERROR|Error" $OUT/pytest-s4b.txt | head -20; tail -2 $OUT/pytest-s4b.txt
timeout 80 python bench/gpu/s4_lazy.py 2>&1 | grep -v Warning
timeout 90 python -m flashtriton.bench.features --cases dropout --out $OUT/feat 2>&1 | grep -v Warning | grep -E "^\| (dropout|determ)|Error|error" | cut -c1-250
timeout 200 python -m flashtriton.bench.decode --out $OUT 2>&1 | grep -v Warning | grep -B2 -A60 "Contiguous cache" | head -120
