"""Session 34 (written offline in session 33, issue 4): the D = 256 backward SPLIT (FlashAttention-2's
split) against the routed fused kernel (kernels/bwd_gluon_d256.py, dQ reduce-added by TMA) and cuDNN
(SDPA CUDNN_ATTENTION). bf16, H = 8, 16k tokens. NEVER RUN when written.

    PYTHONPATH=src timeout 240 python bench/gpu/s34_d256_split_dq_ab.py     # < 150 s, compiles included
    PYTHONPATH=src python bench/gpu/s34_d256_split_dq_ab.py smoke split     # the smoke step alone (~20 s)
    (then: PYTHONPATH=src python -m pytest -q -o addopts="" -m gpu tests/test_bwd_gluon_d256_split.py
           tests/test_bwd_gluon_dq.py -k "d256 or split")
    S34_CASES=4096,c4096 ... to shorten (c: causal); S34_SKIP=split-n64,cudnn,parts to leave columns out.

Columns (whole backward: the delta preprocess included, as a route runs it; CUDA-graph replays, L2
flushed, bench.common.graph_or_eager_ms):
  routed     backward_gluon_d256.bwd_into (the route today): delta, zero dq_accum, the fused kernel
             (dK / dV + dQ reduce-added in fp32), cast.
  split      bwd_into(split_dq=True): delta, the kernel with DKDV_ONLY (no dQ wgmmas, staging or
             reduce; two P^T / dS^T buffers), the Gluon dQ kernel at D = 256 (kernels/bwd_gluon_dq.py:
             128 query rows a CTA in two consumer warpgroups, 32-key K / V tiles, 3 / 3 stages, dq
             written in bf16 directly). Deterministic.
  split-ve   split with the dQ kernel's V_EARLY (V_j released once dP_j retired): dq_tile (32, 3, 3, True).
  split-n64  split with 64-key K / V tiles, 2 K / 1 V stages, V_EARLY: dq_tile (64, 2, 1, True) (spills
             offline: 216 B plain, 640 B causal; the S / dP wgmmas at n64 balance shared memory better).
             Plain cases only (smoke and tests: causal too).
  cudnn      SDPA CUDNN_ATTENTION forward + backward captured together minus the forward.
  parts      (plain 4k / 16k only, TIMING) the DKDV_ONLY kernel alone and the dQ kernel alone (split's
             default tiles), to check the prediction's two terms.

Order (a hang must cost seconds): 1. smoke, one subprocess a split variant, killed after
S34_SMOKE_TIMEOUT (60 s): B = 2, N = 128 and N = 256 / Nk = 192, H = 2, plain and causal, whole
dq / dk / dv against float64 (<= 3x PyTorch's bf16 error, finite) and dk / dv BITWISE the routed
kernel's; a timeout (mbarrier phase bug: a hang) of "split" exits 2, of another variant drops its
column. 2. per case (faulthandler watchdog S34_CASE_TIMEOUT, 60 s, the first 120 s): batch 0 / head 0
against float64, dk / dv bitwise routed's over the whole tensors, dq's max |diff| / max |routed|.
3. two timing rounds, the second reversed (cases and columns).

PREDICTION (written before any run). From s33/callA's probes at N = 4k, B = 4, H = 8 (FA2 count 5
matmuls: 1.37e12 FLOP a backward): routed 4,250-4,324 us (318-323 TFLOP/s);
probe-nodq (S, dP, dS, dK, dV, no dQ at all) 2,020-2,060 us. The DKDV_ONLY kernel is that probe on
the routed kernel (the probe was on a p_early / dq_rs variant; DKDV_ONLY also double-buffers P^T /
dS^T in the freed staging): ~2,000-2,060 us. The dQ pass does 3 of the 5 matmuls (S, dP, dQ: 8.25e11
FLOP at 4k). Its rate: the D = 128 library dQ kernel ran ~690 TFLOP/s (3-matmul count; bench/NOTES.md
session 24), the Gluon dQ kernel was never timed; at D = 256 the 32-key tiles make S / dP
m64n32k16 wgmmas with A (Q / dO, 2 KB a k-step) from shared memory: 3 KB of shared-memory reads a
65.5 kFLOP k-step = 192 B / clock at peak against 128 B / clock: S / dP at most ~67% of peak, dQ
(m64n256k16, B 8 KB a 524 kFLOP k-step) unbound: a ~75% ceiling for the pass, ~60% realised
(D = 128's realisation of its model) -> 450-550 TFLOP/s -> 1,500-1,830 us. Delta preprocess ~20 us
(no zero, no cast: those go). Whole: 3,550-3,900 us at 4k = 350-390 TFLOP/s, 1.10-1.21x routed,
0.98-1.09x cuDNN (358-364). Break-even against routed ~4,300 us (dQ pass at ~2,250 us = 367 TFLOP/s).
  | case | routed (s33) | cuDNN (s33) | split predicted | split / routed |
  | 1k | ~277 | ~300 | 280-320 (more CTAs' fill and tail in 2 kernels) | 1.00-1.15x |
  | 2k | 307 | 345 | 330-375 | 1.07-1.22x |
  | 4k | 318-323 | 358-364 | 350-390 | 1.10-1.21x |
  | 16k | 334-336 | 354-360 | 365-405 | 1.09-1.21x |
  | causal 2k / 4k / 16k | 267 / 293-299 / 336-342 | 301 / 339-345 / 376-378 | 0.95-1.15x routed (the
    dQ kernel's causal blocks: heaviest first, 4 masked 32-key tiles a block) |
  split-ve: 1.00-1.03x split (3 V stages already hide V's load). split-n64: 0.95-1.10x split (n64
  halves S / dP's shared-memory bound, but 13 LDL / STL a tile in a consumer's loop).
  parts at 4k: DKDV_ONLY 2,000-2,060 us; dQ 1,500-1,830 us. Wrong if the dQ pass is > 2,250 us: then
  its S / dP shared-memory bound (n32 tiles) or the consumer ping-pong binds; next: Q in registers
  as the A operand (64 registers: does not fit beside dQ's 128), or 2-CTA clusters.
Routing rule (the lead's, after this run): GLUON_BWD_D256_SPLIT_DQ[kind] = the shortest N from which
the best split variant beats routed by >= 2% in BOTH rounds (and at every longer N measured); the
variant's dq_tile becomes the dQ kernel's D = 256 default if it is not split's. No entry if any smoke
or f64 check fails. The split path is deterministic: it could also take deterministic=True calls
(today bwd_ws.py / bwd.py at ~264-296 TFLOP/s) where it beats those.
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
from flashtriton.launchers import backward_gluon, backward_gluon_d256, plans  # noqa: E402
from flashtriton.launchers import forward as lib_forward  # noqa: E402
from flashtriton.launchers.common import AttnParams  # noqa: E402

TOKENS, H, D, DTYPE = 16384, 8, 256, torch.bfloat16
CASES = os.environ.get("S34_CASES", "1024,2048,4096,16384,c2048,c4096,c16384").split(",")
SKIP = set(filter(None, os.environ.get("S34_SKIP", "").split(",")))
SMOKE_TIMEOUT = float(os.environ.get("S34_SMOKE_TIMEOUT", "60"))
CASE_TIMEOUT = float(os.environ.get("S34_CASE_TIMEOUT", "60"))

VARIANTS = {"routed": dict(), "split": dict(split_dq=True), "split-ve": dict(split_dq=True, dq_tile=(32, 3, 3, True)),
            "split-n64": dict(split_dq=True, dq_tile=(64, 2, 1, True))}
SPLITS = [x for x in VARIANTS if x != "routed"]
PLAIN_ONLY = {"split-n64"}        # (its causal form spills 640 B offline: not timed, to stay under 150 s)


def gluon_bwd(q, k, v, dout, out, lse, causal, variant):
    """A variant as a route would run it: delta (the library's preprocess kernel), then bwd_into into
    fresh dq / dk / dv."""
    delta = backward_gluon.delta_of(out, dout)
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    backward_gluon_d256.bwd_into(q, k, v, dout, lse, delta, D ** -0.5, causal, dq, dk, dv, **VARIANTS[variant])
    return dq, dk, dv


def smoke(variant) -> int:
    """Step 1 (a subprocess of main, one a split variant): small shapes, whole tensors against
    float64, dk / dv bitwise the routed kernel's."""
    print(f"smoke {variant} {torch.cuda.get_device_name()} {time.strftime('%H:%M:%S')}", flush=True)
    bad = 0
    for causal in (False, True):
        for n, nk in ((128, 128), (256, 192)):
            tag = f"smoke {variant} causal={causal} N={n} Nk={nk}"
            try:
                torch.manual_seed(1)
                b, h = 2, 2
                q = torch.randn(b, n, h, D, device="cuda", dtype=DTYPE)
                k, v = (torch.randn(b, nk, h, D, device="cuda", dtype=DTYPE) for _ in range(2))
                dout = torch.randn_like(q)
                kw = dict(softmax_scale=D ** -0.5, window_right=0 if causal else -1)
                out64, lse64 = reference.attention(*(t.double() for t in (q, k, v)), **kw)
                truth = reference.attention_grad(dout.double(), *(t.double() for t in (q, k, v)), **kw)
                lowp = reference.attention_grad(dout, q, k, v, **kw)
                t0 = time.time()
                args = (q, k, v, dout, out64.to(DTYPE), lse64.float().contiguous(), causal)
                g = gluon_bwd(*args, variant)
                torch.cuda.synchronize()
                ref = gluon_bwd(*args, "routed")
                torch.cuda.synchronize()
                ok, res = True, []
                for i, name in enumerate(("dq", "dk", "dv")):
                    err = (g[i].double() - truth[i]).abs().max().item()
                    base = (lowp[i].double() - truth[i]).abs().max().item()
                    good = bool(torch.isfinite(g[i]).all().item()) and err <= 3 * base + 1e-4
                    if name != "dq":
                        good = good and torch.equal(g[i], ref[i])
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
    split, or returns all False (the column goes) for another variant."""
    t0 = time.time()
    try:
        res = subprocess.run([sys.executable, os.path.abspath(__file__), "smoke", variant], capture_output=True,
                             text=True, timeout=SMOKE_TIMEOUT, env=dict(os.environ))
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        print(f"SMOKE {variant} TIMED OUT after {SMOKE_TIMEOUT:.0f} s (a barrier deadlock?); output so far:\n{out}",
              flush=True)
        if variant == "split":
            sys.exit(2)
        return {False: False, True: False}
    print(res.stdout + res.stderr[-3000:], flush=True)
    print(f"smoke {variant} done in {time.time() - t0:.0f} s", flush=True)
    return {c: all(f"smoke {variant} causal={c} N={n} Nk={nk}: SMOKE-OK" in res.stdout
                   for n, nk in ((128, 128), (256, 192))) for c in (False, True)}


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


def parts_ms(q, k, v, dout, out, lse, causal) -> dict:
    """TIMING: the DKDV_ONLY kernel alone and the dQ kernel alone (split's default tiles), each as a
    graph replay of its one launch (delta computed once before)."""
    delta = backward_gluon.delta_of(out, dout)
    la = backward_gluon_d256._launch_args(q, k, v, dout, lse, delta, D ** -0.5, causal, True, 2, split_dq=True)
    kernel = backward_gluon_d256.attn_bwd_d256_gluon_kernel
    return {"dkdv": graph_or_eager_ms(lambda: plans.launch(kernel, la.grid, *la.args, **la.kwargs))[0],
            "dq": graph_or_eager_ms(lambda: la.dq_launch())[0],
            "delta": graph_or_eager_ms(lambda: backward_gluon.delta_of(out, dout))[0]}


def check(n, causal, ok_smoke) -> dict:
    """{variant: passed}: batch 0 / head 0 against float64, every element finite, dk / dv bitwise
    routed's over the whole tensors."""
    tag = f"check N={n}{' causal' if causal else ''}"
    q, k, v, dout, out, lse = inputs(n, causal)
    refs = head0_grad_refs(q, k, v, dout, softmax_scale=D ** -0.5, window_right=0 if causal else -1)
    good, routed = {}, None
    for variant in VARIANTS:
        good[variant] = False
        if variant in SKIP or (variant != "routed" and not ok_smoke[variant][causal]) or \
                (causal and variant in PLAIN_ONLY):
            continue
        try:
            t0 = time.time()
            g = gluon_bwd(q, k, v, dout, out, lse, causal, variant)
            torch.cuda.synchronize()
            good[variant], text = head0_grad_check(g, refs)
            if variant == "routed":
                routed = g
            elif routed is not None:
                bit = torch.equal(g[1], routed[1]) and torch.equal(g[2], routed[2])
                rel = ((g[0].float() - routed[0].float()).abs().max() / routed[0].float().abs().max()).item()
                text += f"; dk / dv bitwise routed's: {bit}; dq max |diff| / max |routed| {rel:.1e}"
                good[variant] = good[variant] and bit
            print(f"{tag} {variant}: {'ok' if good[variant] else 'FAILED'} ({time.time() - t0:.1f} s) {text}",
                  flush=True)
            if variant != "routed":
                del g
        except Exception as exc:  # noqa: BLE001
            print(f"{tag} {variant}: ERROR {short_error(exc)}", flush=True)
            traceback.print_exc(limit=4)
            good[variant] = False
    del q, k, v, dout, out, lse, refs, routed
    torch.cuda.empty_cache()
    return good


def summarize(cases, rows, parts):
    """The Markdown table, the parts and the routing rule from rows {(n, causal, name): [TFLOP/s a round]}."""
    print(f"\nD = {D}, H = {H}, bf16, {TOKENS} tokens; whole backward, TFLOP/s (round 1 / round 2)")
    cols = (*VARIANTS, "cudnn")
    print("| N | causal | B | " + " | ".join(cols) + " | best split / routed (min over rounds) | best split / cuDNN |")
    print("|---|---|---|" + "---|" * (len(cols) + 2))

    def ratio(a, b):
        return min(x / y for x, y in zip(a, b)) if a and len(a) == len(b) else 0.0

    best_split = {}
    for n, causal in cases:
        tf = {name: rows.get((n, causal, name), []) for name in cols}
        cells = [" / ".join(f"{x:.0f}" for x in tf[name]) or "-" for name in cols]
        cand = [(ratio(tf[s], tf["routed"]), s) for s in SPLITS if tf[s]]
        r, s = max(cand, default=(0.0, "-"))
        best_split[(n, causal)] = (r, s)
        vs_cudnn = f"{max(tf[s]) / max(tf['cudnn']):.3f}x" if s != "-" and tf["cudnn"] else "-"
        print(f"| {n} | {'yes' if causal else 'no'} | {TOKENS // n} | {' | '.join(cells)} | "
              f"{r:.3f}x ({s}) | {vs_cudnn} |", flush=True)
    for n, ps in parts.items():
        print(f"parts N={n} (us, per round): " + "; ".join(
            f"dkdv-only {p['dkdv'] * 1e3:.0f}, dq {p['dq'] * 1e3:.0f}, delta {p['delta'] * 1e3:.0f}" for p in ps))
    # the routing rule: the shortest N from which the best split variant is >= 1.02x routed in both
    # rounds, at that N and every longer one measured
    for causal, kind in ((False, "plain"), (True, "causal")):
        ns = sorted(n for n, c in cases if c == causal)
        start = None
        for i, n in enumerate(ns):
            if all(best_split[(m, causal)][0] >= 1.02 for m in ns[i:]):
                start = n
                break
        print(f"routing rule {kind}: " + (f"GLUON_BWD_D256_SPLIT_DQ[{kind!r}] = {start} "
                                          f"(variants: {[best_split[(m, causal)][1] for m in ns if m >= start]})"
                                          if start else "no entry"), flush=True)


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "smoke":
        sys.exit(1 if smoke(sys.argv[2] if len(sys.argv) > 2 else "split") else 0)
    t0 = time.time()
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}", flush=True)
    ok_smoke = {variant: run_smoke(variant) if variant not in SKIP else {False: False, True: False}
                for variant in SPLITS}
    cases = [(int(c[1:]) if c.startswith("c") else int(c), c.startswith("c")) for c in CASES]
    good = {}
    for i, (n, causal) in enumerate(cases):
        faulthandler.dump_traceback_later(CASE_TIMEOUT * (2 if i == 0 else 1), exit=True)
        try:
            good[(n, causal)] = check(n, causal, ok_smoke)
        except Exception as exc:  # noqa: BLE001
            print(f"check N={n} causal={causal}: ERROR {short_error(exc)}", flush=True)
            good[(n, causal)] = {}
        faulthandler.cancel_dump_traceback_later()
    print(f"checks done at {time.time() - t0:.0f} s", flush=True)
    names = [x for x in (*VARIANTS, "cudnn") if x not in SKIP]
    rows, parts = {}, {}
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
                    else:
                        ms, mark = graph_or_eager_ms(lambda: gluon_bwd(q, k, v, dout, out, lse, causal, name))
                    rows.setdefault((n, causal, name), []).append(flops / ms / 1e9)
                    print(f"ab round {rnd + 1} N={n} causal={causal} {name}: {ms * 1e3:.0f}{mark} us "
                          f"{flops / ms / 1e9:.0f} TFLOP/s ({time.time() - t0:.0f} s)", flush=True)
                except Exception as exc:  # noqa: BLE001
                    print(f"ab round {rnd + 1} N={n} causal={causal} {name}: ERROR {short_error(exc)}", flush=True)
            if "parts" not in SKIP and not causal and n in (4096, 16384) and good[(n, causal)].get("split"):
                try:
                    p = parts_ms(q, k, v, dout, out, lse, causal)
                    parts.setdefault(n, []).append(p)
                    f3 = flops * 3 / 5
                    print(f"parts round {rnd + 1} N={n}: dkdv-only {p['dkdv'] * 1e3:.0f} us "
                          f"({flops * 4 / 5 / p['dkdv'] / 1e9:.0f} TFLOP/s, 4 matmuls), dq {p['dq'] * 1e3:.0f} us "
                          f"({f3 / p['dq'] / 1e9:.0f} TFLOP/s, 3 matmuls), delta {p['delta'] * 1e3:.0f} us", flush=True)
                except Exception as exc:  # noqa: BLE001
                    print(f"parts N={n}: ERROR {short_error(exc)}", flush=True)
            del inp
            torch.cuda.empty_cache()
            faulthandler.cancel_dump_traceback_later()
    summarize(cases, rows, parts)
    print(f"total {time.time() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    main()
