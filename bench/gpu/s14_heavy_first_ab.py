"""Measured 2026-11-30 (session 14): backward taken (launchers.backward.WS_HEAVY_FIRST = True). Its
forward cases (D = 128 / 64 causal) run fwd.py, not fwd_ws.py, so they measured nothing;
the forward's A/B is bench/gpu/s15_fwd_heavy_first_ab.py (D = 256). This script now
switches the backward only (bench/NOTES.md, Session 14).

Session 14: heaviest query blocks first in the warp-specialized kernels' masked calls
(launchers.forward.WS_HEAVY_FIRST for fwd_ws.py, launchers.backward.WS_HEAVY_FIRST for
bwd_ws.py's dQ kernel), as fwd.py and bwd.py already order theirs.

Why: their linear grid hands out a head's query blocks in ascending order, and under a
causal mask block i has ~i key tiles, so each head's heaviest programs come last and the
grid ends on a tail of heavy blocks (16k tokens at N = 4k: 64 heads x 32 blocks, ~15
waves on 132 SMs, the last wave up to 2x the mean program).
Prediction (before the run): causal forward +1-5% (D = 128 at 2k-16k, D = 64 at 8k), causal
backward +1-3% (only the dQ kernel changes; bwd_ws's dK/dV already runs heavy key blocks
first); results bitwise equal (each block's arithmetic is unchanged).

TFLOP/s as CUDA-graph replays, each variant twice in alternating order.
"""
import os
import sys

os.environ["FLASHTRITON_PLANS"] = "0"     # the variants change module constants

import torch

import flashtriton
from flashtriton.bench.common import attention_flops, graph_backward_ms, graph_time_ms
from flashtriton.launchers import backward

def setflag(on):
    backward.WS_HEAVY_FIRST = on


def case(d, n, mode):
    b, h = 16384 // n, 2048 // d
    q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16, requires_grad=mode == "bwd")
               for _ in range(3))
    dout = torch.randn_like(q)
    flops = attention_flops(b, h, n, n, d, True, mode)
    res, outs = {False: [], True: []}, {}
    for rep in range(2):
        for on in ((False, True) if rep == 0 else (True, False)):
            setflag(on)
            try:
                if mode == "fwd":
                    with torch.no_grad():
                        outs.setdefault(on, flashtriton.flash_attn_func(q, k, v, causal=True).clone())
                    ms = graph_time_ms(lambda: flashtriton.flash_attn_func(q, k, v, causal=True))
                else:
                    if on not in outs:
                        outs[on] = [g.clone() for g in torch.autograd.grad(
                            flashtriton.flash_attn_func(q, k, v, causal=True), (q, k, v), dout)]
                    ms = graph_backward_ms(lambda: flashtriton.flash_attn_func(q, k, v, causal=True), (q, k, v), dout)
                res[on].append(flops / ms / 1e9)
            except Exception as exc:  # noqa: BLE001
                print(f"{mode} D={d} N={n} heavy_first={on}: {type(exc).__name__}: {str(exc)[:150]}", flush=True)
            finally:
                setflag(True)
    same = all(torch.equal(a, c) for a, c in zip(*(outs[o] if isinstance(outs[o], list) else [outs[o]]
                                                  for o in (False, True)))) if len(outs) == 2 else None
    print(f"{mode} D={d} N={n} causal  ascending " + " / ".join(f"{x:6.1f}" for x in res[False])
          + "  heavy first " + " / ".join(f"{x:6.1f}" for x in res[True]) + f" TFLOP/s  bitwise equal: {same}",
          flush=True)


ORDER = [("fwd", 128, 4096), ("bwd", 128, 16384), ("fwd", 128, 16384), ("bwd", 128, 4096), ("fwd", 64, 8192),
         ("fwd", 128, 2048)]      # the most telling first, in case the call runs out of time


def main():
    which = sys.argv[1:] or ["fwd", "bwd"]
    for mode, d, n in ORDER:
        if mode in which:
            case(d, n, mode)


if __name__ == "__main__":
    main()
