"""Session 32: the fused Gluon backward at head dim 256 (kernels/bwd_gluon_d256.py: WG_S + two dK / dV
warpgroups + a loader, 64 keys x D = 256 a CTA, BLOCK_M 64, 2 stages, dQ by TMA reduce-add,
softmax_scale folded into dS^T; a session-32 helper, compiled offline only, NEVER RUN; not routed)
against the library's D = 256 backward (launchers.backward.bwd: bwd.py / bwd_ws.py's dQ + dK/dV
kernels) and cuDNN (SDPA CUDNN_ATTENTION), for issue 4 (D = 256 backward 0.74-0.85x cuDNN; bf16,
16k tokens, H = 8, ours / cuDNN TFLOP/s: non-causal 2k 266 / 344, 4k 285 / 371, 16k 297 / 354;
causal 4k 263 / 342, 16k 310 / 370).

    PYTHONPATH=src timeout 240 python bench/gpu/s32_gluon_bwd_d256_ab.py     # < 200 s, compiles included
    PYTHONPATH=src python bench/gpu/s32_gluon_bwd_d256_ab.py smoke gluon     # the smoke step alone (~15 s)
    (then: PYTHONPATH=src python -m pytest -q -o addopts="" -m gpu tests/test_bwd_gluon_d256.py)
    S32B_CASES=2048,c4096 ... to shorten (c: causal); S32B_SKIP=gluon-v2,lib,cudnn to leave columns out.

Columns: gluon = the kernel's default (V1: dQ staged and TMA reduce-added, one P^T / dS^T buffer);
gluon-v2 = prepare(..., dq_atomic=True) (the design note's V2: dQ by red.global.add.v2.f32 from the
registers, no staging, two P^T / dS^T buffers); lib; cudnn.

Order (a hang must cost seconds, not the session):
  1. smoke, one subprocess a Gluon variant, killed after S32B_SMOKE_TIMEOUT (default 40 s; ~15 s
     expected with the two compiles): B = 2, N = 128, H = Hk = 2 (the same integer specialisations
     as the main cases, so the parent's launches hit Triton's cache), plain and causal, the WHOLE
     dq / dk / dv against float64 (<= 3x PyTorch's bf16 error, finite). A timeout means a barrier
     deadlock: for gluon (V1) the script stops there (exit 2), for gluon-v2 that column goes. A
     variant that fails is not timed below (its failure is printed).
  2. per case (a faulthandler watchdog kills the process after S32B_CASE_TIMEOUT, default 60 s, the
     first case 120 s for the compiles, so a hang at a long N cannot eat the session): inputs, out / lse of the library's forward; the
     Gluon backward's batch 0 / head 0 against float64 (<= 3x PyTorch's bf16 error, every element
     finite) and against lib over the whole tensors (max |diff| / max |lib|).
  3. two timing rounds, the second in reverse order (cases and columns), CUDA-graph replays
     (bench.common.graph_or_eager_ms, L2 flushed): gluon / gluon-v2 = delta preprocess (the library's
     bwd_preprocess_kernel: backward_gluon.delta_of) + zero + kernel + cast
     (backward_gluon_d256.bwd_into), i.e. the same launches a route would make; lib =
     launchers.backward.bwd (the D = 256 route, its dQ kernel with the delta folded in);
     cudnn = forward + backward captured together minus the forward (bench.common.graph_backward_ms,
     as bench/gpu/fused_bwd_ab.py). TFLOP/s by attention_flops(..., "bwd") (5 matmuls, FA2 count).

Offline (bench/d256_bwd_gluon_compile.py, sm_90a, Triton 3.6.0; also through the JIT binder with this
launcher's arguments at 2k / 16k / causal 4k / GQA fp16): 13 warps, setmaxnreg 168 (WG_S) / 160 /
160 / 24, 0 spills and no local memory in every variant (bf16 / fp16, causal or not), 229,736 B of
shared memory (limit 232,448), 64 HGMMA: S^T / dP^T 32 x 64x64x16 (both operands K-major), dQ 16 x
64x64x16 .tnspA.tnspB, dK / dV 16 x 64x128x16 .tnspB; no wgmma-serialisation advisory; 4 UTMAREDG;
tile loops: WG_S 626 instructions a warp (causal 684; 48 HGMMA, 32 EX2, 15 BAR, 4 UTMAREDG), WG_0 /
WG_1 61 / 63 (8 HGMMA).

PREDICTION (written before any run; the count of bench/wip/d256-bwd-gluon.md).
Per tile (64 queries x 64 keys), 5 matmuls of 2 x 64 x 64 x 256 = 10.5 MFLOP = 2560 tensor cycles
at 4096 FLOP / clock / SM. Shared memory per tile (V1, TMA-reduce dQ): S^T 64 KB + dP^T 64 + P^T /
dS^T stores 16 + dV 48 + dK 48 + dQ operands 64 + TMA writes of Q / dO 64 + dq staging (st.shared +
the reduce's read) 128 = 496 KB = 3875 cycles at 128 B / clock: a 66% ceiling (~650 TFLOP/s), times
D = 128's realisation of its own model (0.62) ~400. L2: 0.0125 B / FLOP (Q + dO in, the fp32 dQ
reduce out: twice the D = 128 kernel's), 5 TB/s at 400 TFLOP/s: the open risk. Issue: WG_S 626
instructions a warp a tile (1 warp a scheduler: ~626 issue cycles of 2560), WG_0 / WG_1 ~60.
Fixed costs: one CTA an SM (229 KB), so the K / V load and pipeline fill (~2-3 us) and the dK / dV
epilogue (~1-2 us) are not hidden by another CTA: ~4-5% at 2k (32 tiles a CTA at ~3.5 us), <1% at
16k; 2048 CTAs = 15.5 waves at every N here (B * H * N / 64): ~3% tail. Around the kernel: delta
preprocess + zero + cast of dq_accum (B * Nq * H * D fp32 = 134 MB at 16k tokens) ~0.12 ms: 7% of a
2k backward (~1.7 ms), 1% at 16k.
  | case | lib (known) | cuDNN (known) | gluon predicted (TFLOP/s) | gluon / lib |
  | 2k | 266 | 344 | ~340 (300-370) | ~1.28x |
  | 4k | 285 | 371 | ~375 (330-410) | ~1.32x |
  | 16k | 297 | 354 | ~395 (340-430) | ~1.33x |
  | causal 4k | 263 | 342 | ~320 (280-360): 1 to 64 tiles a CTA, unbalanced waves | ~1.22x |
  | causal 16k | 310 | 370 | ~350 (300-390) | ~1.13x |
  gluon-v2: 0.95-1.10x gluon (128 KB a tile less shared-memory traffic: the note's ceiling 66% ->
  93%, but 8-byte reds where V1 sends 4 bulk reduces a tile; below gluon means L2 request rate,
  not shared memory, binds; above by > 5% means shared memory binds V1). Causal: V2 spills 8
  bytes (1 STL + 1 LDL a tile in WG_S's loop): ~1% against it.
  Gradients: batch 0 / head 0 within 3x PyTorch's bf16 error; against lib dk / dv differ in the
  last bits (dS^T rounded to bf16 after the scale here, before it in the Triton kernels) at
  ~1e-2 relative of max |lib| or less, dq likewise plus fp32 summation order.
  Wrong if gluon < 330 at 16k: then either L2 (the reduce-adds; look at ncu lts throughput) or the
  WG_S chain (its 4 serial dQ chunk rounds: wgmma, wait, store_wait, bar, st.shared, fence, reduce)
  binds; the next levers are the design note's item 2b (dQ(g) issued behind S^T / dP^T(g + 1)),
  V2 (dQ by red.global.add.v2.f32, no staging, P^T / dS^T double-buffered) and a 2-CTA cluster
  multicasting Q / dO (halves the load half of the L2 traffic).
Routing rule (launchers/policy.py; the lead's, after this run): route the D = 256 backward
(deterministic=False, dense, no dropout / window / ALiBi / softcap, Nq and Nk multiples of 64) to
backward_gluon_d256.bwd_into for non-causal calls from the shortest N at which gluon beats lib by
>= 2% in BOTH rounds (and at every longer N measured), and likewise for causal calls from its own
shortest N (4k or 16k); no route at all if the smoke or any f64 check fails, or where gluon is
not faster than lib. gluon-v2 replaces V1 as the route's kernel (bwd_into(dq_atomic=True), or
flip the default) only where it beats gluon by >= 2% in both rounds at 4k and 16k.
"""
import faulthandler
import os
import subprocess
import sys
import time
import traceback

