"""Issue 3 (window (1024, 0) at 16k >= 0.85x causal, band FLOPs): the Gluon WINDOW forward's
EARLY_Q variant (kernels/fwd_gluon.py, a session-29 helper, offline, never run; switch
launchers.policy.GLUON_FWD_WINDOW_EARLY_Q = {} = off) against the routed one-block WINDOW
kernel, the session-25 PERSISTENT WINDOW kernel, and the library's causal forward (Gluon
CAUSAL one block a CTA, the route at 16k D = 128).

    PYTHONPATH=src timeout 300 python bench/gpu/s30_gluon_window_ab.py      # ~2-3 min, compiles included
    (then: PYTHONPATH=src python -m pytest -q -o addopts="" -m gpu tests/test_fwd_gluon_window_early_q.py)

What runs: bf16, D = 128, H = 16, 16k tokens (B = 16k / N), N = 4k and 16k (S30_N), window
(1024, 0); forward_gluon.prepare(...) kernel-only as CUDA-graph replays (bench.common.
graph_time_ms, L2 flushed): "one-block" (window, the route), "persistent" (window,
persistent=True), "early-q" (window, persistent=True, early_q=True), "causal" (causal=True,
the route's kernel at N >= 4k). First the outputs: each window variant on batch 0 / head 0
against float64 (error <= 2x torch's bf16 error, lse too), and persistent / early-q against
one-block over the whole tensor (expected BITWISE: same tiles, same order, same code a row; O
only stored another way). A variant that fails is not timed. Two timing rounds, the second
in reverse order. Window TFLOP/s count only the band's FLOPs (4 * D * sum over rows of the
keys each row sees, flashtriton.bench.common.attention_flops with the window), causal the
causal FLOPs; the ratio columns are band TFLOP/s over causal TFLOP/s (issue 3's measure).

Offline (bench/gluon_fwd_compile.py, sm_90a, Triton 3.6.0): early-q WINDOW D = 128: 12 warps,
setmaxnreg 240 / 240 / 24, 0 spills, 224 KB shared, 128 HGMMA, 12 UTMALDG, 0 UTMASTG (O leaves
by 64 STG.E a thread-pair of consumers: 32 four-byte stores a thread), 6 DEPBAR.LE 1; tile loops
(instructions a warp: left-masked / unmasked / diagonal) 817 / 526 / 856 and 817 / 526 / 854
against the PERSISTENT WINDOW kernel's 815 / 517 / 847 and 814 / 517 / 845 (+2-9: the
predicated q_free arrival and its warpgroup BAR.SYNC). Every variant without EARLY_Q: SASS
byte-identical (all 65 of the table, bench/gluon_fwd_sass_hash.py).

PREDICTION (written before any run; bench/NOTES.md "Offline (a helper, session 29): the window
forward" has the arithmetic). Session 28 measured the one-block window at 2.25 us a 128 x 128
block-tile per SM against causal's 1.81; fitting T = F a block + u a tile (+ masked tiles at
1.1-1.3 u) to both gives F ~2-3 us a block, ~1.5 tiles' worth, and a 9-tile window block pays
it 15.5 times per SM (causal's 64-tile blocks amortise it). The session-25 PERSISTENT kernel
hid only the CTA launch and the first K / V loads (measured +1.5%), because O left through Q's
buffer: the next Q load waited for the O TMA store, then cost its full latency before the
next block's first S. EARLY_Q frees Q at the last S and stores O from registers, so the Q
load runs under the last softmax + P V + epilogue (~0.6-0.8 of a tile, ~1.1-1.4 us).
  16k: early-q 470-500 band TFLOP/s (one-block ~430-437, persistent ~430-440), i.e. +8-14% on
       the routed kernel, 0.78-0.83x causal (causal ~600-607). Issue 3's 0.85x: NOT expected
       from this lever alone (the wave tail, 2048 equal blocks on 132 SMs = 15.5 waves, costs
       another ~3%: the next lever is a host deal of the window's blocks, SCHEDULED-style).
  4k:  early-q +5-10% over one-block (B = 4: 512 blocks, 3.9 a CTA; the first 8 blocks of each
       head lighter).
  Outputs bitwise one-block's. If early-q is level with persistent (< +3%), the per-block
  cost is not the Q chain: profile (ncu) the block boundary before any further lever.
"""
from __future__ import annotations

import os
import time
import traceback

os.environ.setdefault("FLASHTRITON_PLANS", "0")

