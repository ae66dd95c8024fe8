#!/usr/bin/env bash
# GPU call 3 (2026-11-29): backward tile sweep (spilling dK/dV tiles now allowed), forward
# sweep at short sequences, per-kernel breakdown, and the grid with the new tiles.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
mkdir -p $OUT/long $OUT/short
timeout 200 python -m flashtriton.bench.tune --kernels dkdv dq --head-dims 64 128 --seqlen 4096 --out $OUT/long 2>&1 | grep -v "^failed" | tail -14
timeout 150 python -m flashtriton.bench.tune --kernels fwd --head-dims 64 128 --seqlen 1024 --out $OUT/short 2>&1 | tail -8
python - <<'PY'
import json, os
o = os.environ["OUT"]
t = json.load(open("bench/gpu/tiles-r1.json"))
for f in ("long", "short"):
    p = f"{o}/{f}/tiles.json"
    if os.path.exists(p):
        for k, v in json.load(open(p)).items():
            t.setdefault(k, {}).update(v)
json.dump(t, open(f"{o}/tiles.json", "w"))
print("merged tiles:", t)
PY
export FLASHTRITON_TILES=$OUT/tiles.json
timeout 60 python -m flashtriton.bench.tune --breakdown --head-dims 64 128 --seqlen 8192
timeout 150 python -m flashtriton bench --suite prefill --out $OUT -- --head-dims 128 64 --no-flex --tag prefill-r3 2>&1 | tail -36
