#!/usr/bin/env bash
# Session 39, call C: grid rows with the 3 s settle - fp16 D = 128 (both masks; its rows date from sessions 27-33),
# bf16 D = 64 causal (issue 4's open D = 64 causal forward cells), then bf16 D = 128 non-causal 512 / 1k again
# (call A's 512 row was the process's first shape and read forward+backward below backward). Logs under $OUT.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1; out=${OUT:-/tmp}
timeout 330 python -m flashtriton bench --suite prefill --out $out -- --head-dims 128 --causal both \
  --dtypes float16 --tag s39-d128-fp16 > $out/s39c_grid_d128_fp16.txt 2>&1; echo "grid d128 fp16 rc $?"
timeout 170 python -m flashtriton bench --suite prefill --out $out -- --head-dims 64 --causal yes \
  --dtypes bfloat16 --tag s39-d64c > $out/s39c_grid_d64c.txt 2>&1; echo "grid d64c rc $?"
timeout 70 python -m flashtriton bench --suite prefill --out $out -- --head-dims 128 --causal no \
  --dtypes bfloat16 --seqlens 512 1024 --tag s39-d128-short > $out/s39c_grid_d128_short.txt 2>&1; echo "short rc $?"
grep -E "^\| (512|1024|2048|4096|8192|16384) |^### " $out/s39c_grid_*.txt | cut -c1-200
rm -f $out/nvidia-h200/*.png $out/*.png $out/nvidia-h200/*.md; mv $out/nvidia-h200/* $out/ 2>/dev/null; ls -R $out | head -20