os.environ.setdefault("FLASHTRITON_PLANS", "0")       # (graphs replay the launches anyway)

import torch  # noqa: E402

from flashtriton import reference  # noqa: E402
from flashtriton.bench.common import (attention_flops, graph_backward_ms, graph_or_eager_ms,  # noqa: E402
                                      head0_grad_check, head0_grad_refs, short_error)
from flashtriton.launchers import backward as lib_backward  # noqa: E402
from flashtriton.launchers import backward_gluon, backward_gluon_d256  # noqa: E402
from flashtriton.launchers import forward as lib_forward  # noqa: E402
from flashtriton.launchers.common import AttnParams  # noqa: E402

TOKENS, H, D, DTYPE = 16384, 8, 256, torch.bfloat16
CASES = os.environ.get("S32B_CASES", "2048,4096,16384,c4096,c16384").split(",")
SKIP = set(filter(None, os.environ.get("S32B_SKIP", "").split(",")))
SMOKE_TIMEOUT = float(os.environ.get("S32B_SMOKE_TIMEOUT", "40"))
CASE_TIMEOUT = float(os.environ.get("S32B_CASE_TIMEOUT", "60"))


VARIANTS = {"gluon": dict(), "gluon-v2": dict(dq_atomic=True)}


def gluon_bwd(q, k, v, dout, out, lse, causal, variant="gluon"):
    """The Gluon backward as a route would run it: delta (the library's preprocess kernel), then
    zero / kernel / cast into fresh dq / dk / dv (bwd_into; VARIANTS' keywords)."""
    delta = backward_gluon.delta_of(out, dout)
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    backward_gluon_d256.bwd_into(q, k, v, dout, lse, delta, D ** -0.5, causal, dq, dk, dv, **VARIANTS[variant])
    return dq, dk, dv


