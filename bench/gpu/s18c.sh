#!/usr/bin/env bash
# Prepared in session 17: grid rows the session could not measure after its policy change
# (D = 128 backward beyond max(N) = 4k on bwd.py: policy.BWD_WS_MAX_N), the features
# table's dropout row with the persistent dropout backward, and the GPU suite. ~8 minutes.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 200 python -m flashtriton bench --suite prefill --out $OUT -- --head-dims 128 --no-flex \
  --seqlens 8192 16384 --tag s18-d128-long 2>&1 | grep -v Warn | grep "^|\|^###"
timeout 90 python -m flashtriton.bench.features --cases dropout --out $OUT/features 2>&1 | grep -v Warn | tail -9
timeout 260 python -m pytest tests -o addopts="" -q -rf --tb=short -p no:warnings -p no:benchmark \
  -n 10 --timeout 150 -k "not cpu" > $OUT/pytest.txt 2>&1
echo "pytest rc=$?"; grep -E "^FAILED|^ERROR" $OUT/pytest.txt | head -20; tail -1 $OUT/pytest.txt
