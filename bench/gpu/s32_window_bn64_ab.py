"""Issue 3 (window (1024, 0) at 16k >= 0.85x causal, band FLOPs; 0.744x in session 31): the Gluon
WINDOW forward with 64-key tiles (block_n=64, 4 stages; GPU-tested in tests/test_fwd_gluon.py::
test_window_configs_gpu, never timed) against the routed form (128-key tiles, PERSISTENT EARLY_Q +
LEAN_MASK from 4k) and the causal kernel. No new kernel code: prepare(..., block_n=64).

    PYTHONPATH=src timeout 200 python bench/gpu/s32_window_bn64_ab.py     # ~1.5-2 min, compiles included

What runs: bf16, D = 128, H = 16, 16k tokens (B = 16k / N), N = 4k and 16k (S32_N), window
(1024, 0); forward_gluon.prepare(...) kernel-only as CUDA-graph replays (bench.common.
graph_or_eager_ms, L2 flushed): "routed" (window, persistent, early_q, lean_mask: 128-key tiles),
"bn64" (window, block_n=64, 4 stages, one block a CTA), "bn64-eq-lean" (bn64 with persistent,
early_q, lean_mask), "causal". Outputs first: each against float64 on batch 0 / head 0 (error
<= 2x torch's bf16 error, lse too); 64-key tiles change the summation order, so no bitwise check
against the routed form. Two timing rounds, the second reversed; band TFLOP/s and the ratio to
the causal kernel's TFLOP/s (issue 3's measure).

Offline (bench/gluon_fwd_compile.compile_fwd, sm_90a, session 31): bn64 and bn64-eq-lean compile
with 0 spills, 164 KB of shared memory, 96 HGMMA, setmaxnreg 240 / 240 / 24 (routed: 224 KB, 128).

PREDICTION (written before any run; bench/NOTES.md "Next GPU session (32)", item 2). A 64-row
warpgroup's band at (1024, 0) is [r0 - 1024, r0 + 63]: with 128-key tiles it loads 1,152 keys
for 1,024.5 useful (89%), two of its 9 tiles masked; with 64-key tiles 1,088 (94%), two of 17
tiles masked, each half as wide. In units of a 128-key unmasked tile and a masked one at ~1.3:
(7 + 2 x 1.3) = 9.6 for 8 useful (0.833) against (15 + 2 x 1.3) / 2 = 8.8 (0.909), times the
64-key tiles' own efficiency, ~0.94 of 128-key ones (session 23: BLOCK_N 64 at 4 stages read
548-573 TFLOP/s against 581-613 for 128 at 8k / 16k, plain D = 128): 0.909 x 0.94 / 0.833 =
+2.6%, range -2 to +6% for bn64-eq-lean over routed at 16k, ~level at 4k. Not the 0.85x by
itself (0.744 x 1.026 = 0.76). Routing rule: GLUON_FWD_WINDOW_BLOCK_N (a new table) only if
bn64-eq-lean beats routed by >= 2% in both rounds at 16k and is not behind at 4k; EARLY_Q and
LEAN_MASK at BLOCK_N 64 then need their own GPU tests (they have run at 128 only).
"""
from __future__ import annotations

import os
import time
import traceback

os.environ.setdefault("FLASHTRITON_PLANS", "0")

import torch  # noqa: E402

from flashtriton.bench.common import head0_fwd_check, short_error, timing_rounds  # noqa: E402
from flashtriton.launchers import forward_gluon  # noqa: E402
from s31_window_lean_mask_ab import D, WINDOW, band_flops, inputs  # noqa: E402

NS = [int(x) for x in os.environ.get("S32_N", "4096,16384").split(",")]
VARIANTS = {
    "routed": dict(window=WINDOW, persistent=True, early_q=True, lean_mask=True),
    "bn64": dict(window=WINDOW, block_n=64, num_stages=4),
    "bn64-eq-lean": dict(window=WINDOW, block_n=64, num_stages=4, persistent=True, early_q=True, lean_mask=True),
    "causal": dict(causal=True),
}


def case(n):
    q, k, v = inputs(n)
    b, scale = q.shape[0], D ** -0.5
    flops = {name: band_flops(b, n, *(WINDOW if name != "causal" else (n, 0))) for name in VARIANTS}
    calls = {}
    for name, kw in VARIANTS.items():
        print(f"N={n} {name}: compiling / first run {time.strftime('%H:%M:%S')}", flush=True)
        try:
            call = forward_gluon.prepare(q, k, v, scale, **kw)
            o, lse = (t.clone() for t in call())
            torch.cuda.synchronize()
        except Exception as exc:  # noqa: BLE001
            print(f"N={n} {name}: {short_error(exc)}", flush=True)
            traceback.print_exc()
            continue
        left, right = WINDOW if name != "causal" else (-1, 0)
        ok, text = head0_fwd_check(q, k, v, o, lse, softmax_scale=scale, window_left=left, window_right=right)
        print(f"N={n} {name}: {'ok' if ok else 'FAIL'} {text}", flush=True)
        if ok:
            calls[name] = call
    tf = timing_rounds(calls, flops, f"N={n}")
    best = {name: max(t) for name, t in tf.items()}
    cells = " | ".join(" / ".join(f"{x:.0f}" for x in tf.get(name, [])) or "-" for name in VARIANTS)
    vs_causal = " / ".join(f"{best[x] / best['causal']:.3f}x" if x in best and "causal" in best else "-"
                           for x in ("routed", "bn64", "bn64-eq-lean"))
    gain = " / ".join(f"{best[x] / best['routed']:.3f}x" if x in best and "routed" in best else "-"
                      for x in ("bn64", "bn64-eq-lean"))
    print(f"| {n} | {b} | {cells} | {vs_causal} | {gain} |", flush=True)


def main():
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}", flush=True)
    for n in NS:
        try:
            case(n)
        except Exception as exc:  # noqa: BLE001
            print(f"N={n}: {short_error(exc)}", flush=True)
            traceback.print_exc()
        torch.cuda.empty_cache()
    print("table rows above: | N | B | routed band TFLOP/s (2 rounds) | bn64 | bn64-eq-lean | causal | "
          "routed / bn64 / bn64-eq-lean vs causal (best) | bn64 / bn64-eq-lean over routed |", flush=True)


if __name__ == "__main__":
    main()
