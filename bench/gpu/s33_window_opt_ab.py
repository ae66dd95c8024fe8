"""Issue 3 (window (1024, 0) at 16k >= 0.85x causal, band FLOPs; 0.70-0.74x in sessions 31-32): the
routed WINDOW forward (PERSISTENT EARLY_Q LEAN_MASK, the kernel's round-robin deal of blocks)
against two levers of a session-33 helper (offline; bench/wip/gluon-window-opt.md; kernels/
fwd_gluon.py WINDOW_DEAL and SPLIT_Q), alone and together, and the causal kernel: the blocks dealt
by the host, longest first (SCHEDULED with WINDOW: launchers/schedule.py window_schedule), and
SPLIT_Q (a Q barrier pair a consumer: the two Q halves load apart); then a probe of the per-block
fixed cost F (the SCHEDULED kernel at windows of 5, 9, 17, 33 key tiles a block).

    PYTHONPATH=src timeout 200 python bench/gpu/s33_window_opt_ab.py     # ~1.5 min, compiles included

What runs: bf16, D = 128, H = 16, 16k tokens (B = 16k / N), N = 4k and 16k (S33_N), window (1024, 0);
forward_gluon.prepare(...) kernel-only as CUDA-graph replays (bench.common.graph_or_eager_ms, L2
flushed): "routed" (window, persistent, early_q, lean_mask: the route from 4k), "sched" (routed +
scheduled=True, bands of schedule.WINDOW_SCHED_BAND = 8 batch x heads), "sched-b16" (bands of 16),
"split-q" (routed + split_q=True), "sched-split-q" (both), "causal". Outputs first: each against
float64 on batch 0 / head 0 (error <= 2x torch's bf16 error, lse too) and every lever bitwise
against routed (each block's arithmetic is unchanged: a mismatch is a bug; a hang of SPLIT_Q's
barriers shows as the timeout). Two timing rounds, the second reversed; band TFLOP/s, the ratio to the causal
kernel's TFLOP/s (issue 3's measure) and each lever over routed (round by round). F probe (16k only, S33_PROBE=0 skips it):
"sched" at windows (512, 0), (1024, 0), (2048, 0), (4096, 0), two rounds; a least-squares fit of
T = (blocks a CTA) * F + (key tiles a CTA) * t over the deal's mean loads (the LPT deal is within
~1% of the mean) gives F (us a block) and t (us a 128 x 128 block-tile).

Offline (bench/gluon_fwd_compile.py, sm_90a): SCHEDULED and / or SPLIT_Q with WINDOW EARLY_Q LEAN_MASK,
D = 128 bf16 / fp16: 0 spills, no local memory, 224 KB shared memory (229,760 / 229,768 B of 232,448),
128 HGMMA, setmaxnreg 240 / 240 / 24, tile loops 755 / 526 / 722 and 756 / 521 / 717 (routed: 755 /
526 / 722, 755 / 521 / 717); all earlier variants' SASS byte-identical (bench/gluon_fwd_sass_hash.py).

MODEL AND PREDICTION (written before any run; bench/wip/gluon-window-opt.md has the derivation).
At (1024, 0) with 128 x 128 tiles each sequence's blocks 0..7 load 1..8 key tiles, the rest 9. The
kernel's round robin (block i -> CTA i % 132) gives 60 CTAs 16 full blocks (144 tiles) at 16k (B = 1,
2048 blocks) against a mean of 135.3 tiles and 15.5 blocks; the kernel time is that CTA's. With a
block costing n t + F (F ~1-2 t), the round robin's makespan is 6.0% (16k) / 7.2% (4k) above the mean;
the LPT deal (bands of 8) is within 1% of it: 168 -> 160 tile units at 16k, 156 -> 148 at 4k
(F = 1.5 t). Prediction, sched over routed: **+3 to +6% at 16k and at 4k** (band TFLOP/s ~455-470 at
16k against 443 / 423 in session 32, 0.73-0.76x causal; 4k ~445-460). Not the 0.85x by itself: the
rest is the per-block fixed cost F (~2.2-3.7 us a block by the session-32 numbers, 12-20% of a
block's ~19 us: the serial boundary chain, last P V -> epilogue -> S_0 -> the peel's softmax, the
next Q's DRAM latency, 2 masked steps of 9) and the 11% of scores computed hidden in the two edge
tiles. sched-b16 level with sched (+-1%). split-q: 0 to +3% over routed, and the same on top of
sched (it removes the forced same-phase restart of the two consumers at a block boundary when the
next Q's load is late: <= ~0.5 us a block of the 1.5-3.4). F probe: F 1.5-3.5 us, t 1.65-1.95 us.
Wrong if: sched < +2% at 16k (the imbalance costs less than the model says: then F is smaller than
~1 t, or the round robin's K / V order in the L2 was worth more than the balance; compare sched-b16
and the probe's F); sched > +8% (the deal also changed L2 behaviour for the better).
Routing rule: policy.GLUON_FWD_WINDOW_SCHEDULED = {128: 4096} if sched beats routed by >= 2% in both
rounds at 16k and is not behind at 4k (schedule.WINDOW_SCHED_BAND = 16 instead if sched-b16 beats
sched by >= 1% in both rounds at both N); policy.GLUON_FWD_WINDOW_SPLIT_Q = {128: 4096} if split-q
beats routed AND sched-split-q beats sched by >= 1% in both rounds at 16k, not behind at 4k; then tests/test_fwd_gluon_window_opt.py's switch test
asserts the table, the features' window row (python -m flashtriton.bench.features --cases window).
Before routing, the schedule's first build of a shape must not fall inside a CUDA-graph capture (a
pageable host-to-device copy; as causal_schedule).
"""
from __future__ import annotations

