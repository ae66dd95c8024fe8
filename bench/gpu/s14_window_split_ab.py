"""Session 14: the sliding-window backward on the split path (bwd_ws.py for the fully
visible tiles, bwd.py's RESUME for the band's two masked edges) against bwd.py alone (the
default: warp_spec_mode takes the split only without a left window).

Window (1024, 0), N = 16k, H = 16, D = 128 (features.md's case): backward 1.278 ms
(session 13), Flex 1.246, 0.61x causal's TFLOP/s. The split path measured 1.67 ms against
1.38 in session 6, before the warp-specialized kernels' session 7-11 changes.
Prediction: still slower: a 1024-key band at 128-key tiles has 8 tiles a row block, of
which ~2 are masked edges, so the resumed launch does a quarter of the work on top of
two extra launches and the partial-gradient round trip; ~1.3-1.5 ms.

Backward ms as CUDA-graph replays (forward+backward minus forward), each variant twice in
alternating order; gradients against the default's.
"""
import os

import torch
import triton

import flashtriton
from flashtriton.bench.common import capture_graph


def main():
    n, h, d, left = 16384, 16, 128, 1024
    q, k, v = (torch.randn(1, n, h, d, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    dout = torch.randn_like(q)

    def both():
        out = flashtriton.flash_attn_func(q, k, v, window_size=(left, 0))
        return torch.autograd.grad(out, (q, k, v), dout)

    def fwd():
        with torch.no_grad():
            return flashtriton.flash_attn_func(q, k, v, window_size=(left, 0))

    variants = [("default (bwd.py)", None), ("split (FLASHTRITON_WARP_SPEC=1)", "1")]
    ref, res = None, {lab: [] for lab, _ in variants}
    for rep in range(2):
        for lab, flag in (variants if rep == 0 else variants[::-1]):
            if flag is None:
                os.environ.pop("FLASHTRITON_WARP_SPEC", None)
            else:
                os.environ["FLASHTRITON_WARP_SPEC"] = flag
            try:
                g = [t.clone() for t in both()]
                if ref is None and flag is None:
                    ref = g
                (g_both, _), (g_fwd, _) = capture_graph(both), capture_graph(fwd)
                ms = (triton.testing.do_bench(g_both.replay, warmup=30, rep=200)
                      - triton.testing.do_bench(g_fwd.replay, warmup=30, rep=200))
                res[lab].append((ms, g))
            except Exception as exc:  # noqa: BLE001
                print(f"{lab}: {type(exc).__name__}: {str(exc)[:160]}", flush=True)
            finally:
                os.environ.pop("FLASHTRITON_WARP_SPEC", None)
    for lab, r in res.items():
        if r and ref is not None:
            err = max((a.float() - b.float()).abs().max().item() for _, g in r for a, b in zip(g, ref))
            print(f"window(1024,0) 16k bwd {lab:34s} " + " / ".join(f"{ms:.3f}" for ms, _ in r)
                  + f" ms  max|dgrad diff| vs default {err:.1e}", flush=True)


if __name__ == "__main__":
    main()
