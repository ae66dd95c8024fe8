#!/usr/bin/env bash
# Session 5, GPU call 2: the append split's ragged tile, host time, the B = 1 128k ceiling.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 200 python -m pytest tests/test_prefill.py tests/test_kvcache.py -o addopts="" -q -rf --tb=short \
  -p no:warnings -n 8 --timeout 150 -k "host_desc or gpu or ragged" 2>&1 | tail -4
timeout 100 python - <<'PY' 2>&1 | grep -v Warn
from flashtriton.bench import decode as D
for b, l in ((1, 8192), (1, 131072), (32, 32768)):
    for r in D.bench_append(b, l, "cuda", True):
        print("append", b, l, r.get("variant"), "graph", round(r.get("graph_us", -1), 1), "eager",
              round(r.get("us", -1), 1), r.get("error", ""), flush=True)
PY
timeout 120 python bench/gpu/s5_host.py 2>&1 | grep -v Warn | head -90
timeout 200 python bench/gpu/s5_stream.py 2>&1 | grep -v Warn