def smoke(variant) -> int:
    """Step 1 (a subprocess of main, one a variant): small shapes, whole tensors against float64."""
    print(f"smoke {variant} {torch.cuda.get_device_name()} {time.strftime('%H:%M:%S')}", flush=True)
    bad = 0
    for causal in (False, True):
        tag = f"smoke {variant} causal={causal}"
        try:
            torch.manual_seed(1)
            b, n, h = 2, 128, 2
            q, k, v = (torch.randn(b, n, h, D, device="cuda", dtype=DTYPE) for _ in range(3))
            dout = torch.randn_like(q)
            kw = dict(softmax_scale=D ** -0.5, window_right=0 if causal else -1)
            out64, lse64 = reference.attention(*(t.double() for t in (q, k, v)), **kw)
            truth = reference.attention_grad(dout.double(), *(t.double() for t in (q, k, v)), **kw)
            lowp = reference.attention_grad(dout, q, k, v, **kw)
            t0 = time.time()
            g = gluon_bwd(q, k, v, dout, out64.to(DTYPE), lse64.float().contiguous(), causal, variant)
            torch.cuda.synchronize()
            ok, res = True, []
            for i, name in enumerate(("dq", "dk", "dv")):
                err = (g[i].double() - truth[i]).abs().max().item()
                base = (lowp[i].double() - truth[i]).abs().max().item()
                good = bool(torch.isfinite(g[i]).all().item()) and err <= 3 * base + 1e-4
                ok = ok and good
                res.append(f"{name} {err:.1e} (torch {base:.1e}){'' if good else ' WRONG'}")
            print(f"{tag}: {'SMOKE-OK' if ok else 'SMOKE-FAIL'} ({time.time() - t0:.1f} s incl. compile) "
                  f"{', '.join(res)}", flush=True)
            bad += not ok
        except Exception as exc:  # noqa: BLE001  (reported)
            print(f"{tag}: SMOKE-FAIL {short_error(exc)}", flush=True)
            traceback.print_exc(limit=4)
            bad += 1
    return bad


