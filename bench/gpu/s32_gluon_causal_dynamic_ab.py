"""Session 32: the DYNAMIC persistent causal Gluon forward (kernels/fwd_gluon.py DYNAMIC: grid = the
SM count, each CTA's loader taking the next block from a launch-wide ticket counter over the banded
heaviest-first order, the next block's Q and first K / V tile loaded under this block's last tiles,
O by global stores (EARLY_Q); the counter reset by the launch's last CTA; written and compiled
offline by a session-32 helper, never run, not routed: policy.GLUON_FWD_CAUSAL_DYNAMIC = {}) against
the one-block-a-CTA causal kernel it would replace, the library's route and cuDNN, for issue 4
(causal forward >= 1.0x cuDNN at 2k-4k; causal efficiency >= 0.9x non-causal from 8k).

    PYTHONPATH=src timeout 170 python bench/gpu/s32_gluon_causal_dynamic_ab.py    # ~120-150 s, compiles included
    (then: PYTHONPATH=src python -m pytest -q -o addopts="" -m gpu tests/test_fwd_gluon_causal_dynamic.py)
    S32_N=2048,4096 S32_D=128 ... to shorten.

What runs (bf16, 16k tokens: B = 16k / N, Nq = Nk = N in 1k / 2k / 4k / 8k / 16k; D = 128 H = 16
with 2 consumers, D = 64 H = 32 with 3, as GLUON_FWD_CAUSAL_CONSUMERS routes them):
  1blk     forward_gluon.prepare(..., causal=True): the routed one-block causal kernel
  dyn      the same with persistent=True, dynamic=True, early_q=True (band: causal_band(), K / V of
           a band within half the L2, as session 24's banded order)
  dyn-lpt  dyn with band = B * H: the plain LPT order (longest causal rows first across all heads);
           from 4k only (the L2 question; the time budget)
  lib      flashtriton.flash_attn_func(q, k, v, causal=True) as routed now (fwd_ws.py below
           GLUON_FWD_CAUSAL_MIN_N = 4k, the one-block Gluon kernel from there; printed)
  cudnn    SDPA's cuDNN backend, causal
Kernel-only (prepare's launch) or the whole call (lib, cudnn) as CUDA-graph replays (bench.common.
graph_or_eager_ms, L2 flushed). First the outputs: each Gluon variant on batch 0 / head 0 against
float64 (error <= 2x PyTorch's bf16 error, lse too), dyn and dyn-lpt against 1blk over the whole
tensor (expected BITWISE: the same tiles in the same order within each block; only which CTA runs
a block changes), and dyn run a second time (a counter left dirty by the first launch would skip
blocks: the output would differ). A variant that fails is not timed. Then two rounds, the second
in reverse order; TFLOP/s by attention_flops(causal=True).

Offline (bench/gluon_fwd_compile.py, sm_90a, Triton 3.6.0, session-32 helper):
  D = 128 2 consumers, EARLY_Q: 12 warps, setmaxnreg 240 / 240 / 24, 0 spills, 224.4 KB shared
    (one int32 ticket slot more than the persistent kernel), 96 HGMMA, 12 UTMALDG, 0 UTMASTG, 5
    global atomics (3 adds, 2 exchanges: per block one add in the loader only); tile loops
    487 / 717 and 489 / 717 (unmasked / masked) instructions a warp against the one-block causal
    kernel's 490 / 713; without EARLY_Q 484 / 713.
  D = 64 3 consumers, EARLY_Q: 16 warps, setmaxnreg 168 / 160 / 160 / 24, 120.4 KB, 216 spill
    bytes (one-block: 160): unmasked loops 448 / 447 / 448 with 0 local accesses, masked loops
    727 with 7 + 7 STL + LDL for consumers 0 / 1 and 1 + 1 for consumer 2 (one-block: 717 with
    6 + 6, 728 with 2 + 2); without EARLY_Q 344 bytes.

PREDICTION (written before any run). The per-block fixed cost F (bench/NOTES.md, session 29's fit
on the window and causal kernels at D = 128): ~2.1-3.1 us a block (~1.5 tiles of u = 1.75 us):
launch, Q + first K / V latency, the peel's softmax with nothing to overlap, the last P V, the
epilogue and its store wait. One block a CTA pays it all; DYNAMIC can hide the Q + first-tile
latency and the CTA launch (the next block's Q lands under this block's last softmax / P V /
epilogue) but not the peel, the last P V or the normalisation: ~40-60% of F, i.e. ~1-1.5 us a
block. Per SM the blocks are 15.5 a SM at every N (16k tokens, Nq = Nk: B * H * n_m = 2048 blocks at
D = 128), and the time a SM T = 15.5 (F + n_avg u) with n_avg = (N / 128 + 1) / 2 tiles:
  1k: n_avg 4.5, F share ~25%: saving ~1.2 / (2.6 + 7.9) = 9-12%, minus the worse tail of a
      persistent grid (the last blocks are the 1-tile ones: small) -> dyn / 1blk +5-12%;
  2k: n_avg 8.5 -> +4-8%;  4k: n_avg 16.5 -> +2-5%;  8k / 16k: +0-3%.
Session 30's window EARLY_Q (9 tiles a block) measured only +0.7% over one block with a static deal,
so F may be mostly the un-hideable part: the lower end is as likely as the upper. The dynamic deal
itself should erase session 24's static-deal loss (-7..-13% at 16k): dyn within -2% of 1blk at
16k at worst. D = 64 (3 consumers, 192-row blocks, n_m 2/3 as many blocks, tile steps ~same cost):
the same shares, minus ~1% for the masked loop's extra spill: 2k +3-8%, 4k +1-5%. dyn-lpt: level
with dyn up to 4k (the heads' K / V, 0.5-2 MB each at 1k-4k, sit in the L2 either way), 3-10%
behind at 16k (every head's K / V in flight at once: 16 heads x 8 MB at D = 128 > 50 MB of L2).
Against cuDNN: D = 128 2k ~0.95-0.98x (0.91x with fwd_ws.py), 4k ~0.96-0.99x; D = 64 4k ~0.97-1.0x.
Wrong if dyn / 1blk < +2% at 1k / 2k: then the block-boundary cost is not latency a persistent
loader can overlap (the peel / epilogue chain dominates) and the next lever is the peel's
softmax (overlapping the next block's first S with this block's epilogue in the consumers).
Routing rule (launchers/policy.py): GLUON_FWD_CAUSAL_DYNAMIC[D] = the shortest N from which dyn
beats 1blk in both rounds and is not behind it by more than 1% at any longer N; if dyn beats
lib (fwd_ws.py) at 2k (or 1k) in both rounds, GLUON_FWD_CAUSAL_MIN_N[D] comes down with it (only
while the dynamic table holds that D). Take dyn-lpt's band rule (causal_band -> B * H) only if it
beats dyn at every N. Then plans.clear() in tests that change it; tests/test_fwd_gluon_causal_dynamic.py::
test_policy_off_by_default asserts the default.
"""
import os
import time
import traceback

