"""Session 57: the compiled decode launch's run() with the kernel's constants packed (ft_decode_packed, the working
tree) against an old revision's run() (ft_decode_lens with every argument, 45; the old cpu/decode.py loaded from git
under another name, on the working tree's library, which keeps ft_decode_lens): each launch built once (as a step
holds it), every call right after an SDPA call on the same inputs, rounds alternating the order; bf16, B = 1,
Hq = 32, Hk = 8, D = 128. Prints medians and the median per-round ratio new / old; checks outputs bitwise.

    PYTHONPATH=src python bench/cpu/s57_packed_launch_ab.py ROUNDS [L ...] [--old-rev REV]
"""
import math
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from s45_decode_memo_ab import old_module  # noqa: E402
from flashtriton.cpu import decode  # noqa: E402
from flashtriton.launchers.prefill import AttnParams  # noqa: E402


def case(L, rounds, old_dec):
    torch.manual_seed(0)
    q = torch.randn(1, 1, 32, 128, dtype=torch.bfloat16)
    kc = torch.randn(1, L, 8, 128, dtype=torch.bfloat16)
    vc = torch.randn_like(kc)
    lens = torch.full((1,), L, dtype=torch.int32)
    params = AttnParams(1 / math.sqrt(128))
    out0 = torch.empty_like(q)
    launches = {"old": old_dec.compiled_launch(q, kc, vc, params, None, out0),
                "new": decode.compiled_launch(q, kc, vc, params, None, out0)}

    def call(n):
        out = torch.empty_like(q)
        launches[n].run(q, kc, vc, lens, None, None, None, None, None, 0, out, None)
        return out
    ref = call("old")
    assert torch.equal(call("new"), ref)
    sdpa = lambda: F.scaled_dot_product_attention(q.transpose(1, 2), kc.transpose(1, 2), vc.transpose(1, 2),  # noqa
                                                  enable_gqa=True)
    t = {"old": [], "new": []}
    for r in range(rounds):
        for n in (("old", "new") if r % 2 else ("new", "old")):
            sdpa()
            t0 = time.perf_counter()
            call(n)
            t[n].append((time.perf_counter() - t0) * 1e6)
    ratio = statistics.median(b / a for a, b in zip(t["old"], t["new"]))
    print(f"L={L}: old med {statistics.median(t['old']):.0f} us, new med {statistics.median(t['new']):.0f} us, "
          f"per-round new / old {ratio:.3f} ({rounds} rounds)", flush=True)


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    rev = sys.argv[sys.argv.index("--old-rev") + 1] if "--old-rev" in sys.argv else "HEAD"
    if "--old-rev" in sys.argv:
        args.remove(rev)
    old = old_module("cpu/decode.py", "flashtriton.cpu._decode_old_launch", rev)
    for L in (args[1:] or ["512", "8192"]):
        case(int(L), int(args[0]), old)
