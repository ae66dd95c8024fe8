"""Session 28: the fused Gluon backward's WINDOW variant (kernels/bwd_gluon_fused.py, sliding
window; written and compiled offline in session 28, never run yet, not routed:
policy.GLUON_BWD_FUSED_MIN_N["window"] is empty) against what a windowed backward runs
today (bwd.py's dK/dV + dQ kernels: issue 3 measured 0.56x of the causal backward's
TFLOP/s), and the causal fused backward at the same N for issue 3's ratio (target >= 0.85).

    PYTHONPATH=src timeout 240 python bench/gpu/s28_gluon_bwd_window_ab.py    # < 3 min, compiles included
    (then: PYTHONPATH=src python -m pytest -q -m gpu tests/test_bwd_gluon_window.py)

What runs: launchers.backward.bwd (the library's backward entry: the delta preprocess, then
the route), kernel-only (a CUDA-graph replay, L2 flushed: bench.common.graph_time_ms; no
autograd, no forward, no host launch overhead; FLASHTRITON_PLANS=0 so that a cached plan
cannot keep a route across the table flips), on out / lse of the library's forward:
  - window-current: window (1024, 0), deterministic=False, GLUON_BWD_FUSED_MIN_N["window"]
    empty (today's route: bwd.py);
  - window-fused:   the same call with the table filled ({128: 0}): fused_into(window=...),
    the WINDOW variant (a spy on backward_gluon.fused_into checks the route was taken);
  - causal-fused:   window (-1, 0), the canonical causal (routed to the fused CAUSAL kernel
    by default from 512).
Shapes: D = 128, bf16, H = 16, N = 16k (B = 1) and 4k (B = 4). Two rounds, the second in
reverse order. First, gradients of each route against float64 on batch 0, head 0 (the
tests' criterion: error <= 3x PyTorch's bf16 error) and window-fused against window-current
(max difference relative to max |grad|). Then a torch-profiler breakdown of one 16k call
of each window route (kernel names, GPU us).
TFLOP/s: the band's FLOPs (bench/features._flops_band: 4 x D a visible (query, key) pair,
x 2.5 for the backward, x B x H), for causal too (N (N + 1) / 2 pairs, features.py's
window-vs-causal convention); ratio = window-fused / causal-fused (issue 3: >= 0.85).

Offline (bench/gluon_bwd_compile.py --fused --window, sm_90a, 2026-12-01): 12 warps,
setmaxnreg 240 / 240 / 24; D = 128: 20 spill bytes (5 local accesses a thread, all outside
the tile loops), 193 KB shared memory; D = 64: 0, 145 KB. Consumer tile loops (SASS
instructions): D = 128 580 / 575 (the masked region 106 / 107 of them: a tile crossing no
band edge runs 474 / 468) against causal's 556 / 549 (74 masked; 482 / 475) and plain's
483 / 491; D = 64 543 / 528 (106; 437 / 422). Non-window variants: SASS byte-identical to
before (20 / 20 of the --fused table).

PREDICTION (written before any run). Tile counts at N = 16k, (1024, 0), BLOCK_M = 64,
BLOCK_N = 128: a key block visits the query tiles of rows [n0, n0 + 127 + 1024]: 18 tiles
(the last 8 blocks of a head fewer: the band runs off the last row), for 128 x 1025 band
pairs: 131,200 / (18 x 64 x 128 = 147,456) = 89% of the computed area is useful, against
99.2% for causal (block p visits 256 - 2p tiles). Per WG 3 of 18 tiles run the masked
region (+106 instructions: WG 0 its diagonal tile and 2 at the left edge; WG 1 2 at the
diagonal, the first hidden from all its keys, and 1 at the left edge) against ~1.5 of ~129
for causal. A CTA's fixed cost (K / V load, ring fill, dK / dV epilogue, the last reduce;
~2 tiles' time) is over 18 tiles instead of ~129 on average: ~11% against ~1.5%. 2048
CTAs of nearly equal cost on 132 SMs (1 a SM): ~15.5 waves, ~3% tail. So against causal's
per-pair rate: 0.90 (area) x 0.91 (fixed cost) x 0.99 (masked tiles, wgmma-bound: a masked
tile ~5-10% dearer) x 0.97 (tail) ~= 0.79. Causal fused at 16k ~520 TFLOP/s (session 26:
5.82 ms with dropout at 1.10x the fused causal, so ~5.3 ms; 2.75 PFLOP of band FLOPs) ->
window-fused ~410 TFLOP/s at 16k, ratio 0.79 (range 0.72-0.85: 375-440), i.e. short of
0.85 by the 18-tile CTAs' fixed cost and the 11% of wasted area; window-current ~0.56x
causal (~290): window-fused ~1.4x faster than today's route. 4k (B = 4): causal lower per
pair (avg 33 tiles a CTA, more fixed cost, 6%), the window's CTAs average 15.75 tiles
(12.7%): ratio ~0.80-0.88, window-fused ~370-420. If the ratio stays under 0.85, next:
BLOCK_M = 128 query tiles for the window (half the tiles' fixed overhead, 9 tiles a block,
but 2x the dS^T / staging shared memory), or a persistent grid carrying the next block's
K / V load under this one's epilogue.
"""
import os
import sys
import time
import traceback

