#!/usr/bin/env bash
# Session 17, call 1: whole GPU suite on main + both bench/wip patches, then the 3-process
# bitwise stress of the persistent bwd_ws.py (s17a.sh's second half).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python -c "import torch,triton;print(torch.__version__,triton.__version__)"
timeout 280 python -m pytest tests -o addopts="" -q -rf --tb=short -p no:warnings -p no:benchmark \
  -n 10 --timeout 150 -k "not cpu" > $OUT/pytest.txt 2>&1
echo "pytest rc=$?"; grep -E "^FAILED|^ERROR" $OUT/pytest.txt | head -30; tail -1 $OUT/pytest.txt
for i in 1 2 3; do timeout 200 python bench/gpu/s17_bwd_persistent_ab.py stress 10 > $OUT/stress-$i.txt 2>&1 & done; wait
cat $OUT/stress-*.txt | grep -v Warn
