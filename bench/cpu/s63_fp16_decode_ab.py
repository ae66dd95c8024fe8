"""fp16 KV caches in the CPU backend's decode (session 63): the compiled kernel (cpu/native.py, which takes fp16 since
session 63: K / V widened to float32 by vcvtph2ps, exact products, float32 sums) against the torch-ops path fp16 took
before (config.DECODE_PATH = "ops"), the compiled bf16 call on a cache of the same size, and torch SDPA (fp16,
enable_gqa). B = 1, Hq = 32, Hk = 8, D = 128, L = 8k / 32k. Rounds run every variant in turn (order reversed every
other round), each call after a 256 MiB read (cold caches, as the bench's decode rows); medians in us and the cache's
GB/s, and each fp16 output's largest error against float64. Prints a Markdown table; with an output path also
writes JSON.

    PYTHONPATH=src python bench/cpu/s63_fp16_decode_ab.py [ROUNDS] [OUT.json]
"""
import sys

import torch
from abba import abba, median, save, sdpa_bnhd

import flashtriton
from flashtriton import flash_attn_with_kvcache
from flashtriton.cpu import config, decode

rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 9
flush = torch.rand(64 * 2 ** 20)
rows = []
for n in (8192, 32768):
    torch.manual_seed(0)
    data = {}
    for dtype in (torch.float16, torch.bfloat16):
        q = torch.randn(1, 1, 32, 128, dtype=dtype)
        kc = torch.randn(1, n, 8, 128, dtype=dtype)
        data[dtype] = (q, kc, torch.randn_like(kc))
    lens = torch.full((1,), n, dtype=torch.int32)
    q16, k16, v16 = data[torch.float16]
    ref = sdpa_bnhd(q16.double(), k16.double(), v16.double(), enable_gqa=True)
    variants = {"fp16 compiled": ("compiled", torch.float16), "fp16 ops": ("ops", torch.float16),
                "bf16 compiled": ("compiled", torch.bfloat16), "fp16 SDPA": (None, torch.float16)}
    paths, errs = {}, {}

    def call(name):
        path, dtype = variants[name]
        q, kc, vc = data[dtype]
        if path is None:
            out = sdpa_bnhd(q, kc, vc, enable_gqa=True)
            paths[name] = "torch"
        else:
            config.DECODE_PATH = path
            with flashtriton.use_backend("cpu"):
                out = flash_attn_with_kvcache(q, kc, vc, cache_seqlens=lens)
            paths[name] = decode.LAST_PATH
        if dtype == torch.float16:
            errs[name] = float((out.double() - ref).abs().max())

    ts = abba({name: (lambda name=name: call(name)) for name in variants}, rounds, before=flush.sum)
    config.DECODE_PATH = "compiled"
    nbytes = 2 * k16.numel() * 2
    for name, t in ts.items():
        us = median(t) * 1e6
        rows.append(dict(L=n, variant=name, path=paths[name], us=round(us), gbs=round(nbytes / us / 1e3, 1),
                         err=errs.get(name)))
    print(f"done {n}", file=sys.stderr)
print(f"| L | variant | path | us (median of {rounds}) | GB/s | max error vs float64 |\n|---|---|---|---|---|---|")
for r in rows:
    err = "" if r["err"] is None else f"{r['err']:.2e}"
    print(f"| {r['L'] // 1024}k | {r['variant']} | {r['path']} | {r['us']} | {r['gbs']} | {err} |")
if len(sys.argv) > 2:
    save(sys.argv[2], rounds, rows)
