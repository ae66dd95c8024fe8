"""Session 30: the fused Gluon backward's WIDE tile at D = 64 (kernels/bwd_gluon_fused.py
FUSED_WIDE_CONFIG: BLOCK_M = 128 query rows a ring tile instead of 64, 2 stages, dq_accum at a
128-byte swizzle; written and compiled offline in session 29/30 by a helper, never run; not
routed: policy.GLUON_BWD_FUSED_WIDE empty) against the 64-row fused kernel ("old") and cuDNN
(SDPA CUDNN_ATTENTION's backward through aten: autograd of the SDPA output), for issue 4
(backward >= 1.0x cuDNN at D = 64 from 2k; session 29: 0.88-0.94x).

    PYTHONPATH=src timeout 400 python bench/gpu/s30_fused_bwd_d64_ab.py          # checks + A/B, ~3-5 min
    PYTHONPATH=src python bench/gpu/s30_fused_bwd_d64_ab.py checks                # only the correctness part
    (then: PYTHONPATH=src python -m pytest -q -o addopts="" -m gpu tests/test_bwd_gluon_wide.py)

What runs: launchers.backward.bwd (the library's whole backward: delta preprocess, zero,
fused kernel, cast), the fused route forced at every N (policy.GLUON_BWD_FUSED_MIN_N[kind][64]
= 0: the 2k / 4k non-causal rows today take bwd_ws.py, 367 / 377 TFLOP/s in session 29),
"old" = the WIDE table empty, "wide" = GLUON_BWD_FUSED_WIDE[kind] = {64} (a spy on
backward_gluon._run_fused checks which BLOCK_M launched). D = 64, bf16, H = 32, 16k tokens (B =
16k / N), N = 2k / 4k / 8k / 16k, causal and not, deterministic=False, CUDA-graph replays
(bench.common.graph_time_ms, L2 flushed; eager where capture fails, marked *), two rounds, the
second in reverse order. First the checks: batch 0 / head 0 of each variant against float64
(<= 3x PyTorch's bf16 error, dq / dk / dv), finite everywhere, and wide against old over the
whole tensors (dk / dv expected BITWISE under causal; non-causal differs only by ROTATE's start
tile, i.e. the order of the fp32 sums over query tiles: printed, not required). A variant
that fails its check is not timed. TFLOP/s by attention_flops(..., backward) (2.5x forward).

PREDICTION (written before any run; bench/NOTES.md "Offline (a helper, session 29): the fused
backward at D = 64"). Per 64 x 128 (query x key) tile of a CTA today: tensor 5 matmuls x 2 WGs
x 2 x 64^3 = 5.24 MFLOP / 4096 = 1280 cycles; MUFU 2 x 33 EX2 a warp x 8 = 528 cycles an SMSP;
issue 2 x 450 = 900 an SMSP; measured ~3000 cycles (400 TFLOP/s at ~1.75 GHz): neither tensor
nor MUFU bound, but the per-tile chain (S -> exp2 -> dS -> dV / dK -> cross-WG ds_ready -> dQ ->
staging -> reduce, 9 bar.syncs, 6 mbarrier ops, 2 fence+MEMBAR a tile a WG). The WIDE tile
runs the same chain once per 128 rows: 709 instructions a warp for two 64-row tiles' work
(354 a tile, -21%), half the barrier / fence / reduce-issue / wgmma-wait round trips a FLOP,
S^T / dP^T wgmmas at N = 128 (shared-memory operand bytes 48 of 64 tensor cycles an
instruction instead of 32 of 32 at N = 64), the same MUFU and tensor work a FLOP.
  Non-causal 8k / 16k: +6 to +15% (centre +9%: 16k ~435, 8k ~425 TFLOP/s, ~0.97x cuDNN);
  2k / 4k (fused forced; today's route bwd_ws 367 / 377): fused-old ~355-375, wide +5-12%
  (~390-410: the fused route at D = 64 would then beat bwd_ws from 2k and GLUON_BWD_FUSED_MIN_N
  ["plain"][64] could drop to 2048).
  Causal: +3 to +10% at 4k-16k (the 128 x 128 diagonal tile masks half its pairs: ~N / 128 x
  8k wasted pairs, 3% at 2k, <1% at 16k); 2k +0-6%.
  dk / dv bitwise old's under causal. Wrong if wide gains < +3% at 16k non-causal: then the
  per-tile overheads are not the limit but the two WGs' lockstep through ds_ready (both
  softmaxes at once, tensor idle meanwhile) or shared-memory bandwidth (~224 KB a CTA tile,
  ~1750 cycles at 128 B / clock); the next lever is deferring dQ by one tile (a third dS^T
  buffer, +16 KB) so the WGs can run half a tile apart.
Offline (bench/gluon_bwd_compile.py --fused --wide, sm_90a): setmaxnreg 240 / 240 / 24, spill
24 bytes plain / 48 causal (prologue / epilogue only: no local access in the tile loops), 193
KB shared memory, tile loops 709 / 701 (plain) and 857 / 843 (causal, 147 masked) instructions
a warp, 64 MUFU.EX2, 40 HGMMA.
"""
import os
import sys
import time
import traceback

