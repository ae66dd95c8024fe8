"""Written in session 11 for the next GPU session (not run yet): bwd.py's dK/dV as two
launches, dK alone (S, dP, dK) then dV alone (S, dV), against the joint kernel
(launchers.prefill.DKDV_SEPARATE, kernels/bwd.py PARTS).

Why: at D = 256 the joint kernel holds two (BLOCK_N, 256) fp32 accumulators, sits at 255
registers and spills (1.5 KB at (128, 64, 8, 1)); session 11's probe measured it at ~310
TFLOP/s for its four matmuls against 647 for the dQ kernel's three (one accumulator). Each
part alone compiles without a spill at (64, 64, 8, 2) (sm_90a, 2026-11-30).
Prediction: both parts at ~500-600 TFLOP/s: 5 matmuls at ~550 against 4 at ~310, the
D = 256 backward at 8k 9.67 -> ~7.5 ms non-causal (~370 TFLOP/s, past cuDNN's 358), causal
4.70 -> ~3.8 ms. It wins only if the parts run > 1.25x the joint rate.

Each case: the backward alone (do_bench, forward once) per variant, and the largest
difference of dq, dk, dv from the first variant's.
"""
import os
import sys

os.environ["FLASHTRITON_PLANS"] = "0"     # variants change module constants

import torch
import triton

import flashtriton
from flashtriton.bench.common import attention_flops
from flashtriton.launchers import prefill
from flashtriton.kernels import configs

T = configs.Tile
# (dK tile, dV tile); offline, dV alone at (128, 64, 8, 1) has no spill and unserialized
# wgmma (bench/NOTES.md, "Session 11", last entries)
SEPARATE_256 = [None, (T(64, 64, 8, 2), T(64, 64, 8, 2)), (T(64, 64, 8, 2), T(128, 64, 8, 1)),
                (T(128, 64, 8, 1), T(128, 64, 8, 1))]
CASES = [
    # label, B, N, H, D, causal, variants (None = the joint kernel, else (dK tile, dV tile))
    ("D256 full 8k", 2, 8192, 8, 256, False, SEPARATE_256),
    ("D256 causal 8k", 2, 8192, 8, 256, True, SEPARATE_256),
    ("D256 causal 2k", 8, 2048, 8, 256, True, SEPARATE_256[:3]),
    ("D128 causal 2k", 8, 2048, 16, 128, True, [None, (T(64, 64, 4, 2), T(64, 64, 4, 2)),
                                                (T(128, 64, 8, 2), T(128, 64, 8, 2))]),
]


def main():
    for label, b, n, h, d, causal, variants in CASES:
        q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
        dout = torch.randn_like(q)
        out = flashtriton.flash_attn_func(q, k, v, causal=causal)
        flops = attention_flops(b, h, n, n, d, causal) * 2.5
        base = None
        for sep in variants:
            prefill.DKDV_SEPARATE.clear()
            if sep is not None:
                prefill.DKDV_SEPARATE[d] = sep
            try:
                f = lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)  # noqa: E731
                g = f()
                base = g if base is None else base
                err = max((a.float() - r.float()).abs().max().item() for a, r in zip(g, base))
                ms = triton.testing.do_bench(f, warmup=50, rep=300)
                name = "joint" if sep is None else f"dK {tuple(vars(sep[0]).values())} dV {tuple(vars(sep[1]).values())}"
                print(f"{label:16s} {name:40s} bwd {ms:.3f} ms {flops / ms / 1e9:6.1f} TFLOP/s "
                      f"max|diff| vs first {err:.2e}", flush=True)
            except Exception as exc:  # noqa: BLE001
                print(f"{label:16s} {sep}: {type(exc).__name__}: {str(exc).splitlines()[0][:150]}", flush=True)
            finally:
                prefill.DKDV_SEPARATE.clear()
        del q, k, v, dout, out, base
    sys.exit(0)


if __name__ == "__main__":
    main()
