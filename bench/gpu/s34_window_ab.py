"""Issue 3 (window (1024, 0) at 16k >= 0.85x causal, band FLOPs; 0.71-0.72x in s33/callB, callF):
STEP_LEAN, the routed window kernel's tile step given the plain PERSISTENT kernel's schedule (a
session-33 helper, offline, never run on a GPU; bench/wip/gluon-window-gap.md). Two kernel flags of the
PERSISTENT EARLY_Q forward, off by default, not routed (kernels/fwd_gluon.py QFREE_LATE / P32_CARRY;
launchers/forward_gluon.py qfree_late= / p32_carry=):
  - qlate: QFREE_LATE, EARLY_Q's q_free arrival once a block after the tile loops, not under a
    predicate in every tile step (its warpgroup BAR.SYNC, which ptxas put after the softmax, dragged
    the P V wait below the exponentials: session 27's PV_OVERLAP schedule, measured 1-3.4% slower
    on the plain kernel, and one BAR.SYNC a step more than the plain kernel);
  - p32: P32_CARRY, P carried between steps in fp32 and converted at the next P V (the bf16 P
    carried through the peel and three loops was 64 16-bit values: 64 PRMT a step; the plain
    kernel's single loop has none);
  - step: both (unmasked tile loop 458 / 453 SASS a warp against the routed 526 / 521 and the plain
    kernel's 452 / 451; diagonal 679 / 673 against 722 / 717; 112 B of spills outside the loops).

    PYTHONPATH=src python bench/gpu/s34_window_ab.py     # ~1.5-2 min, compiles included

What runs: bf16, D = 128, H = 16, 16k tokens (B = 16k / N), N = 4k and 16k (S34_N), window (1024, 0);
forward_gluon.prepare(...) kernel-only as CUDA-graph replays (bench.common.timing_rounds: two rounds,
the second in reverse order). Outputs first: each variant against float64 on batch 0 / head 0 and
bitwise against "routed" (a FAIL drops the variant). Row | N | B | band TFLOP/s (2 rounds) of routed |
qlate | p32 | step | causal | each vs causal (best) | each over routed (each round) |. Then (S34_CAL=0
skips) the plain PERSISTENT kernel at N = 1k / 2k / 4k in the same process (its per-block cost on the
critical CTA: 16 blocks of N / 128 tiles), and (S34_PROBE=0 skips) routed and step at windows 512 /
1024 / 2048 / 4096 (16k): F and t fitted on the CRITICAL CTA of the round-robin deal (16 blocks, 80 /
144 / 272 / 528 tiles), which is what the makespan follows, and on the mean CTA as s33/callB did (its
mean 135.3 tiles against the critical CTA's 144 at w = 1024, 448 against 528 at 4096, which inflated
its t = 1.84 us). A watchdog (faulthandler, S34_TIMEOUT s a case, default 45; the first twice that)
kills the process on a hang (QFREE_LATE moves the q_free arrival later in the block, the same one
arrival a block: no hang is expected).

PREDICTION (written before any run; the cost model in bench/wip/gluon-window-gap.md). Critical CTA:
16 blocks; routed (1024, 0) block 19.1-19.3 us for 9 tiles, plain 1k block 16.2 us for 8 (s24), plain
tile 1.60-1.64 us, window per-block cost F_w 4.5-5.4 us against plain's 3.0-3.4.
  - qlate: +0.5 to +3% (the early P V wait back, one BAR.SYNC fewer a step, q_free ~0.1-0.15 us later);
  - p32: 0 to +2% (64 PRMT a step fewer; 112-136 B of spills outside the loops, ~28 LDL / STL a block);
  - step: +1 to +4% at 16k and 4k: ~440-455 band TFLOP/s at 16k, 0.73-0.76x causal. NOT the 0.85x
    (~515): a plain-efficiency window block of 9 tiles is 3.0-3.4 + 9 x 1.62 = 17.6-18.0 us, i.e.
    ~465-475 TFLOP/s (0.77-0.78x) even with every step-level difference gone; the rest needs the
    per-block cost itself cut below the plain kernel's (or fewer computed tiles: 64-key edge steps).
  - calibration: plain 1k 515-545, 2k 580-600; per-block F_p 2.8-3.6 us, t_p 1.58-1.66 us.
  - probe (critical-CTA fit): routed t 1.45-1.65 us, F 4.3-5.6 us; step: t within 0.05 us of
    routed's, F 0.1-0.6 us lower, or t 0.02-0.08 us lower (if the step-level SASS cost is real).
  Wrong if: step < +0.5% at 16k in both rounds (the tile step's extra SASS and late P V wait cost
  nothing: the gap is all per block, i.e. the masked peel / diagonal and the block boundary) or step
  slower than routed by > 1% (the later q_free exposes the Q load more than the step saves).

ROUTING RULE: if step beats routed by >= 1.5% in both rounds at 16k and is not behind (> -1%) at 4k,
route it: fwd_into / policy tables for qfree_late and p32_carry ({128: 4096}, with EARLY_Q's), plans.clear().
If only qlate meets the rule (p32's spills cost), route qlate alone.
"""
from __future__ import annotations

