#!/usr/bin/env bash
# Session 38, the last GPU call (device time short after failed starts): OWN_TILES / PEEL_PLAIN GPU tests and
# A/B at 512 / 1k, then grid rows with the session's routing (OWN_TILES at D = 256 causal up to 1k) and the
# grid's new 3 s settle: D = 256 causal bf16 and fp16, D = 64 non-causal bf16. Logs and results under $OUT.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1; out=${OUT:-/tmp}
timeout 100 python -m pytest -q -o addopts="" -p no:warnings -m gpu tests/test_fwd_gluon_own_tiles.py > $out/s38f_tests.txt 2>&1
echo "tests rc $?"; tail -3 $out/s38f_tests.txt
S38_NS=512,1024 timeout 100 python bench/gpu/s38_own_tiles_ab.py > $out/s38f_ab.txt 2>&1; echo "ab rc $?"
grep -E "^\||WRONG|DIFFER|Error|own1p" $out/s38f_ab.txt | cut -c1-420
timeout 200 python -m flashtriton bench --suite prefill --out $out -- --head-dims 256 --causal yes \
  --dtypes bfloat16 float16 --tag s38-d256c > $out/s38f_grid_d256c.txt 2>&1; echo "grid d256 rc $?"
timeout 130 python -m flashtriton bench --suite prefill --out $out -- --head-dims 64 --causal no \
  --tag s38-d64 > $out/s38f_grid_d64.txt 2>&1; echo "grid d64 rc $?"
grep -E "^\| (512|1024|2048|4096|8192|16384) " $out/s38f_grid_d256c.txt $out/s38f_grid_d64.txt | cut -c1-200
rm -f $out/nvidia-h200/*.png; ls -R $out | head -20
