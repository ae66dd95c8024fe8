#!/usr/bin/env bash
# Session 38, third GPU call: bench/gpu/s38_probe2.py (D = 256 causal 512 variants; the fb anomaly's power
# history) with nvidia-smi sampling into $OUT/s38c_smi.csv.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1; out=${OUT:-/tmp}
nvidia-smi -q -d PERFORMANCE | grep -A3 "Reasons Counters" > $out/s38c_perf_before.txt
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,power.draw.instant,temperature.gpu,clocks_event_reasons.active \
  --format=csv,noheader -lms 20 > $out/s38c_smi.csv 2>&1 &
smi=$!
timeout 420 python bench/gpu/s38_probe2.py > $out/s38c_probe.txt 2>&1; echo "probe rc $?"
kill $smi; nvidia-smi -q -d PERFORMANCE | grep -A3 "Reasons Counters" > $out/s38c_perf_after.txt
grep -E "^D|^C|^\|" $out/s38c_probe.txt | grep -v "round" | cut -c1-300; cat $out/s38c_perf_after.txt; head -2 $out/s38c_smi.csv
