"""Issue 3 (window (1024, 0) at 16k >= 0.85x causal, band FLOPs): the Gluon WINDOW forward's
LEAN_MASK variant (kernels/fwd_gluon.py _softmax_step_lean, a session-30 helper, offline, never
run; switch launchers.policy.GLUON_FWD_WINDOW_LEAN_MASK = {} = off) against the routed one-block
WINDOW kernel, LEAN_MASK on top of the PERSISTENT EARLY_Q kernel, and the library's causal
forward (Gluon CAUSAL one block a CTA, the route at 16k D = 128).

    PYTHONPATH=src timeout 300 python bench/gpu/s31_window_lean_mask_ab.py     # ~2-2.5 min, compiles included
    (then: PYTHONPATH=src python -m pytest -q -o addopts="" -m gpu tests/test_fwd_gluon_window_lean_mask.py)

What runs: bf16, D = 128, H = 16, 16k tokens (B = 16k / N), N = 4k and 16k (S31_N), window
(1024, 0); forward_gluon.prepare(...) kernel-only as CUDA-graph replays (bench.common.
graph_time_ms, L2 flushed): "one-block" (window, the route), "lean" (window, lean_mask=True),
"early-q-lean" (window, persistent=True, early_q=True, lean_mask=True), "causal" (causal=True).
First the outputs: each window variant on batch 0 / head 0 against float64 (error <= 2x torch's
bf16 error, lse too), and lean / early-q-lean against one-block over the whole tensor (expected
BITWISE: the same kept scores and the same arithmetic, only the mask's instructions differ). A
variant that fails is not timed. Two timing rounds, the second in reverse order. Window TFLOP/s
count only the band's FLOPs, causal the causal FLOPs; the ratio columns are band TFLOP/s over
causal TFLOP/s (issue 3's measure).

The lever (bench/wip/gluon-window-lean-mask.md): the window's masked tiles cost ~330 SASS
instructions a warp more than an unmasked one (820 / 852 against 522): a score there took an
FMUL (the scale, kept: bitwise), 2 ISETP and 2 FSEL (tl.where(a & b, x, -inf) became two nested
selects). LEAN_MASK: both edges as one predicate and one select (_window_select, inline PTX:
setp, setp.and, selp), and one compare only where one edge provably cannot cut: the right-edge
loop (tiles past n_left: every row's left bound is before them) and, one block a CTA, the peel
when every row of the half sees its last key (all blocks but the first at (1024, 0), a runtime
branch; the PERSISTENT kernels keep the both-edged peel: the second copy spilled there). D = 128
only (D = 64 spilled 8 bytes; not routed).
Offline (bench/gluon_fwd_compile.py, sm_90a, Triton 3.6.0), WINDOW D = 128 bf16 one block: tile
loops (left-masked / unmasked / diagonal) 756 / 522 / 718 and 755 / 521 / 715 against 820 / 522 /
852 and 819 / 519 / 849; the peel -62 (BOTH) / -126 (LEFT) a warp; 0 spills, no local memory,
setmaxnreg 240 / 240 / 24, 224 KB, 128 HGMMA; EARLY_Q loops 755 / 526 / 722 against 817 / 526 /
856, peel -62. At (1024, 0), 16k,
every block but each head's first: the peel (the left edge) and the diagonal tile are the two
masked steps a warp runs, -126 and -134: -260 instructions a warp a block of ~5,700 (~4.5% of
the consumers' issue; the left-edge LOOP runs no tile there, n_left = 1). Every variant without
LEAN_MASK: SASS byte-identical (all 71 of the table, bench/gluon_fwd_sass_hash.py).
early-q-lean: -196 a warp a block (the both-edged peel).

PREDICTION (written before any run). Session 29's fit (bench/NOTES.md, "Offline (a helper,
session 29): the window forward"): u = 1.75 us a block-tile, a masked tile 1.1-1.3 u, so the
2 masked steps a block cost 0.35-1.05 us over unmasked ones (2-5% of a ~19.7 us block, SM
time); the kernel is not issue-bound overall (~1,000-1,200 issue cycles an SMSP a tile against
2,048 of tensor), but the peel's softmax has nothing to overlap and the masked steps are the
longest ones. LEAN_MASK removes ~40% of the masked steps' extra instructions (260 of ~600 a
warp a block; per SMSP 2 consumer warps: ~520 issue cycles, ~0.28 us a block if all of it were
on the critical path).
  16k: lean 426-432 band TFLOP/s against one-block ~422 (+1-2%, 0.69-0.71x causal ~610);
       early-q-lean 427-434 (early-q's +0.7% and lean's add). Issue 3's 0.85x: NOT expected
       from this lever (the rest: ~11% of the loaded tiles' work is hidden scores of the two
       edge tiles, ~11-16% the per-block cost F, ~3% the wave tail).
  4k:  lean +1-2% as at 16k (the same 9-tile blocks; 8 lighter blocks of 32 a head).
  Outputs bitwise one-block's.
  What would show the analysis wrong: lean > +3% at 16k (the masked steps sit on the critical
  path beyond their issue share: then cut further, e.g. 64-key edge tiles, bench/wip md); lean
  level or slower (< +0.3%): the masked steps' extra instructions are already hidden under the
  tensor pipe, the masked tile's extra time (if any) is not issue; drop mask work and profile the
  block boundary (ncu) before another lever.
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
NS = [int(x) for x in os.environ.get("S31_N", "4096,16384").split(",")]
VARIANTS = {"one-block": dict(window=WINDOW), "lean": dict(window=WINDOW, lean_mask=True),
            "early-q-lean": dict(window=WINDOW, persistent=True, early_q=True, lean_mask=True)}


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
        if name in ("lean", "early-q-lean") and "one-block" in outs:
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
    gain = " / ".join(f"{best[x] / best['one-block']:.3f}x" if x in best and "one-block" in best else "-"
                      for x in ("lean", "early-q-lean"))
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
    print("table rows above: | N | B | one-block band TFLOP/s (2 rounds) | lean | early-q-lean | causal | "
          "one-block / lean / early-q-lean vs causal (best) | lean / early-q-lean over one-block |", flush=True)


if __name__ == "__main__":
    main()
