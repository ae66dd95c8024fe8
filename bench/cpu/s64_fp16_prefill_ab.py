"""fp16 inputs in the CPU backend's compiled prefill forward (session 64: the float32 kernel on values widened where
they are read, out rounded to fp16; before, fp16 took the torch-ops loop): the compiled fp16 forward against the
torch-ops path (config.FWD_PATH = "ops", what fp16 ran before), the compiled float32 forward on the same values
widened, and torch SDPA in fp16; B = 1, H = 8, N = 4096, D = 128 (issue 6's prefill shape), non-causal and causal.
ABBA rounds (abba.py); medians in ms and GFLOP/s (4 N^2 D H, halved for causal), each fp16 output's largest error
against float64. Prints a Markdown table; with an output path also writes JSON.

    PYTHONPATH=src python bench/cpu/s64_fp16_prefill_ab.py [ROUNDS] [OUT.json]
"""
import sys

import torch
from abba import abba, median, save, sdpa_bnhd

import flashtriton
from flashtriton.cpu import config, forward

rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
B, H, N, D = 1, 8, 4096, 128
torch.manual_seed(0)
q16, k16, v16 = (torch.randn(B, N, H, D, dtype=torch.float16) for _ in range(3))
q32, k32, v32 = (t.float() for t in (q16, k16, v16))
rows = []
for causal in (False, True):
    ref = sdpa_bnhd(q16.double(), k16.double(), v16.double(), is_causal=causal)
    variants = {"fp16 compiled": ("compiled", q16, k16, v16), "fp16 ops": ("ops", q16, k16, v16),
                "fp32 compiled": ("compiled", q32, k32, v32), "fp16 SDPA": (None, q16, k16, v16)}
    paths, errs = {}, {}

    def call(name):
        path, q, k, v = variants[name]
        if path is None:
            out = sdpa_bnhd(q, k, v, is_causal=causal)
            paths[name] = "torch"
        else:
            config.FWD_PATH = path
            with flashtriton.use_backend("cpu"):
                out = flashtriton.flash_attn_func(q, k, v, causal=causal)
            paths[name] = forward.LAST_PATH
        if name not in errs:
            errs[name] = float((out.double() - ref).abs().max())

    ts = abba({name: (lambda name=name: call(name)) for name in variants}, rounds)
    config.FWD_PATH = "auto"
    flops = 4 * B * H * N * N * D / (2 if causal else 1)
    for name, t in ts.items():
        ms = median(t) * 1e3
        rows.append(dict(causal=causal, variant=name, path=paths[name], ms=round(ms, 1),
                         gflops=round(flops / ms / 1e6, 1), err=errs[name]))
    print(f"done causal={causal}", file=sys.stderr)
print(f"| mask | variant | path | ms (median of {rounds}) | GFLOP/s | max error vs float64 |\n|---|---|---|---|---|---|")
for r in rows:
    print(f"| {'causal' if r['causal'] else 'full'} | {r['variant']} | {r['path']} | {r['ms']} | {r['gflops']} | "
          f"{r['err']:.2e} |")
if len(sys.argv) > 2:
    save(sys.argv[2], rounds, rows, shape=[B, H, N, D])
