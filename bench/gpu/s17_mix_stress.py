"""Prepared in session 16 for the next GPU session: the multi-process fault under the mix
that s16_persistent_stress.py ran (fresh inputs every group, and return_attn_probs=True,
which materialises (B, H, N, N) fp32 probabilities with big einsum GEMMs and 2-17 GB
allocations per call), where D = 256 causal 16k differed in 41 of 42 calls while fixed
inputs without the GEMMs (s16_stress2.py) never did. Here every call of every variant is
judged against cuDNN on the same inputs (bf16 rounding: max |diff| ~4e-3; a fault: NaN or
O(1)), so the faulty kernel is named, not just a disagreement. Run 3 at once:

    for i in 1 2 3; do python s17_mix_stress.py 90 & done; wait

Prints per case and variant: calls, faults (NaN / large), and the first faults' tiles."""
import os
import sys
import time

import torch

import flashtriton
from flashtriton.launchers import forward, plans

KINDS = set(forward.WS_PERSISTENT)
CASES = {"d256-causal-16k": (1, 16384, 8, 256, dict(causal=True)), "d128-nc-2k": (8, 2048, 16, 128, dict())}
VARIANTS = ("fwdpy", "ws1", "wsP")
PROBS = os.environ.get("S17_PROBS", "1") == "1"   # the GEMM-heavy return_attn_probs=True, as in s16
# S17_FIXED=1: the same inputs every call (the descriptors' contents then never change at a
# reused scratch address). Hypothesis H1 (bench/NOTES.md, session 16): the in-kernel TMA
# descriptors live in global scratch that the caching allocator hands out again at the
# same address with new contents (new tensors), and an SM's descriptor cache can serve the
# stale one (triton-lang/triton PR 4342 and 7293 discuss this hazard); H2: time-slice
# preemption alone. H1 predicts faults with fresh inputs and none with S17_FIXED=1.
FIXED = os.environ.get("S17_FIXED") == "1"


def cudnn(q, k, v, kw):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        return torch.nn.functional.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=kw.get("causal", False)).transpose(1, 2)


def ours(variant, q, k, v, kw):
    os.environ["FLASHTRITON_WARP_SPEC"] = "0" if variant == "fwdpy" else "auto"
    forward.WS_PERSISTENT = KINDS if variant == "wsP" else set()
    plans.clear()
    if PROBS:
        return flashtriton.flash_attn_func(q, k, v, return_attn_probs=True, **kw)[0]
    return flashtriton.flash_attn_func(q, k, v, **kw)


def main(seconds):
    for name, (b, n, h, d, kw) in CASES.items():
        stats = {var: [0, 0, []] for var in ("cudnn",) + VARIANTS}
        t_end = time.time() + seconds / len(CASES)
        fixed = [torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3)]
        while time.time() < t_end:
            with torch.no_grad():
                q, k, v = fixed if FIXED else (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16)
                                               for _ in range(3))
                ref = cudnn(q, k, v, kw).float()
                ref2 = cudnn(q, k, v, kw).float()
                stats["cudnn"][0] += 1
                stats["cudnn"][1] += not torch.equal(ref, ref2)
                for var in VARIANTS:
                    o = ours(var, q, k, v, kw).float()
                    diff = (o - ref).abs()
                    bad = o.isnan() | (diff > 0.05)
                    stats[var][0] += 1
                    if bad.any():
                        stats[var][1] += 1
                        if len(stats[var][2]) < 2:
                            rows = bad.any(-1)                                  # (B, N, H)
                            bi, ni, hi = rows.nonzero(as_tuple=True)
                            tiles = sorted(set(zip(bi.tolist(), hi.tolist(), (ni // 128).tolist())))
                            stats[var][2].append(f"{o.isnan().sum().item()} NaN, max finite diff "
                                                 f"{diff[~o.isnan()].max().item():.3g}, {len(tiles)} tiles "
                                                 f"{tiles[:4]}")
        for var, (calls, faults, detail) in stats.items():
            print(f"{name} {var}: {calls} calls, {faults} faulty" + "".join(f"\n   {x}" for x in detail), flush=True)


if __name__ == "__main__":
    main(float(sys.argv[1]) if sys.argv[1:] else 60.0)
