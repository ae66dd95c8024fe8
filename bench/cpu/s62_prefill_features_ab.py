"""bf16 softcap and ALiBi prefill on the CPU backend (session 62): the compiled forward (cpu/native_prefill.py, which
takes them for bf16 since session 62) against the torch-ops loop they took before (config.FWD_PATH = "ops"), and the
plain compiled call, at the bench's prefill shape (B = 1, H = 8, N = 4096, D = 128), non-causal and causal.
Rounds run every variant in turn (order reversed every other round); medians in ms and TFLOP/s (the FlashAttention-2
count, causal halved). Prints a Markdown table; with an output path also writes JSON.

    PYTHONPATH=src python bench/cpu/s62_prefill_features_ab.py [ROUNDS] [OUT.json] [N]
"""
import sys

import torch
from abba import abba, median, save

import flashtriton
from flashtriton import flash_attn_func
from flashtriton.cpu import config, forward

rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
n = int(sys.argv[3]) if len(sys.argv) > 3 else 4096
torch.manual_seed(0)
q, k, v = (torch.randn(1, n, 8, 128, dtype=torch.bfloat16) for _ in range(3))
slopes = torch.rand(8) * 0.1
rows = []
for causal in (False, True):
    variants = {"plain": ("auto", {}), "softcap": ("auto", dict(softcap=30.0)),
                "softcap ops": ("ops", dict(softcap=30.0)), "alibi": ("auto", dict(alibi_slopes=slopes)),
                "alibi ops": ("ops", dict(alibi_slopes=slopes))}
    paths = {}

    def call(name):
        path, kw = variants[name]
        config.FWD_PATH = path
        with flashtriton.use_backend("cpu"):
            flash_attn_func(q, k, v, causal=causal, **kw)
        paths[name] = forward.LAST_PATH

    ts = abba({name: (lambda name=name: call(name)) for name in variants}, rounds)
    config.FWD_PATH = "auto"
    flops = 4 * n * n * 128 * 8 / (2 if causal else 1)
    for name, t in ts.items():
        ms = median(t) * 1e3
        rows.append(dict(causal=causal, variant=name, path=paths[name], ms=round(ms, 1),
                         tflops=round(flops / ms / 1e9, 3)))
    print(f"done causal={causal}", file=sys.stderr)
print(f"| causal | variant | path | ms (median of {rounds}) | TFLOP/s |\n|---|---|---|---|---|")
for r in rows:
    print(f"| {r['causal']} | {r['variant']} | {r['path']} | {r['ms']} | {r['tflops']} |")
if len(sys.argv) > 2:
    save(sys.argv[2], rounds, rows, shape=[1, n, 8, 128])
