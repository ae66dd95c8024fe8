"""Written in session 13 for the next GPU session (not run yet): fwd.py's unmasked tiles with a
share of their exponentials on the FMA pipe (launchers.forward.FWD_EXP_POLY: 2 = every other
column by kernels.common.exp2_fma, 4 = one in four) against all on MUFU (today).

Why: MUFU computes 16 exp2 a clock per SM; a bf16 matmul FLOP costs 1/4096 of a clock. A
BLOCK_M x BLOCK_N tile has BLOCK_M * BLOCK_N exponentials and 4 * BLOCK_M * BLOCK_N * D
matmul FLOPs: the exponentials take 1024 / D of the matmuls' clocks (D = 64: as long; D =
128: half). fwd.py has no warp specialization, so a warpgroup's softmax and its matmuls do
not overlap within a program. exp2_fma costs ~9 FMA / integer ops, the FMA pipe runs 128 a
clock: moving a quarter of the exponentials there costs ~0.25 * 9 / 128 per element against
0.25 / 16 saved on MUFU.

Prediction (written before any run): D = 64 forward (every call runs fwd.py) +5-12% with
EXP_POLY = 4, less or negative with 2 (the FMA pipe then carries ~4.5 ops an element more
than the softmax's own ~5); D = 128 causal (fwd.py) +0-5%. Accuracy: max |out diff| against
the MUFU run ~1e-3 (bf16 rounding of p moved by the cubic's 1.7e-4).

Forward TFLOP/s as CUDA-graph replays, 16k tokens, hidden 2048; each variant twice in
alternating order.

"bwd" (second part): bwd.py's two kernels with launchers.backward.BWD_EXP_POLY (every tile's
recomputed P; MUFU needs 32 / D of the dK/dV kernel's matmul clocks, 43 / D of dQ's), on the
calls that run bwd.py: D = 64 causal below 8k and non-causal below 2k, D = 128 causal below
4k. Prediction: D = 64 +3-8% with 4, D = 128 level (its dK/dV spills 524 -> 812 bytes with 4,
sm_90a). Backward TFLOP/s as graph replays (forward+backward minus forward).
"""
import os
import sys

os.environ["FLASHTRITON_PLANS"] = "0"     # variants change a module constant

import torch

import flashtriton
import triton

from flashtriton.bench.common import attention_flops, capture_graph, graph_time_ms
from flashtriton.launchers import backward, forward

CASES = [  # D, N, causal
    (64, 1024, False), (64, 4096, False), (64, 16384, False),
    (64, 1024, True), (64, 4096, True), (64, 16384, True),
    (128, 4096, True), (128, 16384, True),
]


BWD_CASES = [(64, 1024, False), (64, 1024, True), (64, 4096, True), (128, 1024, True), (128, 2048, True)]


def bwd_ms(q, k, v, dout, causal):
    def both():
        out = flashtriton.flash_attn_func(q, k, v, causal=causal)
        return torch.autograd.grad(out, (q, k, v), dout)

    def fwd():
        with torch.no_grad():
            return flashtriton.flash_attn_func(q, k, v, causal=causal)

    (g_both, _), (g_fwd, _) = capture_graph(both), capture_graph(fwd)
    return (triton.testing.do_bench(g_both.replay, warmup=30, rep=200)
            - triton.testing.do_bench(g_fwd.replay, warmup=30, rep=200))


def main_bwd():
    for d, n, causal in BWD_CASES:
        b, h = 16384 // n, 2048 // d
        q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
                   for _ in range(3))
        dout = torch.randn_like(q)
        flops = attention_flops(b, h, n, n, d, causal, "bwd")
        variants = [0, 2, 4]
        res = {p: [] for p in variants}
        grads = {}
        for rep in range(2):
            for poly in (variants if rep == 0 else variants[::-1]):
                saved = dict(backward.BWD_EXP_POLY)
                backward.BWD_EXP_POLY.clear()
                if poly:
                    backward.BWD_EXP_POLY[d] = poly
                try:
                    if rep == 0:
                        out = flashtriton.flash_attn_func(q, k, v, causal=causal)
                        grads[poly] = torch.autograd.grad(out, (q, k, v), dout)
                    res[poly].append(flops / bwd_ms(q, k, v, dout, causal) / 1e9)
                except Exception as exc:  # noqa: BLE001
                    print(f"bwd D={d} N={n} causal={causal} EXP_POLY={poly}: {type(exc).__name__}: "
                          f"{str(exc).splitlines()[0][:150]}", flush=True)
                finally:
                    backward.BWD_EXP_POLY.clear()
                    backward.BWD_EXP_POLY.update(saved)
        for poly, r in res.items():
            if r and poly in grads and 0 in grads:
                err = max((a.float() - z.float()).abs().max().item() for a, z in zip(grads[poly], grads[0]))
                print(f"bwd D={d} N={n} causal={causal} EXP_POLY={poly}: " + " / ".join(f"{x:6.1f}" for x in r)
                      + f" TFLOP/s  max|grad diff| vs MUFU {err:.1e}", flush=True)
        del q, k, v, dout


def main():
    if "bwd" in sys.argv[1:]:
        main_bwd()
        sys.exit(0)
    for d, n, causal in CASES:
        b, h = 16384 // n, 2048 // d
        q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        flops = attention_flops(b, h, n, n, d, causal)
        variants = [0, 2, 4]
        res = {p: [] for p in variants}
        outs = {}
        for rep in range(2):
            for poly in (variants if rep == 0 else variants[::-1]):
                saved = dict(forward.FWD_EXP_POLY)
                forward.FWD_EXP_POLY.clear()
                if poly:
                    forward.FWD_EXP_POLY[d] = poly
                try:
                    if rep == 0:
                        outs[poly] = flashtriton.flash_attn_func(q, k, v, causal=causal)
                    ms = graph_time_ms(lambda: flashtriton.flash_attn_func(q, k, v, causal=causal))
                    res[poly].append(flops / ms / 1e9)
                except Exception as exc:  # noqa: BLE001
                    print(f"D={d} N={n} causal={causal} EXP_POLY={poly}: {type(exc).__name__}: "
                          f"{str(exc).splitlines()[0][:150]}", flush=True)
                finally:
                    forward.FWD_EXP_POLY.clear()
                    forward.FWD_EXP_POLY.update(saved)
        for poly, r in res.items():
            if r and poly in outs:
                err = (outs[poly].float() - outs[0].float()).abs().max().item()
                print(f"D={d} N={n} causal={causal} EXP_POLY={poly}: " + " / ".join(f"{x:6.1f}" for x in r)
                      + f" TFLOP/s  max|out diff| vs MUFU {err:.1e}", flush=True)
        del q, k, v
    sys.exit(0)


if __name__ == "__main__":
    main()