def run_smoke(variant) -> dict:
    """{causal: passed} from the variant's smoke subprocess; on a timeout (a hang) exits (2) for
    gluon (V1), or returns all False (the column goes) for another variant."""
    t0 = time.time()
    try:
        res = subprocess.run([sys.executable, os.path.abspath(__file__), "smoke", variant], capture_output=True,
                             text=True, timeout=SMOKE_TIMEOUT, env=dict(os.environ))
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        print(f"SMOKE {variant} TIMED OUT after {SMOKE_TIMEOUT:.0f} s (a barrier deadlock?); output so far:\n{out}",
              flush=True)
        if variant == "gluon":
            sys.exit(2)
        return {False: False, True: False}
    print(res.stdout + res.stderr[-3000:], flush=True)
    print(f"smoke {variant} done in {time.time() - t0:.0f} s", flush=True)
    return {c: f"smoke {variant} causal={c}: SMOKE-OK" in res.stdout for c in (False, True)}


def params(causal) -> AttnParams:
    return AttnParams(D ** -0.5, window_right=0 if causal else -1, deterministic=False)


def inputs(n, causal, seed=0):
    torch.manual_seed(seed)
    b = TOKENS // n
    q, k, v = (torch.randn(b, n, H, D, device="cuda", dtype=DTYPE) for _ in range(3))
    dout = torch.randn_like(q)
    out, lse = lib_forward.fwd(q, k, v, params(causal))
    return q, k, v, dout, out, lse


def cudnn_ms(q, k, v, dout, causal) -> float:
    from torch.nn.attention import SDPBackend, sdpa_kernel

    qt, kt, vt = (t.transpose(1, 2).detach().requires_grad_() for t in (q, k, v))

    def fwd():
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=causal, scale=D ** -0.5)

    return graph_backward_ms(fwd, (qt, kt, vt), dout.transpose(1, 2))