os.environ.setdefault("FLASHTRITON_PLANS", "0")       # (before flashtriton: the graphs replay the launches anyway)

import torch  # noqa: E402

import flashtriton  # noqa: E402
from flashtriton.bench.common import (attention_flops, graph_or_eager_ms, head0_fwd_check,  # noqa: E402
                                      same_outputs, short_error)
from flashtriton.bench.providers import gpu_providers  # noqa: E402
from flashtriton.launchers import forward_gluon, plans, policy  # noqa: E402

TOKENS, DTYPE = 16384, torch.bfloat16
HEADS = {128: 16, 64: 32}
DS = [int(x) for x in os.environ.get("S32_D", "128,64").split(",")]
NS = [int(x) for x in os.environ.get("S32_N", "1024,2048,4096,8192,16384").split(",")]
COLUMNS = ["1blk", "dyn", "dyn-lpt", "lib", "cudnn"]


def variants(d, b, h, n):
    nc = dict(num_consumers=3) if policy.gluon_fwd_consumers(d, True, False) == 3 else {}
    dyn = dict(persistent=True, dynamic=True, early_q=True, **nc)
    out = {"1blk": dict(nc), "dyn": dyn}
    if n >= 4096:                   # (the L2 question; below 4k every head's K / V fits: time budget)
        out["dyn-lpt"] = dict(dyn, band=b * h)
    return out


