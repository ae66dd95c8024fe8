"""Issue 3 (window (1024, 0) at 16k >= 0.85x causal, band FLOPs; 0.72x in s33/callB): WINDOW_F, the
per-block fixed cost F of the routed window kernel (PERSISTENT EARLY_Q LEAN_MASK). s33/callB's probe
fitted a block of k key tiles at F + k t, F = 3.71 us, t = 1.84 us (16k, windows 512-4096): at
(1024, 0) a block is ~8.7 tiles, F ~19% of its ~19.7 us. Two kernel flags, off by default
(kernels/fwd_gluon.py WINDOW_F; launchers/forward_gluon.py epi_defer / q_prefetch; a session-33
helper, offline, never run on a GPU):
  - defer: EPI_DEFER, a block's epilogue (acc / l, lse, O and lse stores) runs under the next
    block's S_0 wgmma instead of between its last P V and that S_0 (the scores tied to it by an
    exact S + (-0.0));
  - qpf: Q_PREFETCH, the loader prefetches the CTA's next block's Q rows into the L2 a whole block
    ahead, so that the next Q's TMA load (issued at EARLY_Q's q_free, ~1 us before the peel needs
    it) hits the L2 instead of DRAM;
  - both: the two.

    PYTHONPATH=src python bench/gpu/s33_window_f_ab.py     # ~1-1.5 min, compiles included (< 120 s)

What runs: bf16, D = 128, H = 16, 16k tokens (B = 16k / N), N = 4k and 16k (S33F_N), window
(1024, 0); forward_gluon.prepare(...) kernel-only as CUDA-graph replays (bench.common.timing_rounds:
two rounds, the second in reverse order, L2 flushed). Outputs first: each variant against float64 on
batch 0 / head 0 (head0_fwd_check) and bitwise against "routed" (a FAIL drops the variant from the
timing). Then the Markdown row | N | B | band TFLOP/s (2 rounds) of routed | defer | qpf | both |
causal | each vs causal (best) | each over routed (each round) |, and at 16k a probe of F (routed
and both at windows 512 / 1024 / 2048 / 4096: F and t fitted as in s33/callB; S33F_PROBE=0 skips).
A watchdog (faulthandler.dump_traceback_later, S33F_TIMEOUT s a case, default 45; the first case
twice that for the compiles) kills the process on a hang (an mbarrier phase fault hangs the GPU;
EPI_DEFER and Q_PREFETCH add no barrier and move none, so none is expected).

PREDICTION (written before any run). Block time at (1024, 0), 16k: 3.71 + 8.7 x 1.84 = 19.7 us.
  - qpf: Q is read once per block (64 MB at 16k x 16 heads, beyond the 50 MB L2), so its TMA load
    comes from DRAM: ~1.0-1.3 us under this load (32 KB, two 16 KB boxes), ~0.5-0.6 us from the L2.
    The consumers need it ~1.0-1.25 us after q_free (last softmax ~0.45 + last P V 0.3-0.55, both
    consumers' wgmmas queued + epilogue ~0.25 us): from DRAM 0-0.3 us exposed, and when it is late
    both consumers restart the block in phase (both peels' softmax with the tensor pipe idle,
    ~0.5 us). Saving 0.2-0.8 us of F: +1 to +4% at 16k, the same at 4k (same blocks, same F).
  - defer: the epilogue (~378 SASS instructions a warp: ~0.4 us of issue with both consumers'
    warps on an SMSP) under S_0 (512 tensor cycles a consumer, ~0.3-0.55 us with both queued),
    minus the tie (~130 instructions a block and warp, ~0.07 us) and 9 LDL a block (72 bytes of
    scalar spills, none in the tile loops): +1 to +2% (the epilogue's arithmetic overlaps S_0 in
    the offline SASS; its stores still follow the peel's softmax, where ptxas put them).
  - both: +2 to +6% over routed: ~445-465 band TFLOP/s at 16k, 0.74-0.78x causal (causal ~600).
    NOT the 0.85x: that needs ~510-530, i.e. F down to ~1 us and t to causal's 1.72 us, which
    these two cannot give (the remaining boundary cost is the last P V's latency, the S_0 latency
    and the peel's softmax with nothing of its own consumer under them; the next levers are in
    bench/wip/gluon-window-f.md).
  - probe: F (both) 0.5-1.2 us under routed's (routed ~3.5-3.9 us again); t unchanged (+-0.05 us).
  Wrong if: qpf < +1% at 16k (Q's latency is not exposed: F lies in the restart and the peel, not
  in Q; then the cross-block overlap of S_0 with the last P V is the lever) or qpf > +6% (the L2
  was worse than modelled); defer slower than routed by > 1% (the spread S_0 issue or the tie's
  extra instructions cost more than the overlap gives).

ROUTING RULE: GLUON_FWD_WINDOW_Q_PREFETCH = {128: 4096} if qpf beats routed by >= 1.5% in both
rounds at 16k and is not behind (> -1%) in either round at 4k; GLUON_FWD_WINDOW_EPI_DEFER =
{128: 4096} if both beats qpf (or, qpf not routed, defer beats routed) by >= 1% in both rounds at
16k and is not behind at 4k. Then flip tests/test_fwd_gluon_window_f.py::test_window_f_switches_off,
plans.clear(), and rerun the features' window row (python -m flashtriton.bench.features --cases
window).
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
from s31_window_lean_mask_ab import D, WINDOW, band_flops, inputs  # noqa: E402

NS = [int(x) for x in os.environ.get("S33F_N", "4096,16384").split(",")]
PROBE = os.environ.get("S33F_PROBE", "1") != "0"
CASE_TIMEOUT = float(os.environ.get("S33F_TIMEOUT", "45"))
ROUTED = dict(window=WINDOW, persistent=True, early_q=True, lean_mask=True)
VARIANTS = {
    "routed": ROUTED,
    "defer": dict(ROUTED, epi_defer=True),
    "qpf": dict(ROUTED, q_prefetch=True),
    "both": dict(ROUTED, epi_defer=True, q_prefetch=True),
    "causal": dict(causal=True),
}
LEVERS = ["defer", "qpf", "both"]
PROBE_WINDOWS = [(512, 0), (1024, 0), (2048, 0), (4096, 0)]
BLOCK, N_PROG = 128, 132


def mean_loads(n, b, window, h=16):
    """(mean blocks, mean key tiles a CTA) of the window's blocks over N_PROG CTAs (Nq = Nk = n;
    n_load as kernels/fwd_gluon.py _tile_coords computes it)."""
    left, right = window
    n_tiles = n // BLOCK
    tiles = 0
    for m in range(n // BLOCK):
        diag = m * BLOCK
        lo, hi = diag - left, diag + right
        t_lo = min(max(lo, 0) // BLOCK, n_tiles - 1)
        t_hi = min(-(-max(hi + BLOCK, 0) // BLOCK), n_tiles)
        tiles += max(t_hi - t_lo, 1)
    return (n // BLOCK) * b * h / N_PROG, tiles * b * h / N_PROG


def case(n, first):
    faulthandler.dump_traceback_later(CASE_TIMEOUT * (2 if first else 1), exit=True)
    q, k, v = inputs(n)
    b, scale = q.shape[0], D ** -0.5
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
    faulthandler.cancel_dump_traceback_later()
    best = {name: max(t) for name, t in tf.items()}
    cells = " | ".join(" / ".join(f"{x:.0f}" for x in tf.get(name, [])) or "-" for name in VARIANTS)
    vs_causal = " / ".join(f"{best[x] / best['causal']:.3f}x" if x in best and "causal" in best else "-"
                           for x in ["routed"] + LEVERS)
    gain = " | ".join(" / ".join(f"{a / r:.3f}x" for a, r in zip(tf[x], tf["routed"]))
                      if x in tf and "routed" in tf else "-" for x in LEVERS)
    print(f"| {n} | {b} | {cells} | {vs_causal} | {gain} |", flush=True)


def probe(n=16384):
    """F and t of routed and both from windows of ~5 .. 33 tiles a block (16k, B = 1), as s33/callB."""
    faulthandler.dump_traceback_later(2 * CASE_TIMEOUT, exit=True)
    q, k, v = inputs(n)
    b, scale = q.shape[0], D ** -0.5
    calls, flops, loads = {}, {}, {}
    for form in ("routed", "both"):
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
            loads[name] = mean_loads(n, b, w)
    tf = timing_rounds(calls, flops, "probe")
    faulthandler.cancel_dump_traceback_later()
    for form in ("routed", "both"):
        rows = [(loads[x][0], loads[x][1], flops[x] / max(t) / 1e9 * 1e3) for x, t in tf.items()
                if x.startswith(form + " ")]                                       # (blocks, tiles, us)
        if len(rows) >= 2:
            a = torch.tensor([[r[0], r[1]] for r in rows], dtype=torch.float64)
            y = torch.tensor([r[2] for r in rows], dtype=torch.float64)
            f, t = torch.linalg.lstsq(a, y[:, None]).solution[:, 0].tolist()
            resid = (a @ torch.tensor([f, t], dtype=torch.float64) - y).abs().max().item()
            print(f"probe fit {form} (best of two rounds): F = {f:.2f} us a block, t = {t:.3f} us a block-tile "
                  f"(max residual {resid:.1f} us); rows (blocks, tiles, us): "
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
    if PROBE:
        try:
            probe()
        except Exception as exc:  # noqa: BLE001
            print(f"probe: {short_error(exc)}", flush=True)
            traceback.print_exc()


if __name__ == "__main__":
    main()
