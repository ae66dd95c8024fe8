"""Prepared in session 14 for the next GPU session (not run yet): fwd_ws.py's masked
forward handing out a head's query blocks heaviest first (launchers.forward.WS_HEAVY_FIRST,
off), on the calls that run it: causal and sliding-window forwards at D = 256
(policy.WARP_SPEC_MASKED_FWD). Session 14's first A/B timed D = 128 / 64 causal forwards,
which run fwd.py (already heaviest first): it measured two copies of the same code.

Why: the linear grid hands out a head's query blocks in ascending order, and under a
causal mask block i has ~i key tiles, so a grid ends on a tail of heavy blocks. The same
change in bwd_ws.py's dQ kernel gave the causal backward +1-3.4% (bench/NOTES.md,
"Session 14").
Prediction (before any run): D = 256 causal forward +1-4% at 2k-16k; window (1024, 0)
level (its blocks carry about equal work).

TFLOP/s as CUDA-graph replays, 16k tokens, each variant twice in alternating order;
outputs compared bitwise.
"""
import os

os.environ["FLASHTRITON_PLANS"] = "0"     # the variants change a module constant

import torch

import flashtriton
from flashtriton.bench.common import attention_flops, graph_time_ms
from flashtriton.launchers import forward

CASES = [(2048, True), (4096, True), (16384, True), (16384, "window")]   # N, causal or window (1024, 0)


def main():
    d, h = 256, 8
    for n, mode in CASES:
        b = 16384 // n
        q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        kw = dict(causal=True) if mode is True else dict(window_size=(1024, 0))
        flops = attention_flops(b, h, n, n, d, True, "fwd")   # causal count; the window row compares variants only
        res, outs = {False: [], True: []}, {}
        for rep in range(2):
            for on in ((False, True) if rep == 0 else (True, False)):
                forward.WS_HEAVY_FIRST = on
                try:
                    with torch.no_grad():
                        outs.setdefault(on, flashtriton.flash_attn_func(q, k, v, **kw).clone())
                    res[on].append(flops / graph_time_ms(lambda: flashtriton.flash_attn_func(q, k, v, **kw)) / 1e9)
                except Exception as exc:  # noqa: BLE001
                    print(f"N={n} {mode} heavy_first={on}: {type(exc).__name__}: {str(exc)[:150]}", flush=True)
                finally:
                    forward.WS_HEAVY_FIRST = False
        same = torch.equal(outs[False], outs[True]) if len(outs) == 2 else None
        print(f"fwd D=256 N={n} {'causal' if mode is True else 'window(1024,0)'}  ascending "
              + " / ".join(f"{x:6.1f}" for x in res[False]) + "  heavy first "
              + " / ".join(f"{x:6.1f}" for x in res[True]) + f"  bitwise equal: {same}", flush=True)


if __name__ == "__main__":
    main()
