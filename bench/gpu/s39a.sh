#!/usr/bin/env bash
# Session 39, call A: the grid rows left open by session 38 - fp16 D = 256 causal at 8k / 16k (OWN_TILES routes
# only to 1k, so its 8k / 16k route is session 35's), then the bf16 D = 128 rows (causal and not) with the 3 s
# settle that session 38 added to the grid. Logs and results under $OUT.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1; out=${OUT:-/tmp}
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv,noheader
timeout 170 python -m flashtriton bench --suite prefill --out $out -- --head-dims 256 --causal yes \
  --dtypes float16 --seqlens 8192 16384 --tag s39-d256c-fp16 > $out/s39a_grid_d256.txt 2>&1; echo "grid d256 rc $?"
timeout 360 python -m flashtriton bench --suite prefill --out $out -- --head-dims 128 --causal both \
  --dtypes bfloat16 --tag s39-d128 > $out/s39a_grid_d128.txt 2>&1; echo "grid d128 rc $?"
grep -E "^\| (512|1024|2048|4096|8192|16384) |^### " $out/s39a_grid_d256.txt $out/s39a_grid_d128.txt | cut -c1-220
rm -f $out/nvidia-h200/*.png $out/*.png; ls -R $out | head -20