import torch  # noqa: E402

from flashtriton.bench.common import graph_or_eager_ms, head0_fwd_check, same_outputs, short_error  # noqa: E402
from flashtriton.launchers import forward_gluon  # noqa: E402

TOKENS, H, D, DTYPE = 16384, 16, 128, torch.bfloat16
WINDOW = (1024, 0)
NS = [int(x) for x in os.environ.get("S30_N", "4096,16384").split(",")]
VARIANTS = {"one-block": dict(window=WINDOW), "persistent": dict(window=WINDOW, persistent=True),
            "early-q": dict(window=WINDOW, persistent=True, early_q=True)}


def band_flops(b, n, left, right):
    """4 * D * (query, key) pairs inside the band (Nq = Nk = n), times B * H."""
    i = torch.arange(n, dtype=torch.int64)
    keys = (torch.clamp(i + right, max=n - 1) - torch.clamp(i - left, min=0) + 1).sum().item()
    return 4 * D * keys * b * H


def inputs(n, seed=0):
    torch.manual_seed(seed)
    b = max(1, TOKENS // n)
    return tuple(torch.randn(b, n, H, D, device="cuda", dtype=DTYPE) for _ in range(3))


def case(n):
    q, k, v = inputs(n)
    b = q.shape[0]
    scale = D ** -0.5
    flops = {name: band_flops(b, n, *WINDOW) for name in VARIANTS}
    flops["causal"] = band_flops(b, n, n, 0)
    calls, outs = {}, {}
    for name, kw in list(VARIANTS.items()) + [("causal", dict(causal=True))]:
        print(f"N={n} {name}: compiling / first run {time.strftime('%H:%M:%S')}", flush=True)
        try:
            calls[name] = forward_gluon.prepare(q, k, v, scale, **kw)
            outs[name] = tuple(t.clone() for t in calls[name]())
            torch.cuda.synchronize()
        except Exception as exc:  # noqa: BLE001
            print(f"N={n} {name}: {short_error(exc)}", flush=True)
            traceback.print_exc()
            calls.pop(name, None)
            outs.pop(name, None)
    for name in list(calls):
        left, right = WINDOW if name != "causal" else (-1, 0)
        ok, text = head0_fwd_check(q, k, v, *outs[name], softmax_scale=scale, window_left=left, window_right=right)
        print(f"N={n} {name}: {'ok' if ok else 'FAIL'} {text}", flush=True)
        if name in ("persistent", "early-q") and "one-block" in outs:
            print(f"N={n} {name} vs one-block: {same_outputs(outs['one-block'], outs[name])}", flush=True)
        if not ok:
            calls.pop(name)
    del outs
    times = {name: [] for name in calls}
    names = list(calls)
    for rnd, order in enumerate((names, names[::-1])):
        for name in order:
            try:
                ms, star = graph_or_eager_ms(calls[name])
            except Exception as exc:  # noqa: BLE001
                print(f"N={n} round {rnd + 1} {name}: {short_error(exc)}", flush=True)
                continue
            times[name].append(ms)
            print(f"N={n} round {rnd + 1} {name}: {ms:.3f} ms{star} {flops[name] / ms / 1e9:.0f} TFLOP/s", flush=True)
    tf = {name: [flops[name] / ms / 1e9 for ms in t] for name, t in times.items() if t}
    best = {name: max(t) for name, t in tf.items()}
    cells = " | ".join(" / ".join(f"{x:.0f}" for x in tf.get(name, [])) or "-"
                       for name in list(VARIANTS) + ["causal"])
    ratios = " / ".join(f"{best[x] / best['causal']:.3f}x" if x in best and "causal" in best else "-"
                        for x in VARIANTS)
    gain = f"{best['early-q'] / best['one-block']:.3f}x" if "early-q" in best and "one-block" in best else "-"
    print(f"| {n} | {b} | {cells} | {ratios} | {gain} |", flush=True)


def main():
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}", flush=True)
    for n in NS:
        try:
            case(n)
        except Exception as exc:  # noqa: BLE001
            print(f"N={n}: {short_error(exc)}", flush=True)
            traceback.print_exc()
        torch.cuda.empty_cache()
    print("table rows above: | N | B | one-block band TFLOP/s (2 rounds) | persistent | early-q | causal | "
          "one-block / persistent / early-q vs causal (best) | early-q / one-block |", flush=True)


if __name__ == "__main__":
    main()
