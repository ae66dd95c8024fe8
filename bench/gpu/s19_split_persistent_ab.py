"""Prepared in session 18 for session 19 (not run yet): the masked backward's split path
(bwd_ws.py for the fully visible tiles, bwd.py's RESUME for the edges) with the dK/dV and
dQ launches persistent beyond launchers.backward.WS_PERSISTENT_MAX_N (4k at D = 128).

Cases, D = 128, bf16, H = 16, 16k tokens:
- window (1024, 0) at N = 16k (features.md's case; the default takes bwd.py alone, 0.61x
  causal's TFLOP/s; the split one tile a program measured 1.65 against 1.28 ms in
  session 14). A 1024-key band is ~16 query tiles a key block: a short loop, so a
  program's prologue (k / v loads, descriptors) and epilogue (dk / dv stores) weigh
  more, which persistence overlaps with the next tile's loads.
- causal at N = 8k / 16k (the default is the split path, one tile a program: 352 / 404
  TFLOP/s backward in session 18, 0.72 / 0.76x cuDNN).

Variants, each twice in alternating order, backward alone (torch.autograd.grad of one
fixed forward with a fixed dout, time_ms median, L2 flushed): "default"; "split" (forced:
FLASHTRITON_WARP_SPEC=1; for causal the same as default); "split-persistent" (forced,
WS_PERSISTENT_MAX_N raised to 16k for the masked kinds, and WS_VEC_PTR_PERSISTENT so that
the dK/dV launch with pointer loads may be persistent too). Gradients compared with the
default's (max |diff|), NaN counted.

Prediction: window: split-persistent ~1.3-1.4 ms, still not below bwd.py's 1.28 (the
resumed edges are a quarter of the work on top); causal 8k / 16k persistent +3-8% (the
bulk launch's tail shorter). Session 17 saw persistent D = 128 16k NaN under GPU sharing
(100 of 100 calls, 3 processes) and bitwise right alone: run this alone, then stress any
winner with bench/gpu/s18_long_stress.py before taking it.

    PYTHONPATH=src python bench/gpu/s19_split_persistent_ab.py
"""
import os

import torch

import flashtriton
from flashtriton.bench.common import attention_flops, time_ms
from flashtriton.launchers import backward, plans

BASE_MAX_N = dict(backward.WS_PERSISTENT_MAX_N)


def variant(name):
    def apply():
        backward.WS_PERSISTENT_MAX_N = dict(BASE_MAX_N)
        os.environ.pop("FLASHTRITON_WARP_SPEC", None)
        if name != "default":
            os.environ["FLASHTRITON_WARP_SPEC"] = "1"
        backward.WS_VEC_PTR_PERSISTENT = name == "split-persistent"
        if name == "split-persistent":
            # beyond 4k the dK/dV loop reads lse / delta by pointers (VEC_PTR), which keeps
            # its launch one tile a program unless WS_VEC_PTR_PERSISTENT: a combination no
            # GPU has run before this script (NaN counted below; stress before taking it)
            for kind in list(backward.WS_PERSISTENT_MAX_N):
                if kind[2]:                              # masked kinds
                    backward.WS_PERSISTENT_MAX_N[kind] = 16384
        plans.clear()
    return apply


def case(n, causal, window):
    b, h, d = 16384 // n, 16, 128
    gen = torch.Generator(device="cuda").manual_seed(n)
    q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16, generator=gen).requires_grad_()
               for _ in range(3))
    dout = torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16, generator=gen)
    kw = dict(window_size=window) if window else dict(causal=causal)
    label = f"N={n} " + (f"window{window}" if window else ("causal" if causal else "plain"))
    names = ["default", "split", "split-persistent"] if window else ["default", "split-persistent"]
    res, ref, err = {nm: [] for nm in names}, None, {}
    for rep in range(2):
        for nm in (names if rep == 0 else names[::-1]):
            variant(nm)()
            out = flashtriton.flash_attn_func(q, k, v, **kw)

            def grad():
                return torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)
            g = grad()
            if nm == "default" and ref is None:
                ref = [t.clone() for t in g]           # "default" runs first in rep 0
            err[nm] = (max((a.float() - r.float()).abs().max().item() for a, r in zip(g, ref)),
                       sum(int(t.isnan().any()) for t in g))
            res[nm].append(time_ms(grad, "cuda"))
    flops = attention_flops(b, h, n, n, d, causal, "bwd") if not window else None
    for nm, ms in res.items():
        tf = f"  {flops / min(ms) / 1e9:.0f} TFLOP/s" if flops else ""
        print(f"{label:24s} {nm:18s} {' / '.join(f'{x:.3f}' for x in ms)} ms{tf}  (max|diff| vs default, "
              f"NaN outputs) {err.get(nm)}", flush=True)
    variant("default")()


if __name__ == "__main__":
    case(16384, True, (1024, 0))
    for n in (8192, 16384):
        case(n, True, None)