import faulthandler
import os
import sys
import time
import traceback

os.environ.setdefault("FLASHTRITON_PLANS", "0")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

from flashtriton.bench.common import head0_fwd_check, same_outputs, short_error, timing_rounds  # noqa: E402
from flashtriton.launchers import forward_gluon  # noqa: E402
from s31_window_lean_mask_ab import D, H, WINDOW, band_flops, inputs  # noqa: E402

NS = [int(x) for x in os.environ.get("S34_N", "4096,16384").split(",")]
PROBE = os.environ.get("S34_PROBE", "1") != "0"
CAL = os.environ.get("S34_CAL", "1") != "0"
CASE_TIMEOUT = float(os.environ.get("S34_TIMEOUT", "45"))
ROUTED = dict(window=WINDOW, persistent=True, early_q=True, lean_mask=True)
VARIANTS = {
    "routed": ROUTED,
    "qlate": dict(ROUTED, qfree_late=True),
    "p32": dict(ROUTED, p32_carry=True),
    "step": dict(ROUTED, qfree_late=True, p32_carry=True),
    "causal": dict(causal=True),
}
LEVERS = ["qlate", "p32", "step"]
PROBE_WINDOWS = [(512, 0), (1024, 0), (2048, 0), (4096, 0)]
BLOCK, N_PROG = 128, 132