import os
import time
import traceback

os.environ.setdefault("FLASHTRITON_PLANS", "0")

import torch  # noqa: E402

from flashtriton.bench.common import head0_fwd_check, same_outputs, short_error, timing_rounds  # noqa: E402
from flashtriton.launchers import forward_gluon, schedule  # noqa: E402
from s31_window_lean_mask_ab import D, WINDOW, band_flops, inputs  # noqa: E402

NS = [int(x) for x in os.environ.get("S33_N", "4096,16384").split(",")]
PROBE = os.environ.get("S33_PROBE", "1") != "0"
ROUTED = dict(window=WINDOW, persistent=True, early_q=True, lean_mask=True)
VARIANTS = {
    "routed": ROUTED,
    "sched": dict(ROUTED, scheduled=True),
    "sched-b16": dict(ROUTED, scheduled=True, band=16),
    "split-q": dict(ROUTED, split_q=True),
    "sched-split-q": dict(ROUTED, scheduled=True, split_q=True),
    "causal": dict(causal=True),
}
LEVERS = [x for x in VARIANTS if x not in ("routed", "causal")]
PROBE_WINDOWS = [(512, 0), (1024, 0), (2048, 0), (4096, 0)]


def deal_loads(n, b, window, band=schedule.WINDOW_SCHED_BAND, n_prog=132):
    """(mean blocks, mean key tiles a CTA, LPT makespan / round robin makespan in units of t with
    F = 1.5 t) of the window's blocks (schedule.window_tiles: the kernel's n_load)."""
    n_m, n_bh = n // 128, b * 16
    tiles = [schedule.window_tiles(m, n, n, 128, 128, *window) for m in range(n_m)]
    costs = [x + schedule.BLOCK_OVERHEAD_TILES for x in tiles]
    lpt = schedule.makespan(schedule.lpt_deal(costs, n_bh, n_prog, min(band, n_bh)), costs, n_m)
    rr = max(sum(costs[t % n_m] for t in range(p, n_m * n_bh, n_prog)) for p in range(n_prog))
    return n_m * n_bh / n_prog, sum(tiles) * n_bh / n_prog, lpt / rr