os.environ.setdefault("FLASHTRITON_PLANS", "0")       # (before flashtriton: no plan keeps a route)

import torch  # noqa: E402

from flashtriton.bench.common import (graph_time_ms, head0_grad_check, head0_grad_refs,  # noqa: E402
                                      kernel_times_us, time_ms, short_error)
from flashtriton.bench.features import _flops_band  # noqa: E402
from flashtriton.launchers import backward as lib_backward  # noqa: E402
from flashtriton.launchers import backward_gluon, policy  # noqa: E402
from flashtriton.launchers import forward as lib_forward  # noqa: E402
from flashtriton.launchers.common import AttnParams  # noqa: E402

# (call 3: S28_D=64 S28_SHAPES=2048:8,1024:16 etc.; H keeps the hidden size 2048)
D = int(os.environ.get("S28_D", "128"))
H, DTYPE = 2048 // D, torch.bfloat16
WINDOW = (1024, 0)
SHAPES = [tuple(int(x) for x in s.split(":")) for s in os.environ.get("S28_SHAPES", "16384:1,4096:4").split(",")]


class Route:
    """One backward route: its params, the window table it needs, whether fused_into must
    see a window (the spy's record)."""

    def __init__(self, name, window, fused_window):
        self.name, self.window, self.fused_window = name, window, fused_window

    def params(self):
        return AttnParams(D ** -0.5, window_left=self.window[0], window_right=self.window[1], deterministic=False)

    def set_table(self):
        table = {D: 0} if self.fused_window else {}
        policy.GLUON_BWD_FUSED_MIN_N["window"].clear()
        policy.GLUON_BWD_FUSED_MIN_N["window"].update(table)


ROUTES = [Route("window-current", WINDOW, False), Route("window-fused", WINDOW, True),
          Route("causal-fused", (-1, 0), False)]
SEEN = []
_real_fused_into = backward_gluon.fused_into


def _spy(*a, **kw):
    SEEN.append(kw.get("window"))
    return _real_fused_into(*a, **kw)


backward_gluon.fused_into = _spy


def make_inputs(n, b, window, seed=0):
    torch.manual_seed(seed)
    q = torch.randn(b, n, H, D, device="cuda", dtype=DTYPE)
    k, v = (torch.randn(b, n, H, D, device="cuda", dtype=DTYPE) for _ in range(2))
    dout = torch.randn_like(q)
    out, lse = lib_forward.fwd(q, k, v, AttnParams(D ** -0.5, window_left=window[0], window_right=window[1]))
    return q, k, v, dout, out, lse


def call(route, inp):
    q, k, v, dout, out, lse = inp
    return lambda: lib_backward.bwd(dout, q, k, v, out, lse, route.params())


def check_one_head(route, inp, grads) -> tuple:
    """(ok, text): batch 0, head 0 against float64 (error <= 3x PyTorch's bf16 error)."""
    q, k, v, dout, _, _ = inp
    result = head0_grad_check(grads, head0_grad_refs(q, k, v, dout, softmax_scale=D ** -0.5,
                                                     window_left=route.window[0], window_right=route.window[1]))
    torch.cuda.empty_cache()
    return result


def rel_diff(a, b) -> float:
    return ((a.float() - b.float()).abs().max() / b.float().abs().max().clamp_min(1e-30)).item()


def flops(route, n, b) -> float:
    return b * _flops_band(n, n, route.window[0], route.window[1], D, H, "bwd")


