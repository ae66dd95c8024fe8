"""Session 29 (issue 4): the causal D = 256 backward at N = 512 / 1k, the last grid rows behind
SDPA FLASH_ATTENTION (FA2 CUDA): bwd.py's one-loop masked launches (kernels/bwd.py ONE_LOOP
without RESUME; launchers/backward.BWD_MASKED_ONE_LOOP, per kernel; written offline in session
29, never run yet) and two causal dK/dV tiles, against today's rows-first backward and FA2's.

    PYTHONPATH=src timeout 170 python bench/gpu/s29_d256_causal_bwd_ab.py   # ~60-110 s, compiles included
    (then: PYTHONPATH=src python -m pytest -q -m gpu tests/test_bwd_one_loop.py)

What runs: launchers.backward.bwd (at D = 256 always bwd.py: dQ with the delta folded in, then
dK/dV, rows-first grids), kernel-only (a CUDA-graph replay with do_bench's L2 flush:
bench.common.graph_time_ms; FLASHTRITON_PLANS=0 so that no plan keeps a launch across the
table flips), on out / lse of the library's forward; bf16, 16k tokens (B = 16384 / N), H = 8,
D = 256, causal, deterministic=False (the grid's flash_attn_func default). Variants:
  - rows:        today (BWD_MASKED_ONE_LOOP = {});
  - 1loop-dkdv:  {("dkdv", 256): 4096} (dK/dV in one loop, dQ as today);
  - 1loop-dq:    {("dq", 256): 4096};
  - 1loop:       both;
  - 1loop-64x64: both, and the causal dK/dV tile (64, 64, 8, 2) up to 1k (configs.DEFAULTS
                 ["dkdv_short_masked"][256]; today causal calls take "dkdv_short" (64, 32, 4, 2));
  - 1loop-64x32w8: both, and the causal dK/dV tile (64, 32, 8, 2) up to 1k;
  - FA2:         aten._scaled_dot_product_flash_attention_backward on the same q, k, v, dO
                 ((B, H, N, D) views, as the grid), with its own forward's out / lse.
At N = 2048 (the (128, 64, 8, 1) dK/dV tile; the short tiles do not apply) rows / 1loop /
FA2 only, to see where an entry of the table must stop. Two rounds, the second in reverse
order. First every variant's gradients on batch 0, head 0 against float64 (error <= 3x
PyTorch's bf16 error), and against rows (max relative difference). Last, a torch-profiler
breakdown (GPU us a kernel) of rows and 1loop at 512 and 1k, causal: the first causal split
of the D = 256 backward since rows first (session 28 profiled only non-causal).

Offline (bench/d256_causal_bwd_compile.py, sm_90a, 2026-12-01), causal, three loops -> one:
  dQ (128, 32, 8, 3): 255 -> 254 registers, no spill, 224 KB (1 an SM); loop bodies 255
      (fully visible) + 380 (masked) instructions -> one of 337.
  dK/dV (64, 32, 4, 2): 255 regs, spill 1596 -> 832 B, 101 KB (2 an SM); bodies 620 / 731 /
      694 -> 687 (spill ops an iteration 12+28 in the fully visible one, 19+50 in one loop);
      its 32-key dV / dK dots are HMMA (128 a warp an iteration) beside 32 HGMMA.
  dK/dV (64, 64, 8, 2): spill 1204 -> 540 B, 201 KB (1 an SM), all HGMMA (72 an iteration),
      one-loop body 848 instructions with 4 + 18 spill ops.
  dK/dV (64, 32, 8, 2): spill 172 -> 44 B, no spill op in the loop, 101 KB but 255 regs x 256
      threads: 1 an SM; 64 HGMMA + 64 HMMA a warp an iteration.
  dK/dV (128, 64, 8, 1) (2k): spill 2436 -> 1112 B.

The model behind the prediction (fitted to session 28's call 5 and session 23's profile):
a program's time = F + n x T (n tiles). dQ (1 an SM): non-causal 512 / 1k 284 / 438 us with
T = 1.28 us a 128 x 32 tile (its long-N 647 TFLOP/s) gives F ~ 16 us a program (the 1k
time predicted from 512's fit: 442 against 438); causal (40 tiles a head at 512, 144 at 1k
over 8 blocks) ~223 / ~303 us. dK/dV (2 an SM, 4096 programs, 15.5 waves): non-causal 565 /
935 -> F ~ 12.5 us, T ~ 3.0 us; causal (4.5 / 8.5 tiles a program) would then take ~403 /
~589 us, so the measured totals (696 / 1010) leave ~70 / ~118 us unexplained: ~1 us more a
causal tile, or ~5-8 us more a program (the one-iteration masked loop and the second
pipeline fill; the offline reading cannot tell which).

PREDICTION (written before any run). Kernel-only causal backward, us (FA2-count TFLOP/s):
  - profile, rows: 512 dK/dV ~470 (440-500) + dQ ~225 (210-240); 1k ~710 + ~300.
  - 1loop-dkdv: one fill a program instead of two (~0.75-1.5 us of SM time each, half
    hidden by the co-resident program) over 4096 programs / 264 slots, minus the mask on the
    fully visible tiles (+11% instructions off the tensor pipe): 512 -10 to -25 us (~680),
    1k -5 to -20 us (~995).
  - 1loop-dq: one fill saved in 768 of 1024 programs (~7 us) against +82 instructions a
    fully visible tile on the serialized softmax path (~4 us at 512, ~9 at 1k): level
    (+-1%) at both.
  - 1loop: 512 ~675 us (665-690; 127 TFLOP/s, 123 today), 1k ~990 (975-1005; 174).
    **Still behind FA2 at 512 (609 us, 141) and ~3-4% behind at 1k (952, 180)**: this change
    is the small lever; the per-program fixed cost above (~16 us a dQ program = ~40% of dQ at
    512; ~12 us a dK/dV program) is the large one.
  - 1loop-64x64: 0.95-1.05x 1loop (all wgmma and half the programs, but one an SM and its
    wgmma serialized; session 19 measured (64, 64, 8, 2) level or worse on the 2-D grid).
  - 1loop-64x32w8: 0.90-1.00x 1loop (no spill in its loop, but one program an SM: the fixed
    cost no longer overlaps a second program's tiles).
  - 2k ((128, 64, 8, 1): 1 masked 128-row tile, then up to 15 fully visible ones a program):
    1loop level (+-2%).
  Gradients: every variant within the f64 criterion; one loop against three within ~1e-2
  relative (bf16 rounding of a differently compiled body; bitwise under the interpreter).
Decision rule: an entry of BWD_MASKED_ONE_LOOP for a kernel goes in (at the longest N it
wins, 1024 or 2048) if it is >= 1.5% faster in both rounds; a causal tile goes into
configs.DEFAULTS["dkdv_short_masked"] only if >= 3% faster than 1loop in both rounds.
"""
import os
import sys
import time
import traceback