def inputs(n, h, d, seed=0):
    torch.manual_seed(seed)
    b = max(1, TOKENS // n)
    return tuple(torch.randn(b, n, h, d, device="cuda", dtype=DTYPE) for _ in range(3))


def lib_route(q, k, v) -> str:
    """Which forward flash_attn_func takes for this causal call now (fwd_into spied once)."""
    seen = []
    real = forward_gluon.fwd_into

    def spy(*a, **kw):
        seen.append(f"gluon causal persistent={kw.get('persistent')} consumers={kw.get('num_consumers', 2)} "
                    f"dynamic={kw.get('dynamic', False)}")
        return real(*a, **kw)
    forward_gluon.fwd_into = spy
    try:
        plans.clear()
        with torch.no_grad():
            flashtriton.flash_attn_func(q, k, v, causal=True)
        torch.cuda.synchronize()
    finally:
        forward_gluon.fwd_into = real
        plans.clear()
    return seen[0] if seen else "not Gluon (fwd_ws.py / fwd.py)"


def case(d, n):
    h = HEADS[d]
    q, k, v = inputs(n, h, d)
    b = q.shape[0]
    scale = d ** -0.5
    flops = attention_flops(b, h, n, n, d, True)
    calls, outs = {}, {}
    for name, kw in variants(d, b, h, n).items():
        print(f"D={d} N={n} {name}: compiling / first run {time.strftime('%H:%M:%S')}", flush=True)
        try:
            calls[name] = forward_gluon.prepare(q, k, v, scale, causal=True, **kw)
            outs[name] = tuple(t.clone() for t in calls[name]())
            if name != "1blk":
                again = calls[name]()                      # a second launch on the (self-reset) counter
                torch.cuda.synchronize()
                print(f"D={d} N={n} {name} second launch vs first: {same_outputs(outs[name], again)}", flush=True)
            torch.cuda.synchronize()
        except Exception as exc:  # noqa: BLE001  (reported; the others run)
            print(f"D={d} N={n} {name}: {short_error(exc)}", flush=True)
            traceback.print_exc()
            calls.pop(name, None)
            outs.pop(name, None)
    for name in list(calls):
        ok, text = head0_fwd_check(q, k, v, *outs[name], softmax_scale=scale, window_right=0)
        print(f"D={d} N={n} {name}: {'ok' if ok else 'FAIL'} {text}", flush=True)
        if name != "1blk" and "1blk" in outs:
            print(f"D={d} N={n} {name} vs 1blk: {same_outputs(outs['1blk'], outs[name])}", flush=True)
        if not ok:
            calls.pop(name)                                  # wrong: not timed
    print(f"D={d} N={n} lib routes to: {lib_route(q, k, v)} (GLUON_FWD_CAUSAL_MIN_N {policy.GLUON_FWD_CAUSAL_MIN_N}, "
          f"GLUON_FWD_CAUSAL_DYNAMIC {policy.GLUON_FWD_CAUSAL_DYNAMIC})", flush=True)

    def lib():
        with torch.no_grad():
            return flashtriton.flash_attn_func(q, k, v, causal=True, softmax_scale=scale)
    calls["lib"] = lib
    del outs
    sdpa = gpu_providers(include_flex=False)["sdpa-cudnn"]
    calls["cudnn"] = lambda: sdpa(q, k, v, True)
    times = {name: [] for name in calls}
    names = list(calls)
    for rnd, order in enumerate((names, names[::-1])):
        for name in order:
            try:
                ms, star = graph_or_eager_ms(calls[name])
            except Exception as exc:  # noqa: BLE001
                print(f"D={d} N={n} round {rnd + 1} {name}: {short_error(exc)}", flush=True)
                continue
            times[name].append(ms)
            print(f"D={d} N={n} round {rnd + 1} {name}: {ms:.3f} ms{star} {flops / ms / 1e9:.0f} TFLOP/s", flush=True)
    tf = {name: [flops / ms / 1e9 for ms in t] for name, t in times.items() if t}
    cells = " | ".join(" / ".join(f"{x:.0f}" for x in tf.get(name, [])) or "-" for name in COLUMNS)
    best = {name: max(t) for name, t in tf.items()}
    ratios = " / ".join(f"{best[x] / best[ref]:.3f}x" for x, ref in (("dyn", "1blk"), ("dyn-lpt", "1blk"),
                                                                      ("dyn", "lib"), ("dyn", "cudnn"))
                        if x in best and ref in best)
    print(f"| {d} | {n} | {b} | {cells} | {ratios} |", flush=True)


def main():
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}", flush=True)
    for d in DS:
        for n in NS:
            try:
                case(d, n)
            except Exception as exc:  # noqa: BLE001  (reported, the next N runs)
                print(f"D={d} N={n}: {short_error(exc)}", flush=True)
                traceback.print_exc()
            torch.cuda.empty_cache()
    print("table rows above: | D | N | B | 1blk TFLOP/s (2 rounds) | dyn | dyn-lpt | lib | cuDNN | dyn / 1blk, "
          "dyn-lpt / 1blk, dyn / lib, dyn / cuDNN (best) |", flush=True)


if __name__ == "__main__":
    main()
