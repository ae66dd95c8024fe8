"""ALiBi and softcap decode on the CPU backend (session 62): the compiled kernel (cpu/native.py, which takes them
since session 62) against the torch-ops path they took before (config.DECODE_PATH = "ops"), and the plain compiled
call, B = 1, Hq = 32, Hk = 8, D = 128, bf16 / fp32, L = 8k / 32k. Rounds run every variant in turn (order reversed
every other round), each call after a 256 MiB read (cold caches, as the bench's decode rows); medians in us and the
cache's GB/s. Prints a Markdown table; with an output path also writes JSON.

    PYTHONPATH=src python bench/cpu/s62_decode_features_ab.py [ROUNDS] [OUT.json]
"""
import sys

import torch
from abba import abba, median, save

import flashtriton
from flashtriton import flash_attn_with_kvcache
from flashtriton.cpu import config, decode

rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 9
flush = torch.rand(64 * 2 ** 20)
rows = []
for dtype in (torch.bfloat16, torch.float32):
    for n in (8192, 32768):
        torch.manual_seed(0)
        q = torch.randn(1, 1, 32, 128, dtype=dtype)
        kc = torch.randn(1, n, 8, 128, dtype=dtype)
        vc = torch.randn_like(kc)
        lens = torch.full((1,), n, dtype=torch.int32)
        slopes = torch.rand(32) * 0.1
        variants = {"plain": ("compiled", {}), "alibi": ("compiled", dict(alibi_slopes=slopes)),
                    "alibi ops": ("ops", dict(alibi_slopes=slopes)), "softcap": ("compiled", dict(softcap=30.0)),
                    "softcap ops": ("ops", dict(softcap=30.0))}
        paths = {}

        def call(name):
            path, kw = variants[name]
            config.DECODE_PATH = path
            with flashtriton.use_backend("cpu"):
                flash_attn_with_kvcache(q, kc, vc, cache_seqlens=lens, **kw)
            paths[name] = decode.LAST_PATH

        ts = abba({name: (lambda name=name: call(name)) for name in variants}, rounds, before=flush.sum)
        config.DECODE_PATH = "compiled"
        nbytes = 2 * kc.numel() * kc.element_size()
        for name, t in ts.items():
            us = median(t) * 1e6
            rows.append(dict(dtype=str(dtype)[6:], L=n, variant=name, path=paths[name], us=round(us),
                             gbs=round(nbytes / us / 1e3, 1)))
        print(f"done {dtype} {n}", file=sys.stderr)
print(f"| dtype | L | variant | path | us (median of {rounds}) | GB/s |\n|---|---|---|---|---|---|")
for r in rows:
    print(f"| {r['dtype']} | {r['L'] // 1024}k | {r['variant']} | {r['path']} | {r['us']} | {r['gbs']} |")
if len(sys.argv) > 2:
    save(sys.argv[2], rounds, rows)
