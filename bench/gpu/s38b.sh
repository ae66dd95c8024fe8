#!/usr/bin/env bash
# Session 38, second GPU call: the timing probes (bench/gpu/s38_timing_probe.py) with nvidia-smi sampling the SM
# clock, power and clock-event reasons every 20 ms into $OUT/s38_smi.csv; part B again without NVML queries.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1; out=${OUT:-/tmp}
nvidia-smi -q -d PERFORMANCE > $out/s38_perf_before.txt
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active \
  --format=csv,noheader -lms 20 > $out/s38_smi.csv &
smi=$!
python -c 'import time; print("epoch now", time.time())'; date -u +%Y/%m/%d-%H:%M:%S.%N
timeout 400 python bench/gpu/s38_timing_probe.py > $out/s38_probe.txt 2>&1; echo "probe rc $?"
FLASHTRITON_GPU_SHARED=0 S38_PART=B timeout 120 python bench/gpu/s38_timing_probe.py > $out/s38_probe_nonvml.txt 2>&1
echo "probe nonvml rc $?"
kill $smi; nvidia-smi -q -d PERFORMANCE > $out/s38_perf_after.txt
grep -E "^A|bench_shape|do_bench" $out/s38_probe.txt | cut -c1-250; grep -E "bench_shape|do_bench" $out/s38_probe_nonvml.txt | cut -c1-250