def case(n):
    q, k, v = inputs(n)
    b, scale = q.shape[0], D ** -0.5
    mb, mt, ratio = deal_loads(n, b, WINDOW)
    print(f"N={n}: a CTA's mean {mb:.2f} blocks / {mt:.1f} tiles; offline LPT / round-robin makespan {ratio:.3f}",
          flush=True)
    flops = {name: band_flops(b, n, *(WINDOW if name != "causal" else (n, 0))) for name in VARIANTS}
    calls, outs = {}, {}
    for name, kw in VARIANTS.items():
        print(f"N={n} {name}: compiling / first run {time.strftime('%H:%M:%S')}", flush=True)
        try:
            call = forward_gluon.prepare(q, k, v, scale, **kw)
            outs[name] = tuple(t.clone() for t in call())
            torch.cuda.synchronize()
        except Exception as exc:  # noqa: BLE001
            print(f"N={n} {name}: {short_error(exc)}", flush=True)
            traceback.print_exc()
            continue
        left, right = WINDOW if name != "causal" else (-1, 0)
        ok, text = head0_fwd_check(q, k, v, *outs[name], softmax_scale=scale, window_left=left, window_right=right)
        if name in LEVERS and "routed" in outs:
            same = same_outputs(outs["routed"], outs[name])
            ok = ok and same == "bitwise"
            text += f"; vs routed {same}"
        print(f"N={n} {name}: {'ok' if ok else 'FAIL'} {text}", flush=True)
        if ok:
            calls[name] = call
    del outs
    tf = timing_rounds(calls, flops, f"N={n}")
    best = {name: max(t) for name, t in tf.items()}
    cells = " | ".join(" / ".join(f"{x:.0f}" for x in tf.get(name, [])) or "-" for name in VARIANTS)
    vs_causal = " / ".join(f"{best[x] / best['causal']:.3f}x" if x in best and "causal" in best else "-"
                           for x in ["routed"] + LEVERS)
    gain = " | ".join(" / ".join(f"{a / r:.3f}x" for a, r in zip(tf[x], tf["routed"]))
                      if x in tf and "routed" in tf else "-" for x in LEVERS)
    print(f"| {n} | {b} | {cells} | {vs_causal} | {gain} |", flush=True)


def probe(n=16384):
    """F and t from the SCHEDULED kernel at windows of 5 .. 33 tiles a block (16k, B = 1)."""
    q, k, v = inputs(n)
    b, scale = q.shape[0], D ** -0.5
    calls, flops, loads = {}, {}, {}
    for w in PROBE_WINDOWS:
        name = f"w{w[0]}"
        try:
            calls[name] = forward_gluon.prepare(q, k, v, scale, window=w, persistent=True, early_q=True,
                                                lean_mask=True, scheduled=True)
            calls[name]()
            torch.cuda.synchronize()
        except Exception as exc:  # noqa: BLE001
            print(f"probe {name}: {short_error(exc)}", flush=True)
            calls.pop(name, None)
            continue
        flops[name] = band_flops(b, n, *w)
        loads[name] = deal_loads(n, b, w)[:2]
    tf = timing_rounds(calls, flops, "probe")
    rows = [(loads[x][0], loads[x][1], flops[x] / max(t) / 1e9 * 1e3) for x, t in tf.items()]   # (blocks, tiles, us)
    if len(rows) >= 2:
        a = torch.tensor([[r[0], r[1]] for r in rows], dtype=torch.float64)
        y = torch.tensor([r[2] for r in rows], dtype=torch.float64)
        f, t = torch.linalg.lstsq(a, y[:, None]).solution[:, 0].tolist()
        resid = (a @ torch.tensor([f, t], dtype=torch.float64) - y).abs().max().item()
        print(f"probe fit (best of two rounds): F = {f:.2f} us a block, t = {t:.3f} us a block-tile "
              f"(max residual {resid:.1f} us); rows (blocks, tiles, us): "
              + ", ".join(f"({r[0]:.2f}, {r[1]:.1f}, {r[2]:.1f})" for r in rows), flush=True)


def main():
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}", flush=True)
    for n in NS:
        try:
            case(n)
        except Exception as exc:  # noqa: BLE001
            print(f"N={n}: {short_error(exc)}", flush=True)
            traceback.print_exc()
        torch.cuda.empty_cache()
    print("table rows above: | N | B | band TFLOP/s (2 rounds) of " + " | ".join(VARIANTS) + " | "
          + " / ".join(["routed"] + LEVERS) + " vs causal (best) | " + " | ".join(LEVERS)
          + " over routed (each round) |", flush=True)
    if PROBE:
        try:
            probe()
        except Exception as exc:  # noqa: BLE001
            print(f"probe: {short_error(exc)}", flush=True)
            traceback.print_exc()


if __name__ == "__main__":
    main()