def loads(n, b, window, h=H):
    """Round-robin deal of the window's blocks (block i = pid_bh * n_m + pid_m to CTA i % N_PROG, the
    kernel's _tile_of without CAUSAL): (mean blocks, mean tiles, critical blocks, critical tiles), the
    critical CTA the one with the most tiles (n_load as _tile_coords computes it)."""
    left, right = window
    n_m = n // BLOCK
    n_tiles = n // BLOCK
    per_block = []
    for m in range(n_m):
        diag = m * BLOCK
        lo, hi = diag - left, diag + right
        t_lo = min(max(lo, 0) // BLOCK, n_tiles - 1)
        t_hi = min(-(-max(hi + BLOCK, 0) // BLOCK), n_tiles)
        per_block.append(max(t_hi - t_lo, 1))
    blocks = [0] * N_PROG
    tiles = [0] * N_PROG
    for i in range(n_m * b * h):
        blocks[i % N_PROG] += 1
        tiles[i % N_PROG] += per_block[i % n_m]
    c = max(range(N_PROG), key=lambda x: (tiles[x], blocks[x]))
    return sum(blocks) / N_PROG, sum(tiles) / N_PROG, blocks[c], tiles[c]


def check_and_prepare(q, k, v, scale, variants, label, ref_name=None, window_of=None):
    calls = {}
    outs = {}
    for name, kw in variants.items():
        print(f"{label} {name}: compiling / first run {time.strftime('%H:%M:%S')}", flush=True)
        try:
            call = forward_gluon.prepare(q, k, v, scale, **kw)
            outs[name] = tuple(t.clone() for t in call())
            torch.cuda.synchronize()
        except Exception as exc:  # noqa: BLE001
            print(f"{label} {name}: {short_error(exc)}", flush=True)
            traceback.print_exc()
            continue
        left, right = window_of(name) if window_of else (-1, -1)
        ok, text = head0_fwd_check(q, k, v, *outs[name], softmax_scale=scale, window_left=left, window_right=right)
        if ref_name and name != ref_name and name in LEVERS and ref_name in outs:
            same = same_outputs(outs[ref_name], outs[name])
            ok = ok and same == "bitwise"
            text += f"; vs {ref_name} {same}"
        print(f"{label} {name}: {'ok' if ok else 'FAIL'} {text}", flush=True)
        if ok:
            calls[name] = call
    return calls


def case(n, first):
    faulthandler.dump_traceback_later(CASE_TIMEOUT * (2 if first else 1), exit=True)
    q, k, v = inputs(n)
    b, scale = q.shape[0], D ** -0.5
    flops = {name: band_flops(b, n, *(WINDOW if name != "causal" else (n, 0))) for name in VARIANTS}
    calls = check_and_prepare(q, k, v, scale, VARIANTS, f"N={n}", "routed",
                              lambda name: WINDOW if name != "causal" else (-1, 0))
    tf = timing_rounds(calls, flops, f"N={n}")
    faulthandler.cancel_dump_traceback_later()
    best = {name: max(t) for name, t in tf.items() if t}
    cells = " | ".join(" / ".join(f"{x:.0f}" for x in tf.get(name, [])) or "-" for name in VARIANTS)
    vs_causal = " / ".join(f"{best[x] / best['causal']:.3f}x" if x in best and "causal" in best else "-"
                           for x in ["routed"] + LEVERS)
    gain = " | ".join(" / ".join(f"{a / r:.3f}x" for a, r in zip(tf[x], tf["routed"]))
                      if x in tf and "routed" in tf else "-" for x in LEVERS)
    print(f"| {n} | {b} | {cells} | {vs_causal} | {gain} |", flush=True)
    if "routed" in best:
        _, _, cb, ct = loads(n, b, WINDOW)
        for name in ["routed"] + LEVERS:
            if name in best:
                us = flops[name] / best[name] / 1e6
                print(f"N={n} {name}: {us:.1f} us, critical CTA {cb} blocks / {ct} tiles: "
                      f"{us / cb:.2f} us a block", flush=True)


def calibration():
    """The plain PERSISTENT kernel (the 1k route) at N = 1k / 2k / 4k, 16k tokens: per-block time on the
    critical CTA (2,048 blocks of N / 128 tiles, 16 on the critical CTA) and the (F, t) fit."""
    faulthandler.dump_traceback_later(2 * CASE_TIMEOUT, exit=True)
    calls, flops, nt = {}, {}, {}
    for n in (1024, 2048, 4096):
        q, k, v = inputs(n)
        b = q.shape[0]
        name = f"plain{n}"
        c = check_and_prepare(q, k, v, D ** -0.5, {name: dict(persistent=True)}, "cal")
        if c:
            calls.update(c)
            flops[name] = 4 * b * H * n * n * D
            blocks = b * H * (n // BLOCK)
            nt[name] = (-(-blocks // N_PROG), n // BLOCK)
    tf = timing_rounds(calls, flops, "cal")
    faulthandler.cancel_dump_traceback_later()
    rows = []
    for name, t in tf.items():
        if t:
            us = flops[name] / max(t) / 1e6
            cb, k = nt[name]
            rows.append((k, us / cb))
            print(f"cal {name}: best {max(t):.0f} TFLOP/s, {us:.1f} us, {us / cb:.2f} us a block of {k} tiles",
                  flush=True)
    if len(rows) >= 2:
        a = torch.tensor([[1.0, r[0]] for r in rows], dtype=torch.float64)
        y = torch.tensor([r[1] for r in rows], dtype=torch.float64)
        f, t = torch.linalg.lstsq(a, y[:, None]).solution[:, 0].tolist()
        print(f"cal fit plain (critical CTA): F_p = {f:.2f} us a block, t_p = {t:.3f} us a tile", flush=True)


def probe(n=16384):
    """F and t of routed and step from windows of ~5 .. 33 tiles a block (16k, B = 1)."""
    faulthandler.dump_traceback_later(2 * CASE_TIMEOUT, exit=True)
    q, k, v = inputs(n)
    b, scale = q.shape[0], D ** -0.5
    calls, flops, ld = {}, {}, {}
    for form in ("routed", "step"):
        for w in PROBE_WINDOWS:
            name = f"{form} w{w[0]}"
            try:
                calls[name] = forward_gluon.prepare(q, k, v, scale, **dict(VARIANTS[form], window=w))
                calls[name]()
                torch.cuda.synchronize()
            except Exception as exc:  # noqa: BLE001
                print(f"probe {name}: {short_error(exc)}", flush=True)
                calls.pop(name, None)
                continue
            flops[name] = band_flops(b, n, *w)
            ld[name] = loads(n, b, w)
    tf = timing_rounds(calls, flops, "probe")
    faulthandler.cancel_dump_traceback_later()
    for form in ("routed", "step"):
        for label, cols in (("critical CTA", (2, 3)), ("mean CTA (s33/callB's)", (0, 1))):
            rows = [(ld[x][cols[0]], ld[x][cols[1]], flops[x] / max(t) / 1e6) for x, t in tf.items()
                    if x.startswith(form + " ") and t]                               # (blocks, tiles, us)
            if len(rows) >= 2:
                a = torch.tensor([[r[0], r[1]] for r in rows], dtype=torch.float64)
                y = torch.tensor([r[2] for r in rows], dtype=torch.float64)
                f, t = torch.linalg.lstsq(a, y[:, None]).solution[:, 0].tolist()
                resid = (a @ torch.tensor([f, t], dtype=torch.float64) - y).abs().max().item()
                print(f"probe fit {form}, {label}: F = {f:.2f} us a block, t = {t:.3f} us a tile (max residual "
                      f"{resid:.1f} us); rows (blocks, tiles, us): "
                      + ", ".join(f"({r[0]:.2f}, {r[1]:.1f}, {r[2]:.1f})" for r in rows), flush=True)


def main():
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}", flush=True)
    for i, n in enumerate(NS):
        try:
            case(n, i == 0)
        except Exception as exc:  # noqa: BLE001
            print(f"N={n}: {short_error(exc)}", flush=True)
            traceback.print_exc()
        torch.cuda.empty_cache()
    print("table rows above: | N | B | band TFLOP/s (2 rounds) of " + " | ".join(VARIANTS) + " | "
          + " / ".join(["routed"] + LEVERS) + " vs causal (best) | " + " | ".join(LEVERS)
          + " over routed (each round) |", flush=True)
    for on, fn in ((CAL, calibration), (PROBE, probe)):
        if on:
            try:
                fn()
            except Exception as exc:  # noqa: BLE001
                print(f"{fn.__name__}: {short_error(exc)}", flush=True)
                traceback.print_exc()
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