def check(n, causal, ok_smoke) -> dict:
    """{variant: passed} of the Gluon variants whose smoke passed (batch 0 / head 0 against float64,
    finite everywhere), with their difference from lib over the whole tensors printed."""
    tag = f"check N={n}{' causal' if causal else ''}"
    q, k, v, dout, out, lse = inputs(n, causal)
    refs = head0_grad_refs(q, k, v, dout, softmax_scale=D ** -0.5, window_right=0 if causal else -1)
    good, lib = {}, None
    for variant in VARIANTS:
        good[variant] = False
        if not ok_smoke[variant][causal] or variant in SKIP:
            continue
        try:
            t0 = time.time()
            g = gluon_bwd(q, k, v, dout, out, lse, causal, variant)
            torch.cuda.synchronize()
            good[variant], text = head0_grad_check(g, refs)
            print(f"{tag} {variant}: {'ok' if good[variant] else 'FAILED'} ({time.time() - t0:.1f} s) {text}",
                  flush=True)
            if lib is None:
                lib = lib_backward.bwd(dout, q, k, v, out, lse, params(causal))
            rel = [((a.float() - b.float()).abs().max() / b.float().abs().max()).item() for a, b in zip(g, lib)]
            print(f"{tag} {variant} vs lib (max |diff| / max |lib|): dq {rel[0]:.1e}, dk {rel[1]:.1e}, "
                  f"dv {rel[2]:.1e}", flush=True)
            del g
        except Exception as exc:  # noqa: BLE001
            print(f"{tag} {variant}: ERROR {short_error(exc)}", flush=True)
            traceback.print_exc(limit=4)
            good[variant] = False
    del q, k, v, dout, out, lse, refs, lib
    torch.cuda.empty_cache()
    return good


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "smoke":
        sys.exit(1 if smoke(sys.argv[2] if len(sys.argv) > 2 else "gluon") else 0)
    t0 = time.time()
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}", flush=True)
    ok_smoke = {variant: run_smoke(variant) if variant not in SKIP else {False: False, True: False}
                for variant in VARIANTS}
    cases = [(int(c[1:]) if c.startswith("c") else int(c), c.startswith("c")) for c in CASES]
    good = {}
    for i, (n, causal) in enumerate(cases):
        # a hang: the process dies (the first case twice the time: the forward's and lib's compiles)
        faulthandler.dump_traceback_later(CASE_TIMEOUT * (2 if i == 0 else 1), exit=True)
        try:
            good[(n, causal)] = check(n, causal, ok_smoke)
        except Exception as exc:  # noqa: BLE001
            print(f"check N={n} causal={causal}: ERROR {short_error(exc)}", flush=True)
            good[(n, causal)] = {}
        faulthandler.cancel_dump_traceback_later()
    print(f"checks done at {time.time() - t0:.0f} s", flush=True)
    names = [x for x in (*VARIANTS, "lib", "cudnn") if x not in SKIP]
    rows = {}
    for rnd in range(2):
        for n, causal in (cases if rnd == 0 else cases[::-1]):
            faulthandler.dump_traceback_later(CASE_TIMEOUT, exit=True)
            inp = inputs(n, causal)
            q, k, v, dout, out, lse = inp
            flops = attention_flops(TOKENS // n, H, n, n, D, causal, "bwd")
            for name in (names if rnd == 0 else names[::-1]):
                if name in VARIANTS and not good[(n, causal)].get(name):
                    continue
                try:
                    if name == "cudnn":
                        ms, mark = cudnn_ms(q, k, v, dout, causal), ""
                    elif name == "lib":
                        ms, mark = graph_or_eager_ms(lambda: lib_backward.bwd(dout, q, k, v, out, lse, params(causal)))
                    else:
                        ms, mark = graph_or_eager_ms(lambda: gluon_bwd(q, k, v, dout, out, lse, causal, name))
                    rows.setdefault((n, causal, name), []).append(flops / ms / 1e9)
                    print(f"ab round {rnd + 1} N={n} causal={causal} {name}: {ms * 1e3:.0f}{mark} us "
                          f"{flops / ms / 1e9:.0f} TFLOP/s ({time.time() - t0:.0f} s)", flush=True)
                except Exception as exc:  # noqa: BLE001
                    print(f"ab round {rnd + 1} N={n} causal={causal} {name}: ERROR {short_error(exc)}", flush=True)
            del inp                      # (q .. lse: rebound by the next case; 67 MB each)
            torch.cuda.empty_cache()
            faulthandler.cancel_dump_traceback_later()
    print(f"\nD = {D}, H = {H}, bf16, {TOKENS} tokens; TFLOP/s (round 1 / round 2)")
    cols = ("gluon", "gluon-v2", "lib", "cudnn")
    print("| N | causal | B | gluon | gluon-v2 | lib | cuDNN | gluon / lib (min over rounds) | gluon-v2 / gluon "
          "(min) | best Gluon / cuDNN (best) |")
    print("|---|---|---|---|---|---|---|---|---|---|")

    def ratio(a, b):
        return f"{min(x / y for x, y in zip(a, b)):.3f}x" if a and len(a) == len(b) else "-"

    for n, causal in cases:
        tf = {name: rows.get((n, causal, name), []) for name in cols}
        cells = [" / ".join(f"{x:.0f}" for x in tf[name]) or "-" for name in cols]
        best = max(tf["gluon"] + tf["gluon-v2"], default=0)
        vs_cudnn = f"{best / max(tf['cudnn']):.3f}x" if best and tf["cudnn"] else "-"
        print(f"| {n} | {'yes' if causal else 'no'} | {TOKENS // n} | {' | '.join(cells)} | "
              f"{ratio(tf['gluon'], tf['lib'])} | {ratio(tf['gluon-v2'], tf['gluon'])} | {vs_cudnn} |", flush=True)
    print(f"total {time.time() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    main()
