# Sourced by the session call scripts (s77b.sh, s79.sh): the environment, the call's clock, the versions and card
# printed, `suite LOG SECONDS FILES...` (the GPU tests in 10 workers under a deadline, gpu_alone left out) and
# `ragged_prefill LOG SECONDS`.
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src:$PWD/tests
out=${OUT:-/tmp}
start=$(date +%s)
left() { echo $(( $1 - ($(date +%s) - start) )); }  # seconds left of a $1-second call
date -u +%H:%M:%S
python -c "import torch, triton; print(torch.__version__, triton.__version__)"
nvidia-smi --query-gpu=name --format=csv,noheader | tee $out/gpu.txt
suite() {  # $1: log name, $2: seconds, rest: test files
  local log=$out/$1.txt t=$2; shift 2
  timeout -s INT $t python -m pytest "$@" -o addopts="" -q -rf -p no:warnings -n 10 --timeout 200 \
    -k "not cpu" -m "not gpu_alone" > $log 2>&1
  echo "rc $?"; tail -1 $log; grep -E "^(FAILED|ERROR)" $log | head -20 | cut -c1-300
}
ragged_prefill() {  # $1: log name, $2: seconds; 1000 / 2100 / 4000, D = 64 / 128, every provider
  local t=$2; echo "prefill: $t s"
  [ $t -gt 60 ] && timeout $t python -m flashtriton.bench.prefill --seqlens 1000 2100 4000 --head-dims 64 128 \
    --rounds 3 --out $out --tag prefill-ragged > $out/$1.txt 2>&1
  tail -n 25 $out/$1.txt | cut -c1-300
}