os.environ.setdefault("FLASHTRITON_PLANS", "0")       # (before flashtriton: no plan keeps a launch)

import torch  # noqa: E402

from flashtriton.bench.common import (attention_flops, graph_time_ms, head0_grad_check,  # noqa: E402
                                      head0_grad_refs, kernel_times_us, short_error)
from flashtriton.kernels import configs  # noqa: E402
from flashtriton.launchers import backward as lib_backward  # noqa: E402
from flashtriton.launchers import forward as lib_forward  # noqa: E402
from flashtriton.launchers.common import AttnParams  # noqa: E402

D, H, TOKENS, DTYPE = 256, 8, 16384, torch.bfloat16
SCALE = D ** -0.5
SEQLENS = [512, 1024, 2048]
BOTH = {("dkdv", 256): 4096, ("dq", 256): 4096}
VARIANTS = {   # name -> (BWD_MASKED_ONE_LOOP, causal dK/dV tile up to 1k or None)
    "rows": ({}, None),
    "1loop-dkdv": ({("dkdv", 256): 4096}, None),
    "1loop-dq": ({("dq", 256): 4096}, None),
    "1loop": (BOTH, None),
    "1loop-64x64": (BOTH, configs.Tile(64, 64, 8, 2)),
    "1loop-64x32w8": (BOTH, configs.Tile(64, 32, 8, 2)),
    "FA2": None,
}
LONG_VARIANTS = ("rows", "1loop", "FA2")            # at N > configs.SHORT_SEQLEN


