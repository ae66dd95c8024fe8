"""Every multiple of 8 as a head dim in the CPU backend's compiled decode (session 64; before, head dims outside
{32, 64, 96, 128, 192, 256} took the torch-ops paths): for each cache dtype (bf16, fp16, float32), D = 80 (its own
specialised copy) and D = 40 (the run-time-D copy) compiled against the same on the torch-ops path
(config.DECODE_PATH = "ops", what they ran before) and the compiled D = 64 / 96 neighbours on caches of their own
size; B = 1, Hq = 32, Hk = 8, L = 8k. ABBA rounds (abba.py), each call after a 256 MiB read (cold caches,
as the bench's decode rows); medians in us, the cache's GB/s and each output's largest error against float64.
Prints a Markdown table; with an output path also writes JSON.

    PYTHONPATH=src python bench/cpu/s64_head_dims_decode_ab.py [ROUNDS] [OUT.json]
"""
import sys

import torch
from abba import abba, median, save, sdpa_bnhd

import flashtriton
from flashtriton import flash_attn_with_kvcache
from flashtriton.cpu import config, decode

rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 9
flush = torch.rand(64 * 2 ** 20)
n = 8192
lens = torch.full((1,), n, dtype=torch.int32)
rows = []
for dtype in (torch.bfloat16, torch.float16, torch.float32):
    torch.manual_seed(0)
    data = {}
    for d in (40, 64, 80, 96):
        kc = torch.randn(1, n, 8, d, dtype=dtype)
        data[d] = (torch.randn(1, 1, 32, d, dtype=dtype), kc, torch.randn_like(kc))
    variants = {"D=80 compiled": ("compiled", 80), "D=80 ops": ("ops", 80), "D=40 compiled": ("compiled", 40),
                "D=40 ops": ("ops", 40), "D=64 compiled": ("compiled", 64), "D=96 compiled": ("compiled", 96)}
    paths, errs = {}, {}

    def call(name):
        path, d = variants[name]
        q, kc, vc = data[d]
        config.DECODE_PATH = path
        with flashtriton.use_backend("cpu"):
            out = flash_attn_with_kvcache(q, kc, vc, cache_seqlens=lens)
        paths[name] = decode.LAST_PATH
        if name not in errs:
            ref = sdpa_bnhd(q.double(), kc.double(), vc.double(), enable_gqa=True)
            errs[name] = float((out.double() - ref).abs().max())

    ts = abba({name: (lambda name=name: call(name)) for name in variants}, rounds, before=flush.sum)
    config.DECODE_PATH = "compiled"
    for name, t in ts.items():
        us = median(t) * 1e6
        nbytes = 2 * data[variants[name][1]][1].numel() * data[variants[name][1]][1].element_size()
        rows.append(dict(dtype=str(dtype).split(".")[1], variant=name, path=paths[name], us=round(us),
                         gbs=round(nbytes / us / 1e3, 1), err=errs[name]))
    print(f"done {dtype}", file=sys.stderr)
print(f"| dtype | variant | path | us (median of {rounds}) | GB/s | max error vs float64 |\n|---|---|---|---|---|---|")
for r in rows:
    print(f"| {r['dtype']} | {r['variant']} | {r['path']} | {r['us']} | {r['gbs']} | {r['err']:.2e} |")
if len(sys.argv) > 2:
    save(sys.argv[2], rounds, rows, L=n)
