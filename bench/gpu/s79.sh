#!/bin/bash
# Session 79: the whole GPU suite on a106ea3's code (owed since session 76), then the window-width sweep that
# decides a width-aware DENSE_AS_VARLEN["window"] entry, then the ragged prefill rows. Three calls under 600 s:
#   bash bench/gpu/s79.sh a    # tests/test_[a-f]*, 10 workers (H100: 526 s)
#   bash bench/gpu/s79.sh b [S] # tests/test_[g-z]* + gpu_alone (~190 s), then the D = 128 sweep in what is left
#   bash bench/gpu/s79.sh d [S] # the D = 128 sweep alone
#   bash bench/gpu/s79.sh c    # the D = 64 sweep, then the ragged prefill rows in what is left
# Every step runs under a deadline so that the call ends inside the 600 s limit; outputs: $OUT
source bench/gpu/call_common.sh
sweep() {  # $1: S76_CASES, $2: seconds
  [ $2 -gt 40 ] || return
  S76_CASES=$1 timeout $2 python bench/gpu/s76_dense_varlen_ab.py $out/s79_$1.json > $out/s79_$1.txt 2>&1
  echo "$1 rc $?"; [ -f $out/s79_$1.json ] || return  # cut before its first case
  python - $out/s79_$1.json <<'PY'
import json, sys
for r in json.load(open(sys.argv[1]))["rows"]:
    print(r["d"], r["n"], r["window"], {m: round(r.get(f"{m}_ratio", 0), 3) for m in ("fwd", "fwd_bwd")},
          {m: [round(x, 2) for x in r.get(f"{m}_ratio_rounds", [])] for m in ("fwd", "fwd_bwd")},
          [c[:4] for c in r["checks"].values()])
PY
  python bench/gpu/window_entry_rule.py $out/s79_$1.json | grep -E "^D|entry"  # session 76's rule read off the JSON
}
case "$1" in
  a) suite s79_tests1 560 tests/test_[a-f]*.py ;;
  b) G=${2:-575}  # the call's seconds
     suite s79_tests2 $(( G < 330 ? G - 60 : 270 )) tests/test_[g-z]*.py
     timeout -s INT $(left $G) python -m pytest tests -o addopts="" -q -rf -p no:warnings --timeout 70 \
       -m gpu_alone > $out/s79_gpu_alone.txt 2>&1
     echo "gpu_alone rc $?"; tail -1 $out/s79_gpu_alone.txt
     sweep sweep128 $(left $G) ;;
  d) sweep sweep128 $(left ${2:-575}) ;;  # the D = 128 sweep alone (what the device time left allows)
  c) sweep sweep64 $(left 330)
     ragged_prefill s79_prefill $(left 575) ;;
esac
date -u +%H:%M:%S