def names_for(n: int):
    return [x for x in VARIANTS if n <= configs.SHORT_SEQLEN or x in LONG_VARIANTS]


def set_variant(name: str):
    """Sets the tables for an "ours" variant."""
    table, tile = VARIANTS[name]
    lib_backward.BWD_MASKED_ONE_LOOP.clear()
    lib_backward.BWD_MASKED_ONE_LOOP.update(table)
    configs.DEFAULTS.pop("dkdv_short_masked", None)
    if tile is not None:
        configs.DEFAULTS["dkdv_short_masked"] = {256: tile}


def make_inputs(n, seed=0):
    torch.manual_seed(seed)
    b = TOKENS // n
    q, k, v, dout = (torch.randn(b, n, H, D, device="cuda", dtype=DTYPE) for _ in range(4))
    params = AttnParams(SCALE, window_right=0, deterministic=False)
    out, lse = lib_forward.fwd(q, k, v, params)
    return dict(q=q, k=k, v=v, dout=dout, out=out, lse=lse, params=params, b=b, n=n)


def ours(inp):
    return lambda: lib_backward.bwd(inp["dout"], inp["q"], inp["k"], inp["v"], inp["out"], inp["lse"], inp["params"])


def fa2(inp):
    """FA2's backward alone, on (B, H, N, D) views; its own forward's out / lse."""
    qt, kt, vt, dot = (inp[x].transpose(1, 2) for x in ("q", "k", "v", "dout"))
    res = torch.ops.aten._scaled_dot_product_flash_attention(qt, kt, vt, 0.0, True, False, scale=SCALE)
    out, lse, cq, ck, mq, mk, seed, offset = res[:8]
    op = torch.ops.aten._scaled_dot_product_flash_attention_backward

    def run():
        dq, dk, dv = op(dot, qt, kt, vt, out, lse, cq, ck, mq, mk, 0.0, True, seed, offset, scale=SCALE)
        return dq.transpose(1, 2), dk.transpose(1, 2), dv.transpose(1, 2)
    return run


def call(name, inp):
    if name == "FA2":
        return fa2(inp)
    set_variant(name)
    return ours(inp)


def references(inp) -> tuple:
    """(float64, bf16) gradients of batch 0, head 0 by the reference (PyTorch autograd)."""
    kw = dict(softmax_scale=SCALE, window_left=-1, window_right=0)
    return head0_grad_refs(*(inp[x] for x in ("q", "k", "v", "dout")), **kw)


def rel_diff(a, b) -> float:
    return ((a.float() - b.float()).abs().max() / b.float().abs().max().clamp_min(1e-6)).item()


def checks():
    for n in SEQLENS:
        try:
            inp = make_inputs(n)
        except Exception as exc:  # noqa: BLE001
            print(f"check N={n}: inputs ERROR {short_error(exc)}", flush=True)
            continue
        grads, refs = {}, references(inp)
        for name in names_for(n):
            tag = f"check N={n} causal {name}"
            try:
                g = call(name, inp)()
                torch.cuda.synchronize()
                ok, text = head0_grad_check(g, refs)
                grads[name] = g
                vs = ""
                if name != "rows" and "rows" in grads:
                    vs = "; vs rows max rel " + " / ".join(f"{rel_diff(a, c):.1e}" for a, c in zip(g, grads["rows"]))
                print(f"{tag}: {'ok' if ok else 'FAILED'}; {text}{vs}", flush=True)
            except Exception as exc:  # noqa: BLE001  (reported, not fatal)
                print(f"{tag}: ERROR {short_error(exc)}", flush=True)
                traceback.print_exc(limit=3)
        del grads, refs, inp
        torch.cuda.empty_cache()


