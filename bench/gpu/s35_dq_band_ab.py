"""Session 35: the launch order of the D = 256 causal dQ pass (kernels/bwd_gluon_dq.py BAND, not routed).

Why: Nsight Compute (s35/ncu-d256-8k.txt.gz, B = 4, H = 16, N = 8k) puts the D = 256 split backward's
causal efficiency (0.89x at 8k in the grid) in its dQ pass: 5.04 ms causal against 8.14 plain (0.62x the
time for ~0.5x the work), SM throughput 69% against 90%, while the dK / dV pass is 0.52x. The grid is
(Nq / 128, B * H), one block a CTA, heaviest first within each head: the hardware launches head 0's
blocks heavy to light, then head 1's, ... BAND = b deals rank-major over bands of b heads (every head's
heaviest block, then the next rank), so long blocks start early across b heads and the short ones
fill the end; b = B * H is heaviest first over the whole grid (K / V of every head in flight: L2).

    PYTHONPATH=src timeout 300 python bench/gpu/s35_dq_band_ab.py    # S35_NS=8192 to shorten

What runs: D = 256, bf16, H = 8, 16k tokens (B = 16k / N), causal, N = 4k / 8k / 16k: the dQ kernel
alone (launchers/backward_gluon_dq.prepare_dq with the split path's causal tile, kernels/bwd_gluon_dq.
default_config(256, True)) from the Gluon forward's lse and delta = rowsum(dO * O), band 0 (the route's
order) against bands 2 / 4 / 8 / 16 / 32 that divide B * H; outputs must be BITWISE band 0's (the same
per-block computation, another order); CUDA-graph replays, two rounds (the second reversed).

PREDICTION (before the run): the tail of one-block-a-CTA launches costs at most a few % at 31 waves
(B = 4, H = 16) and ~8 waves here (1,024 CTAs at 8k): bands 2-8 +2-6% at 8k, less at 16k; the whole-grid
order loses at 8k-16k (L2: K / V of all heads in flight). Routing rule: a band >= 3% ahead of band 0 in
both rounds at 4k and 8k and not behind at 16k -> the split path's causal dQ takes it.
"""
import os
import time

import torch

from flashtriton.bench.common import short_error, timing_rounds
from flashtriton.kernels.bwd_gluon_dq import default_config
from flashtriton.launchers import backward_gluon_dq, forward_gluon

TOKENS, H, D, DTYPE = 16384, 8, 256, torch.bfloat16
NS = [int(x) for x in os.environ.get("S35_NS", "8192,4096,16384").split(",")]


def case(n):
    torch.manual_seed(n)
    b = TOKENS // n
    q, k, v, do = (torch.randn(b, n, H, D, device="cuda", dtype=DTYPE) for _ in range(4))
    scale = D ** -0.5
    o, lse = forward_gluon.prepare(q, k, v, scale, causal=True)()
    delta = (o.float() * do.float()).sum(-1).transpose(1, 2).contiguous()        # (B, H, N)
    bands = [0] + [x for x in (2, 4, 8, 16, 32) if (b * H) % x == 0]
    calls, outs = {}, {}
    for band in bands:
        name = f"band{band}"
        print(f"N={n} {name}: compile / first run {time.strftime('%H:%M:%S')}", flush=True)
        try:
            calls[name] = backward_gluon_dq.prepare_dq(q, k, v, do, lse, delta, scale, True, band=band)
            outs[name] = calls[name]().clone()
            torch.cuda.synchronize()
        except Exception as exc:  # noqa: BLE001  (reported; the others run)
            print(f"N={n} {name}: {short_error(exc)}", flush=True)
            calls.pop(name, None)
    ref = outs.get("band0")
    for name in list(calls):
        same = ref is not None and torch.equal(outs[name], ref)
        finite = bool(torch.isfinite(outs[name]).all().item())
        print(f"N={n} {name}: bitwise band0 {same}, finite {finite}", flush=True)
        if not (same and finite):
            calls.pop(name)
    # FLOPs of the dQ pass: S, dP and dQ, 3 matmuls over the causal half (for the TFLOP/s column)
    flops = 3 * 2 * b * H * n * n * D / 2
    tf = timing_rounds(calls, {name: flops for name in calls}, f"N={n}")
    base = max(tf.get("band0", [float("nan")]))
    cells = " | ".join(f"{name} " + " / ".join(f"{x:.0f}" for x in t) + f" ({max(t) / base:.3f}x)"
                       for name, t in tf.items())
    print(f"| {n} | {b} | {cells} |", flush=True)


def main():
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, dQ tile {default_config(D, True)}", flush=True)
    for n in NS:
        try:
            case(n)
        except Exception as exc:  # noqa: BLE001
            print(f"N={n}: {short_error(exc)}", flush=True)
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