def checks():
    """Each route at each shape once: its route (spy), f64 check of one head; the fused
    window against the current one."""
    for n, b in SHAPES:
        grads = {}
        for route in ROUTES:
            tag = f"check N={n} B={b} {route.name}"
            try:
                route.set_table()
                inp = make_inputs(n, b, route.window)
                SEEN.clear()
                print(f"{tag}: launching (compiles first if new) {time.strftime('%H:%M:%S')}", flush=True)
                g = call(route, inp)()
                torch.cuda.synchronize()
                expect = [route.window] if route.fused_window else ([None] if route.name == "causal-fused" else [])
                routed = "route ok" if SEEN == expect else f"ROUTE WRONG (fused_into saw {SEEN}, expected {expect})"
                ok, text = check_one_head(route, inp, g)
                grads[route.name] = g
                print(f"{tag}: {'ok' if ok else 'FAILED'} {routed}; {text}", flush=True)
            except Exception as exc:  # noqa: BLE001  (reported, not fatal)
                print(f"{tag}: ERROR {short_error(exc)}", flush=True)
                traceback.print_exc(limit=3)
        if "window-current" in grads and "window-fused" in grads:
            d = [rel_diff(a, c) for a, c in zip(grads["window-fused"], grads["window-current"])]
            print(f"check N={n}: window-fused vs window-current rel diff dq {d[0]:.1e} dk {d[1]:.1e} "
                  f"dv {d[2]:.1e}", flush=True)
        del grads
        torch.cuda.empty_cache()


def timed(fn) -> tuple:
    """(ms, mark): a CUDA-graph replay's ms, or eager time_ms ("*") where the capture fails."""
    try:
        return graph_time_ms(fn), ""
    except Exception as exc:  # noqa: BLE001  (reported in the mark, then eager)
        print(f"  (graph capture failed: {short_error(exc)}; eager)", flush=True)
        torch.cuda.synchronize()
        return time_ms(fn, "cuda"), "*"


def ab():
    rows = {}
    for rnd in range(2):
        order = ROUTES if rnd == 0 else ROUTES[::-1]
        for n, b in SHAPES:
            for route in order:
                tag = f"ab round {rnd + 1} N={n} B={b} {route.name}"
                try:
                    route.set_table()
                    inp = make_inputs(n, b, route.window)
                    ms, mark = timed(call(route, inp))
                    tf = flops(route, n, b) / ms / 1e9
                    rows.setdefault((n, route.name), []).append((ms, tf))
                    print(f"{tag}: {ms:.3f}{mark} ms {tf:.0f} TFLOP/s (band)", flush=True)
                except Exception as exc:  # noqa: BLE001
                    print(f"{tag}: ERROR {short_error(exc)}", flush=True)
                del inp
                torch.cuda.empty_cache()
    print("\n| N | B | route | ms (r1 / r2) | band TFLOP/s (r1 / r2) | vs causal-fused | vs window-current |")
    print("|---|---|---|---|---|---|---|")
    for n, b in SHAPES:
        best = {name: max(tf for _, tf in rows[(n, name)]) for name in [r.name for r in ROUTES] if (n, name) in rows}
        for route in ROUTES:
            if (n, route.name) not in rows:
                continue
            r = rows[(n, route.name)]
            vc = f"{best[route.name] / best['causal-fused']:.2f}x" if "causal-fused" in best else "-"
            vw = f"{best[route.name] / best['window-current']:.2f}x" if "window-current" in best else "-"
            print(f"| {n} | {b} | {route.name} | {' / '.join(f'{ms:.3f}' for ms, _ in r)} | "
                  f"{' / '.join(f'{tf:.0f}' for _, tf in r)} | {vc} | {vw} |", flush=True)


def profile():
    """GPU time of each kernel of one 16k call of the two window routes."""
    n, b = SHAPES[0]
    for route in ROUTES[:2]:
        try:
            route.set_table()
            inp = make_inputs(n, b, route.window)
            ev = kernel_times_us(call(route, inp), top=6)
            print(f"profile N={n} {route.name}: " + "; ".join(f"{k[:60]} {t:.0f} us" for k, t in ev), flush=True)
        except Exception as exc:  # noqa: BLE001
            print(f"profile {route.name}: ERROR {short_error(exc)}", flush=True)


def main(argv):
    what = argv[1] if len(argv) > 1 else "all"
    t0 = time.time()
    if what in ("all", "check"):
        checks()
    if what in ("all", "ab"):
        ab()
    if what in ("all", "profile"):
        profile()
    policy.GLUON_BWD_FUSED_MIN_N["window"].clear()
    print(f"done in {time.time() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    main(sys.argv)
