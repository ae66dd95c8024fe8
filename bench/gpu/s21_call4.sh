#!/usr/bin/env bash
# Session 21, call 4 (~5 min): the causal dropout backward on the split path
# (s21_split_dropout_ab.py: A/B and a NaN stress), the features bench's dropout rows with
# policy.BWD_SPLIT_DROPOUT on, and the dropout tests on the GPU.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-compute-apps=pid,name --format=csv
timeout 100 python -m pytest tests/test_dropout.py -o addopts="" -q -rf -p no:warnings -n 8 --timeout 90 2>&1 | tail -3
(cd bench/gpu && timeout 300 python s21_split_dropout_ab.py 2>&1 | grep -v Warn | tee $OUT/split-dropout-ab.txt)
timeout 150 python -c "
from flashtriton.launchers import policy
policy.BWD_SPLIT_DROPOUT = True
from flashtriton.bench import features
features.main(['--cases', 'dropout', '--out', '$OUT/features-split'])
" 2>&1 | grep -v Warn | grep "dropout\|determ"
