#!/usr/bin/env bash
# Session 40, call C: EARLY_LSE A/B (bench/gpu/s40_early_lse_ab.py: prediction, rule). Settings in alternating
# processes 1, 0, 1 (device time was short) (own Triton caches: the setting is a module-level constexpr read at import), then the
# saved 2k gradients compared bitwise.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
R=$OUT/s40c; mkdir -p $R /tmp/g
t=(170 170 90); i=0
for v in 1 0 1; do
  extra=""; [ -z "${seen:-}" ] && extra=cudnn; seen=1
  FLASHTRITON_S40_EARLY_LSE=$v TRITON_CACHE_DIR=/tmp/tc$v timeout ${t[$i]} python bench/gpu/s40_early_lse_ab.py \
    /tmp/g/v$v $extra 2>&1 | grep -v Warn | tee -a $R/ab.txt; i=$((i + 1))
done
python - <<'PY' 2>&1 | tee -a $R/ab.txt
import torch
for n, c in ((2048, 0), (2048, 1)):
    a, b = torch.load(f"/tmp/g/v1_{n}_{c}.pt"), torch.load(f"/tmp/g/v0_{n}_{c}.pt")
    print(f"bitwise N={n} causal={c}: dq {torch.equal(a[0], b[0])} dk {torch.equal(a[1], b[1])} dv {torch.equal(a[2], b[2])}")
PY
