"""Session 31: the fused Gluon backward's DQ_SPLIT_M at D = 64 (kernels/bwd_gluon_fused.py, the
WIDE tile: each consumer warpgroup computes and reduce-adds dQ for its 64 of the ring tile's 128
query rows over the whole D = 64, 8 wgmma steps m64n64k16, instead of all 128 rows for its D-half,
16 steps m64n32k16; written and compiled offline in session 31 by a helper, never run; not routed:
policy.GLUON_BWD_FUSED_DQ_SPLIT_M empty) against the current WIDE fused kernel ("old") and cuDNN
(SDPA CUDNN_ATTENTION's backward through aten, timed by bench.common.graph_backward_ms), for
issue 4 (backward >= 1.0x cuDNN; D = 64 non-causal measured 381 / 408 / 413 / 426 TFLOP/s at 2k /
4k / 8k / 16k against cuDNN 404 / 429 / 443 / 450: 0.93-0.95x; causal 1.01-1.04x already).

    PYTHONPATH=src timeout 300 python bench/gpu/s31_fused_bwd_dqm_ab.py          # checks + A/B, ~2-3 min
    PYTHONPATH=src python bench/gpu/s31_fused_bwd_dqm_ab.py checks               # only the correctness part
    (then: PYTHONPATH=src python -m pytest -q -o addopts="" -m gpu tests/test_bwd_gluon_dqm.py)

What runs: launchers.backward.bwd (the library's whole backward: delta preprocess, zero, fused
kernel, cast), the fused route forced at every N (policy.GLUON_BWD_FUSED_MIN_N[kind][64] = 0), the
WIDE tile as routed (policy.GLUON_BWD_FUSED_WIDE: plain and causal at D = 64), "old" = the
DQ_SPLIT_M table empty, "dqm" = GLUON_BWD_FUSED_DQ_SPLIT_M[kind] = {64} (a spy on
backward_gluon._run_fused checks BLOCK_M = 128 and DQ_SPLIT_M in the launch). D = 64, bf16, H =
32 (hidden 2048), 16k tokens (B = 16k / N), non-causal N = 2k / 4k / 8k / 16k and causal 4k / 16k,
deterministic=False, CUDA-graph replays (bench.common.graph_time_ms, L2 flushed; eager where
capture fails, marked *), two rounds, the second in reverse order. First the checks (N = 2k and
16k): batch 0 / head 0 of each variant against float64 (<= 3x PyTorch's bf16 error, dq / dk / dv),
finite everywhere, and dqm against old over the whole tensors (dk / dv expected BITWISE: the same
dK / dV wgmmas on the same operands in the same order, ROTATE as routed in both; dq differs by
fp32 summation order only). A variant that fails its check is not timed. TFLOP/s by
attention_flops(..., "bwd") (2.5x forward).

PREDICTION (written before any run; bench/wip/fused-bwd-d64-dqm.md). Per 128 x 128 (query x key)
WIDE CTA tile (offline SASS, sm_90a): tensor 5 matmuls x 2 x 128 x 128 x 64 = 10.5 MFLOP / 4096 =
2560 cycles; measured 426 TFLOP/s at 16k = 12.9 ms, kernel ~12.78 ms / 3972 tiles an SM = 3.22 us
= ~5650 cycles a tile (~1.75 GHz); cuDNN's 450 needs ~5350 (-300, -5.3%). Per WG a tile the wgmma
steps' shared-memory operand bytes (at 128 B a clock an SM) against their math: S^T / dP^T 8 x
(48 of 64 cycles), dV 8 x (16 of 32, A in registers), dK 8 x (32 of 32), dQ 16 x m64n32k16 at
(24 bytes-cycles of 16 math: 384 cycles, the one shared-memory-bound step); with DQ_SPLIT_M 8 x
m64n64k16 at (32 of 32: 256 cycles). Both WGs run the dV / dK / dQ phase together (lockstep,
bench/wip/fused-bwd-d128.md), so the pair's phase 1792 -> 1536 cycles: -256 cycles (-4.5%) of
the chain if fully exposed; shared-memory bytes a tile ~434-482 -> ~402-450 KB; tile loops 709 /
701 -> 676 / 668 instructions a warp; spill 24 -> 0 bytes (outside the loops either way).
  Non-causal 16k / 8k: +1.5 to +5% (centre +3%: ~439 / ~425 TFLOP/s, ~0.97-0.98x cuDNN; 1.0x
  needs the top of the range); 4k +1.5-4.5% (~420); 2k +1-4% (~390: 16 tiles a CTA, fixed
  per-CTA costs dilute it).
  Causal 4k / 16k: +1-4% (the same dQ saving; masked tiles add non-tensor work).
  dk / dv bitwise old's; dq within fp32 order (rel. diff ~1e-3 or less).
  Wrong if dqm gains < +1% at 8k / 16k non-causal: then the dQ operand bandwidth is not on the
  critical path (the wgmma B operand is fed faster than 128 B a clock, or the dQ steps overlap
  the other WG's work) and the tile is latency-bound on its barriers / waits / tail: the next
  lever is taking the reduce tail off the consumers (a dq-writer partition) or the lse / delta
  layout conversion's 2 BAR.SYNC a tile. Gains > +6% would say shared memory is more
  contended than modelled (STSM / STS / TMA traffic during the wgmma phase): the next lever is
  then more bytes off (dK's A operand from registers).
Offline (bench/gluon_bwd_compile.py --fused --splitm, sm_90a): setmaxnreg 240 / 240 / 24, spill 0
bytes (WIDE today 24; causal 0 against 48), 193 KB shared memory (unchanged), tile loops 676 / 668
instructions (709 / 701), causal 816 / 810 (857 / 843), 64 MUFU.EX2, 9 BAR.SYNC, 24 HGMMA 64x64x16
+ 8 64x128x16 a loop (16 64x64x16 + 16 64x32x16 + 8 64x128x16); through the JIT binder with the
launcher's arguments (16k H = 32, 2k B = 8, GQA, Nq != Nk, rotate off, causal): 0 spill bytes,
dq_accum box (64, 16) (four per WG reduce). All 32 existing variants' SASS byte-identical
(bench/gluon_bwd_fused_sass_hash.py).
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

D = 64
TOKENS, H, DTYPE = 16384, 2048 // D, torch.bfloat16
NS = [int(x) for x in os.environ.get("S31_NS", "2048,4096,8192,16384").split(",")]
CAUSAL_NS = [int(x) for x in os.environ.get("S31_CAUSAL_NS", "4096,16384").split(",") if x]
CHECK_NS = [int(x) for x in os.environ.get("S31_CHECK_NS", "2048,16384").split(",")]
CASES = [(n, False) for n in NS] + [(n, True) for n in CAUSAL_NS]
VARIANTS = ("old", "dqm")
SEEN = []
_real_run = backward_gluon._run_fused


def _spy(*a, **kw):
    SEEN.append((a[6]["BLOCK_M"], bool(a[6].get("DQ_SPLIT_M", False))))
    return _real_run(*a, **kw)


backward_gluon._run_fused = _spy


def short(exc) -> str:
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[-1][:300] if lines else ''}"


def setting(name: str, causal: bool) -> None:
    kind = "causal" if causal else "plain"
    policy.GLUON_BWD_FUSED_MIN_N[kind][D] = 0                        # the fused route at every N
    policy.GLUON_BWD_FUSED_WIDE = {"plain": frozenset({D}), "causal": frozenset({D})}    # as routed
    policy.GLUON_BWD_FUSED_DQ_SPLIT_M = {"plain": frozenset(), "causal": frozenset()}
    if name == "dqm":
        policy.GLUON_BWD_FUSED_DQ_SPLIT_M[kind] = frozenset({D})
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
                want = [(128, name == "dqm")]
                routed = "route ok" if SEEN == want else f"ROUTE WRONG ((BLOCK_M, DQ_SPLIT_M) launched: {SEEN})"
                ok, text = check_one_head(causal, inp, g)
                if not ok or SEEN != want:
                    BAD.add((name, causal))
                grads[name] = g
                print(f"{tag}: {'ok' if ok else 'FAILED'} {routed}; {text}", flush=True)
            except Exception as exc:  # noqa: BLE001  (reported, not fatal)
                BAD.add((name, causal))
                print(f"{tag}: ERROR {short(exc)}", flush=True)
                traceback.print_exc(limit=3)
        if len(grads) == 2:
            a, o = grads["dqm"], grads["old"]
            dq = ((a[0].float() - o[0].float()).abs().max() / o[0].float().abs().max()).item()
            bit = torch.equal(a[1], o[1]) and torch.equal(a[2], o[2])
            dk = (a[1].float() - o[1].float()).abs().max().item()
            print(f"check N={n} causal={causal} dqm vs old: dk/dv {'bitwise' if bit else f'differ (dk max {dk:.1e})'}"
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
    print(f"\nD = {D}, H = {H}")
    print("\n| N | causal | old TFLOP/s (r1 / r2) | dqm | cuDNN | dqm / old (best) | old, dqm vs cuDNN (best) |")
    print("|---|---|---|---|---|---|---|")
    for n, causal in CASES:
        fl = attention_flops(TOKENS // n, H, n, n, D, causal, "bwd")
        tf = {name: [fl / ms / 1e9 for ms in rows.get((n, causal, name), [])] for name in names}
        cells = [" / ".join(f"{x:.0f}" for x in tf[name]) or "-" for name in names]
        best = {name: max(v) for name, v in tf.items() if v}
        ratio = f"{best['dqm'] / best['old']:.3f}x" if "dqm" in best and "old" in best else "-"
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
