#!/usr/bin/env bash
# Session 5, GPU call 3: backward descriptor A/B, window forward A/B, decode B = 1 timed
# with both L2 flushes.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 240 python bench/gpu/s5_bwd_ab.py 2>&1 | grep -v Warn
timeout 200 python - <<'PY' 2>&1 | grep -v Warn
from flashtriton.bench import decode as D
for l in (8192, 131072):
    for r in D.bench_grid(1, l, "cuda", True):
        print("grid B=1", l, r["provider"], "eager", round(r.get("us", -1), 1), "graph(read flush)",
              round(r.get("graph_us", -1), 1), "graph(zero flush)", round(r.get("graph_zero_flush_us", -1), 1),
              r.get("error", ""), flush=True)
for r in D.bench_append(1, 8192, "cuda", True):
    print("append", r.get("variant"), "graph(read)", round(r.get("graph_us", -1), 1), "graph(zero)",
          round(r.get("graph_zero_flush_us", -1), 1), flush=True)
PY
