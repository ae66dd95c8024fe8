#!/bin/bash
# Session 48, call 8: the fp16 D = 128 causal 512 / 1k cells again, five rounds, on whatever machine this is (calls 2-6
# saw host stalls swing ours' and Flex's rounds there). Written before the run: this run's rows replace call 3's in
# prefill-fp16.json whatever they read.
export PYTHONPATH=$PWD/src
mkdir -p $OUT/r5b
timeout 280 python -m flashtriton.bench.prefill --head-dims 128 --dtypes float16 --causal yes --seqlens 512 1024 \
  --rounds 5 --out $OUT/r5b --tag fp16-d128c-r5b 2>&1 | grep -v Warn | tail -14 | tee $OUT/fp16-d128c-b.txt
python - <<'PY'
import json, os
d = json.load(open(os.environ["OUT"] + "/r5b/nvidia-h200/fp16-d128c-r5b.json"))
for r in d["rows"]:
    print(r["seqlen"], r["provider"][:12], [[round(x, 3) for x in r.get(m + "_ms_rounds", [])] for m in ("fwd", "bwd", "fwd_bwd")])
PY