def ab():
    rows = {}
    for rnd in range(2):
        for n in SEQLENS:
            inp = make_inputs(n)
            flops = attention_flops(inp["b"], H, n, n, D, True, "bwd")
            order = names_for(n) if rnd == 0 else names_for(n)[::-1]
            for name in order:
                tag = f"ab round {rnd + 1} N={n} causal {name}"
                try:
                    ms = graph_time_ms(call(name, inp))
                    rows.setdefault((n, name), []).append(ms)
                    print(f"{tag}: {ms * 1000:.0f} us {flops / ms / 1e9:.0f} TFLOP/s", flush=True)
                except Exception as exc:  # noqa: BLE001
                    print(f"{tag}: ERROR {short_error(exc)}", flush=True)
            del inp
            torch.cuda.empty_cache()
    print("\n| N | variant | us (r1 / r2) | TFLOP/s (best) | vs rows | vs FA2 |")
    print("|---|---|---|---|---|---|")
    for n in SEQLENS:
        flops = attention_flops(TOKENS // n, H, n, n, D, True, "bwd")
        best = {name: min(rows[(n, name)]) for name in names_for(n) if (n, name) in rows}
        for name in names_for(n):
            if name not in best:
                continue
            vr = f"{best['rows'] / best[name]:.3f}x" if "rows" in best else "-"
            vf = f"{best['FA2'] / best[name]:.2f}x" if "FA2" in best else "-"
            r = rows[(n, name)]
            print(f"| {n} | {name} | {' / '.join(f'{ms * 1000:.0f}' for ms in r)} | "
                  f"{flops / best[name] / 1e9:.0f} | {vr} | {vf} |", flush=True)


def profile():
    """GPU us per kernel of one causal backward, rows against 1loop, at 512 and 1k."""
    for n in (512, 1024):
        inp = make_inputs(n)
        for name in ("rows", "1loop"):
            try:
                ev = kernel_times_us(call(name, inp), top=4)
                print(f"profile N={n} causal {name}: " + "; ".join(f"{k[:40]} {t:.0f} us" for k, t in ev),
                      flush=True)
            except Exception as exc:  # noqa: BLE001
                print(f"profile N={n} {name}: ERROR {short_error(exc)}", flush=True)
        del inp
        torch.cuda.empty_cache()


def main(argv):
    if not torch.cuda.is_available():
        print("needs a CUDA GPU")
        return 1
    t0 = time.time()
    print(f"{torch.cuda.get_device_name()} torch {torch.__version__}; BWD_MASKED_ONE_LOOP default "
          f"{dict(lib_backward.BWD_MASKED_ONE_LOOP)}; BWD_ROWS_FIRST {dict(lib_backward.BWD_ROWS_FIRST)}; "
          f"dkdv_short {configs.DEFAULTS['dkdv_short'][256]}", flush=True)
    default = (dict(lib_backward.BWD_MASKED_ONE_LOOP), configs.DEFAULTS.get("dkdv_short_masked"))
    try:
        if "--no-checks" not in argv:
            checks()
            print(f"[checks done at {time.time() - t0:.0f} s]", flush=True)
        ab()
        print(f"[A/B done at {time.time() - t0:.0f} s]", flush=True)
        if "--no-profile" not in argv:
            profile()
    finally:
        lib_backward.BWD_MASKED_ONE_LOOP.clear()
        lib_backward.BWD_MASKED_ONE_LOOP.update(default[0])
        configs.DEFAULTS.pop("dkdv_short_masked", None)
        if default[1] is not None:
            configs.DEFAULTS["dkdv_short_masked"] = default[1]
    print(f"[done in {time.time() - t0:.0f} s]", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