os.environ.setdefault("FLASHTRITON_PLANS", "0")

import torch  # noqa: E402

from flashtriton import reference  # noqa: E402
from flashtriton.bench.common import attention_flops, graph_backward_ms, graph_time_ms, time_ms  # noqa: E402
from flashtriton.launchers import backward as lib_backward  # noqa: E402
from flashtriton.launchers import backward_gluon, plans, policy  # noqa: E402
from flashtriton.launchers import forward as lib_forward  # noqa: E402
from flashtriton.launchers.common import AttnParams  # noqa: E402

TOKENS, H, D, DTYPE = 16384, 32, 64, torch.bfloat16
NS = [int(x) for x in os.environ.get("S30_NS", "2048,4096,8192,16384").split(",")]
CHECK_NS = [int(x) for x in os.environ.get("S30_CHECK_NS", "2048,8192").split(",")]
CASES = [(n, causal) for n in NS for causal in (False, True)]
VARIANTS = ("old", "wide")
SEEN = []
_real_run = backward_gluon._run_fused


def _spy(*a, **kw):
    SEEN.append(a[6]["BLOCK_M"])
    return _real_run(*a, **kw)


backward_gluon._run_fused = _spy


def short(exc) -> str:
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[-1][:300] if lines else ''}"


def setting(name: str, causal: bool) -> None:
    kind = "causal" if causal else "plain"
    policy.GLUON_BWD_FUSED_MIN_N[kind][D] = 0                        # the fused route at every N
    policy.GLUON_BWD_FUSED_WIDE = {"plain": frozenset(), "causal": frozenset()}
    if name == "wide":
        policy.GLUON_BWD_FUSED_WIDE[kind] = frozenset({D})
    plans.clear()


def params(causal):
    return AttnParams(D ** -0.5, window_right=0 if causal else -1, deterministic=False)


def make_inputs(n, causal, seed=0):
    torch.manual_seed(seed)
    b = TOKENS // n
    q, k, v = (torch.randn(b, n, H, D, device="cuda", dtype=DTYPE) for _ in range(3))
    dout = torch.randn_like(q)
    out, lse = lib_forward.fwd(q, k, v, params(causal))
    return q, k, v, dout, out, lse


def call(causal, inp):
    q, k, v, dout, out, lse = inp
    return lambda: lib_backward.bwd(dout, q, k, v, out, lse, params(causal))


