#!/usr/bin/env bash
# Session 17, call 5: whole GPU suite on the final tree; the multi-process NaN with the
# warp-specialized kernels off and on; rows to re-check; the (B, H, N, D)-layout forward.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 260 python -m pytest tests -o addopts="" -q -rf --tb=short -p no:warnings -p no:benchmark \
  -n 10 --timeout 150 -k "not cpu" > $OUT/pytest.txt 2>&1
echo "pytest rc=$?"; grep -E "^FAILED|^ERROR" $OUT/pytest.txt | head -20; tail -1 $OUT/pytest.txt
for mode in 0 auto; do
  for i in 1 2 3; do FLASHTRITON_WARP_SPEC=$mode timeout 80 python bench/gpu/s17_ws_off_stress.py 35 > $OUT/wsoff-$mode-$i.txt 2>&1 & done; wait
  cat $OUT/wsoff-$mode-*.txt | grep -v Warn
done
timeout 100 python -m flashtriton bench --suite prefill --out $OUT -- --head-dims 128 --causal no --no-flex \
  --seqlens 512 1024 --tag s17-recheck 2>&1 | grep -v Warn | grep "^| 512\|^| 1024"
timeout 110 python -m flashtriton bench --suite prefill --out $OUT -- --head-dims 128 --no-flex --layout bhnd \
  --seqlens 1024 4096 16384 --tag s17-bhnd 2>&1 | grep -v Warn | grep "^|\|^###"
