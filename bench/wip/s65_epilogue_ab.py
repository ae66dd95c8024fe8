# Session 65, not taken: needs bench/wip/cpu-prefill-finish-rows-early.diff applied (the FT_EPILOGUE_LATE build)
"""Rows finished inside the loop (session 65): the compiled CPU forward with each row tile finished (out = O / l,
lse) right after its tile of the last key chunk (default build) against every row finished after the loop (the
FT_EPILOGUE_LATE build, as before), on the bench's small-model shape (B = 4, H = 12, N = 512, D = 64) and its
prefill shape (B = 1, H = 8, N = 4096, D = 128), bf16 and float32, non-causal. ABBA rounds (abba.py); medians in
ms, the per-round ratio new / old, and whether the outputs are bitwise equal.

    PYTHONPATH=src python bench/cpu/s65_epilogue_ab.py [ROUNDS] [OUT.json]
"""
import sys

import torch
from abba import abba, median, save

import flashtriton
from flashtriton import flash_attn_func
from flashtriton.cpu import config, native_prefill

rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 9
config.FWD_PATH = "compiled"
config.FWD_AMX = "off"
libs = {"new": native_prefill.load(), "old": native_prefill.load_variant("FT_EPILOGUE_LATE")}
rows = []
for shape in ((4, 512, 12, 64), (1, 4096, 8, 128)):
    for dtype in (torch.float32, torch.bfloat16):
        torch.manual_seed(0)
        q, k, v = (torch.randn(*shape, dtype=dtype) for _ in range(3))
        out = {}

        def call(name):
            native_prefill._library.lib = libs[name]
            with flashtriton.use_backend("cpu"):
                out[name] = flash_attn_func(q, k, v)

        ts = abba({name: (lambda name=name: call(name)) for name in libs}, rounds)
        ratios = [a / b for a, b in zip(ts["new"], ts["old"])]
        rows.append(dict(shape=list(shape), dtype=str(dtype).replace("torch.", ""),
                         new_ms=round(median(ts["new"]) * 1e3, 2), old_ms=round(median(ts["old"]) * 1e3, 2),
                         ratio=round(median(ratios), 3), bitwise=bool(torch.equal(out["new"], out["old"]))))
        print(rows[-1], file=sys.stderr, flush=True)
native_prefill._library.lib = libs["new"]
print(f"| shape (B, N, H, D) | dtype | new ms | old ms | new / old (median of {rounds} rounds) | bitwise |")
print("|---|---|---|---|---|---|")
for r in rows:
    print(f"| {tuple(r['shape'])} | {r['dtype']} | {r['new_ms']} | {r['old_ms']} | {r['ratio']} | {r['bitwise']} |")
if len(sys.argv) > 2:
    save(sys.argv[2], rounds, rows)
