#!/usr/bin/env bash
# Prepared in session 4 for the next GPU session (not yet run): the A/B of host-made TMA
# descriptors (FLASHTRITON_HOST_DESCRIPTORS, bench/NOTES.md "Host-made TMA descriptors"),
# then the GPU tests of both paths. About 6 minutes.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 120 python -m pytest tests/test_prefill.py -o addopts="" -q -rf --tb=short -p no:warnings -p no:benchmark \
  -n 8 --timeout 100 -k "host_descriptors or gpu" 2>&1 | tail -3
for flag in 0 1; do
  echo "FLASHTRITON_HOST_DESCRIPTORS=$flag"
  FLASHTRITON_HOST_DESCRIPTORS=$flag timeout 200 python -m flashtriton bench --suite prefill --out $OUT/hd$flag -- \
    --head-dims 128 64 --no-flex --graph-upto 2048 --tag prefill-hostdesc$flag 2>&1 | grep -v Warning | grep -E "^\|" | head -40
done
FLASHTRITON_HOST_DESCRIPTORS=1 timeout 120 python -m flashtriton.bench.features --cases window dropout --out $OUT/feat-hd 2>&1 \
  | grep -E "^\| (window|dropout)" | cut -c1-200