def cudnn_ms(causal, inp) -> float:
    """SDPA CUDNN_ATTENTION's backward (aten's cudnn attention backward) as the grid times it:
    forward+backward captured together minus the forward alone (bench.common.graph_backward_ms;
    a backward captured without its forward fails: autograd runs it on the forward's stream,
    and the failed capture left the CUDA generator unusable, session 30 call A)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    q, k, v, dout, _, _ = inp
    qt, kt, vt = (t.transpose(1, 2).detach().requires_grad_() for t in (q, k, v))

    def fwd():
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=causal, scale=D ** -0.5)

    return graph_backward_ms(fwd, (qt, kt, vt), dout.transpose(1, 2))

def check_one_head(causal, inp, grads) -> tuple:
    q, k, v, dout, _, _ = inp
    args = [t[:1, :, :1] for t in (q, k, v)]
    kw = dict(softmax_scale=D ** -0.5, window_right=0 if causal else -1)
    truth = reference.attention_grad(dout[:1, :, :1].double(), *(t.double() for t in args), **kw)
    lowp = reference.attention_grad(dout[:1, :, :1], *args, **kw)
    ok, res = True, []
    for i, name in enumerate(("dq", "dk", "dv")):
        o = grads[i][:1, :, :1].double()
        err = (o - truth[i]).abs().max().item()
        base = (lowp[i].double() - truth[i]).abs().max().item()
        good = err <= 3 * base + 1e-4 and torch.isfinite(grads[i]).all().item()
        ok = ok and good
        res.append(f"{name} {err:.1e} (torch {base:.1e}){'' if good else ' WRONG'}")
    return ok, "f64 err " + ", ".join(res)


BAD = set()


def checks():
    for n, causal in CASES:
        if n not in CHECK_NS:
            continue
        inp = make_inputs(n, causal)
        grads = {}
        for name in VARIANTS:
            tag = f"check N={n} causal={causal} {name}"
            try:
                setting(name, causal)
                SEEN.clear()
                print(f"{tag}: launching {time.strftime('%H:%M:%S')}", flush=True)
                g = [t.clone() for t in call(causal, inp)()]
                torch.cuda.synchronize()
                want = 128 if name == "wide" else 64
                routed = "route ok" if SEEN == [want] else f"ROUTE WRONG (BLOCK_M launched: {SEEN})"
                ok, text = check_one_head(causal, inp, g)
                if not ok or SEEN != [want]:
                    BAD.add((name, causal))
                grads[name] = g
                print(f"{tag}: {'ok' if ok else 'FAILED'} {routed}; {text}", flush=True)
            except Exception as exc:  # noqa: BLE001  (reported, not fatal)
                BAD.add((name, causal))
                print(f"{tag}: ERROR {short(exc)}", flush=True)
                traceback.print_exc(limit=3)
        if len(grads) == 2:
            a, o = grads["wide"], grads["old"]
            dq = ((a[0].float() - o[0].float()).abs().max() / o[0].float().abs().max()).item()
            bit = torch.equal(a[1], o[1]) and torch.equal(a[2], o[2])
            dk = (a[1].float() - o[1].float()).abs().max().item()
            print(f"check N={n} causal={causal} wide vs old: dk/dv {'bitwise' if bit else f'differ (dk max {dk:.1e})'}"
                  f", dq rel diff {dq:.1e}", flush=True)
        del inp, grads
        torch.cuda.empty_cache()


def timed(fn) -> tuple:
    try:
        return graph_time_ms(fn), ""
    except Exception as exc:  # noqa: BLE001
        print(f"  (graph capture failed: {short(exc)}; eager)", flush=True)
        torch.cuda.synchronize()
        return time_ms(fn, "cuda"), "*"


def ab():
    rows = {}
    names = list(VARIANTS) + ["cudnn"]
    for rnd in range(2):
        for n, causal in (CASES if rnd == 0 else CASES[::-1]):
            inp = make_inputs(n, causal)
            for name in (names if rnd == 0 else names[::-1]):
                if (name, causal) in BAD:
                    continue
                try:
                    if name == "cudnn":
                        ms, mark = cudnn_ms(causal, inp), ""
                    else:
                        setting(name, causal)
                        ms, mark = timed(call(causal, inp))
                    rows.setdefault((n, causal, name), []).append(ms)
                    tf = attention_flops(TOKENS // n, H, n, n, D, causal, "bwd") / ms / 1e9
                    print(f"ab round {rnd + 1} N={n} causal={causal} {name}: {ms * 1e3:.1f}{mark} us "
                          f"{tf:.0f} TFLOP/s", flush=True)
                except Exception as exc:  # noqa: BLE001
                    print(f"ab round {rnd + 1} N={n} causal={causal} {name}: ERROR {short(exc)}", flush=True)
            del inp
            torch.cuda.empty_cache()
    print("\n| N | causal | old TFLOP/s (r1 / r2) | wide | cuDNN | wide / old (best) | old, wide vs cuDNN (best) |")
    print("|---|---|---|---|---|---|---|")
    for n, causal in CASES:
        fl = attention_flops(TOKENS // n, H, n, n, D, causal, "bwd")
        tf = {name: [fl / ms / 1e9 for ms in rows.get((n, causal, name), [])] for name in names}
        cells = [" / ".join(f"{x:.0f}" for x in tf[name]) or "-" for name in names]
        best = {name: max(v) for name, v in tf.items() if v}
        ratio = f"{best['wide'] / best['old']:.3f}x" if "wide" in best and "old" in best else "-"
        vs = " / ".join(f"{best[x] / best['cudnn']:.2f}x" for x in VARIANTS if x in best and "cudnn" in best)
        print(f"| {n} | {'yes' if causal else 'no'} | {' | '.join(cells)} | {ratio} | {vs or '-'} |", flush=True)


def main(argv):
    what = argv[1] if len(argv) > 1 else "all"
    t0 = time.time()
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}", flush=True)
    checks()
    if what != "checks":
        ab()
    print(f"done in {time.time() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    main(sys.argv)
