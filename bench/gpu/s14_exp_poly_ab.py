"""Measured 2026-11-30 (session 14), lost everywhere; the code it drove was removed (bench/NOTES.md, Session 14).
Written in session 13 for the next GPU session (not run yet): fwd.py's unmasked tiles with a
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
from flashtriton.bench.common import attention_flops, graph_backward_ms, graph_time_ms
from flashtriton.launchers import backward, forward

CASES = [  # D, N, causal
    (64, 1024, False), (64, 4096, False), (64, 16384, False),
    (64, 1024, True), (64, 4096, True), (64, 16384, True),
    (128, 4096, True), (128, 16384, True),
]
BWD_CASES = [(64, 1024, False), (64, 1024, True), (64, 4096, True), (128, 1024, True), (128, 2048, True)]


def compare(label, table, d, run, measure):
    """EXP_POLY 0 / 2 / 4 through `table` (FWD_EXP_POLY or BWD_EXP_POLY) at head dim d, each
    twice in alternating order: run() gives the tensors to compare against EXP_POLY = 0,
    measure() TFLOP/s."""
    variants = [0, 2, 4]
    res = {p: [] for p in variants}
    outs = {}
    saved = dict(table)
    for rep in range(2):
        for poly in (variants if rep == 0 else variants[::-1]):
            table.clear()
            if poly:
                table[d] = poly
            try:
                if rep == 0:
                    outs[poly] = run()
                res[poly].append(measure())
            except Exception as exc:  # noqa: BLE001
                print(f"{label} EXP_POLY={poly}: {type(exc).__name__}: {str(exc).splitlines()[0][:150]}", flush=True)
            finally:
                table.clear()
                table.update(saved)
    for poly, r in res.items():
        if r and poly in outs and 0 in outs:
            err = max((a.float() - z.float()).abs().max().item() for a, z in zip(outs[poly], outs[0]))
            print(f"{label} EXP_POLY={poly}: " + " / ".join(f"{x:6.1f}" for x in r)
                  + f" TFLOP/s  max|diff| vs MUFU {err:.1e}", flush=True)


def main():
    bwd = "bwd" in sys.argv[1:]
    for d, n, causal in (BWD_CASES if bwd else CASES):
        b, h = 16384 // n, 2048 // d
        q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16, requires_grad=bwd)
                   for _ in range(3))

        def call():
            return flashtriton.flash_attn_func(q, k, v, causal=causal)

        if bwd:
            dout = torch.randn_like(q)
            flops = attention_flops(b, h, n, n, d, causal, "bwd")
            compare(f"bwd D={d} N={n} causal={causal}", backward.BWD_EXP_POLY, d,
                    lambda: torch.autograd.grad(call(), (q, k, v), dout),
                    lambda: flops / graph_backward_ms(call, (q, k, v), dout) / 1e9)
        else:
            flops = attention_flops(b, h, n, n, d, causal)
            compare(f"D={d} N={n} causal={causal}", forward.FWD_EXP_POLY, d,
                    lambda: (call(),), lambda: flops / graph_time_ms(call) / 1e9)
        del q, k, v
    sys.exit(0)


if __name__ == "__main__":
    main()
