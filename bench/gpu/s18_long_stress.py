"""Prepared in session 17 for session 18: long single-process stresses of the
warp-specialized kinds the default still takes (and of the D = 128 backward beyond 4k,
capped in session 17 after 28 of 2929 calls gave NaN dk / dv at 16k).

    PYTHONPATH=src python bench/gpu/s18_long_stress.py SECONDS CASE [CASE ...]

CASE = D:N:causal:p[:uncap], e.g. 128:16384:0:0:uncap (session 17's policy.BWD_WS_MAX_N lifted, the
session-17 fault), 64:16384:0:0, 128:4096:1:0, 128:4096:0:0.1. 16k tokens a call (B =
16384 // N, H = 2048 // D), bf16, fixed inputs; forward+backward each call; per case:
calls, calls with NaN per output (out, dq, dk, dv), calls differing bitwise from the
first call's result, the kernels launched (bwd_ws.py persistent or not), and for the
first NaN call where it sits: (batch, head, 128-key / 128-query block, row in block)."""
import sys
import time

import torch

import os

import flashtriton
from flashtriton.launchers import backward, plans, policy

if os.environ.get("S18_VEC_PTR"):               # session 18: 1 / 0 forces bwd_ws.py's VEC_PTR
    backward.WS_DKDV_VEC_PTR = os.environ["S18_VEC_PTR"] == "1"

_real = backward._ws_programs
LAUNCHED = []
backward._ws_programs = lambda *a: LAUNCHED.append((a[1], _real(*a))) or LAUNCHED[-1][1]


def where(t):
    """(batch, head, block of 128 rows, row in the block) of t's NaN rows, (B, N, H, D)."""
    bad = t.isnan().any(-1).nonzero()
    blocks = sorted({(int(b), int(h), int(n) // 128) for b, n, h in bad.tolist()})
    rows = sorted({int(n) % 128 for _, n, _ in bad.tolist()})
    return f"{len(bad)} rows, {len(blocks)} blocks {blocks[:8]}, rows in block {rows[:8]}..{rows[-3:]}"


def case(seconds, spec):
    d, n, causal, p, *rest = spec.split(":")
    d, n, causal, p = int(d), int(n), causal == "1", float(p)
    cap = getattr(policy, "BWD_WS_MAX_N", {})       # gone in session 18 ("uncap" kept for its scripts)
    saved = dict(cap)
    if rest and rest[0] == "uncap":
        cap.clear()
    plans.clear()
    try:
        b, h = 16384 // n, 2048 // d
        gen = torch.Generator(device="cuda").manual_seed(d + n)
        q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16, generator=gen).requires_grad_()
                   for _ in range(3))
        dout = torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16, generator=gen)

        def step():
            torch.manual_seed(0)
            out = flashtriton.flash_attn_func(q, k, v, causal=causal, dropout_p=p)
            return (out.detach(), *torch.autograd.grad(out, (q, k, v), dout))
        LAUNCHED.clear()
        first = [t.clone() for t in step()]
        kernels = sorted({(kern, pers) for kern, (_, pers) in LAUNCHED})
        calls, differ, nan = 0, 0, [0, 0, 0, 0]
        located = ""
        t_end = time.time() + seconds
        while time.time() < t_end:
            got = step()
            calls += 1
            flags = [bool(t.isnan().any()) for t in got]
            nan = [a + f for a, f in zip(nan, flags)]
            differ += not all(torch.equal(x, y) for x, y in zip(got, first))
            if any(flags) and not located:
                located = "; ".join(f"{nm}: {where(t)}" for nm, t, f in zip(("out", "dq", "dk", "dv"), got, flags) if f)
        print(f"{spec} VEC_PTR={backward.WS_DKDV_VEC_PTR}: bwd_ws.py launches {kernels or 'none'}; first NaN {any(bool(t.isnan().any()) for t in first)}; "
              f"calls {calls}, NaN out/dq/dk/dv {nan}, differing {differ}" + (f"\n    first NaN: {located}" if located else ""),
              flush=True)
    finally:
        cap.update(saved)
        plans.clear()


if __name__ == "__main__":
    for spec in sys.argv[2:]:
        case(float(sys.argv[1]), spec)
