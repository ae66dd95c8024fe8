"""Session 29: the launches around the fused Gluon backward (launchers/backward_gluon.py's
switches, both off by default, written offline in session 29 and never run yet):
  - old:      the delta preprocess, zero_f32_kernel (dq_accum = 0), the fused kernel,
              cast_kernel (dq = dq_accum in q's dtype): 4 launches (today's route);
  - pre:      FUSED_DQ_ZERO_IN_PREPROCESS: the preprocess zeroes dq_accum too
              (bwd_preprocess_kernel's DQ_ACCUM), no zero launch: 3 launches;
  - pre+rev:  also FUSED_DQ_CAST_REVERSE (the cast's blocks in reverse order: the end of
              dq_accum, the rows of the fused kernel's last CTAs, read while still in L2).
All three exact: dk / dv bitwise, dq up to the fused kernel's own fp32 summation order.

    PYTHONPATH=src timeout 240 python bench/gpu/s29_fused_dq_accum_ab.py    # < 150 s, compiles included
    (then: PYTHONPATH=src python -m pytest -q -m gpu tests/test_bwd_gluon.py -k "fused_dq or preprocess or cast")

What runs: launchers.backward.bwd (the library's backward entry), kernel-only (a CUDA-graph
replay, L2 flushed: bench.common.graph_time_ms; no autograd, no forward; FLASHTRITON_PLANS=0
so no plan keeps a setting across the flips), on out / lse of the library's forward,
deterministic=False, the fused route forced for every case (policy.GLUON_BWD_FUSED_MIN_N
set to 0 for the case's kind and D: D = 64 plain takes it only from 8k by default; what is
measured is the overhead around the kernel, the same at every routed size). Shapes: 16k
tokens (B = 16k / N), hidden 2048 (H = 16 at D = 128, 32 at D = 64), bf16, N = 1k / 2k /
4k / 16k, causal and not. First (at N = 1k and 4k: S29_CHECK_NS), gradients of each
setting against float64 on batch 0, head 0 (error <= 3x PyTorch's bf16 error) and against the old path (dk / dv bitwise, dq
max relative difference). Then two rounds of timings, the second in reverse order
(settings and shapes). Last, a torch-profiler breakdown of one N = 1k, D = 128 call under
old and pre+rev (kernel names, GPU us).

Offline (bench/dq_accum_compile.py, sm_90a, typed as the routed launches): preprocess
D = 128 40 -> 54 registers with DQ_ACCUM (16 LDG.128, 1 -> 17 STG: 16 x 16-byte zero
stores a thread), D = 64 32 -> 33; no spills; the cast 32 registers either order. The
variants without DQ_ACCUM / REVERSE: SASS identical to main's (sha1 of the instructions).
The fused Gluon kernel is not touched.

PREDICTION (written before any run). Session 28's profile at 16k tokens, H = 16, D = 128:
fused kernel + cast 52 + preprocess 38 + zero 30 us. Bytes: O and dO 67 MB each, dq_accum
134 MB (fp32), dq 67 MB. zero: 134 MB written in 30 us (4.47 TB/s); preprocess 134 MB read
in 38 us (3.5 TB/s). pre: one pass reading 134 and writing 135 MB; at 4.2-4.5 TB/s of mixed
traffic 60-64 us against 68 + a launch gap and a second ramp / tail (~2-4 us in a graph):
-4 to -10 us a backward (a mixed read / write stream may run below the pure write rate:
the low end). rev: at B >= 2 the fused kernel's last waves ((b, KV head) pairs in grid
order, 132 CTAs a wave) leave the END of dq_accum in L2 (dirty, just reduce-added): at
N = 1k, 16.5 heads a wave x 512 KB = 8.4 MB a wave, ~15 MB of it still resident beside
the waves' Q / dO / K / V: ~15 of the cast's 134 MB read from L2, -3 to -5 us of its 52;
at N = 16k (B = 1) a wave is one head's columns, interleaved through every row: ~0.
Whole backward: pre+rev -7 to -14 us at N = 1k / 2k / 4k (0.8-1.5% of 0.86 ms at 1k, D =
128 non-causal; ~0.5% at 2k, ~0.3% at 4k), -4 to -10 us at 16k (noise level against
10.7 ms); causal (half the kernel time) about twice those fractions. The same microseconds
at D = 64 (the same bytes). This does not close issue 4's gap alone (0.94-0.96x cuDNN at
D = 128): the cast's pass (52 us) stays; removing it needs the kernel to write dq itself
(bench/NOTES.md, session 29: the arrival-counter design and why it was not done offline).
If pre is slower than old anywhere beyond noise (a mixed pass slower than the two pure
ones), keep the zero launch and take rev alone.
"""
import os
import sys
import time
import traceback

os.environ.setdefault("FLASHTRITON_PLANS", "0")       # (before flashtriton: no plan keeps a setting)

import torch  # noqa: E402

from flashtriton.bench.common import (graph_time_ms, head0_grad_check, head0_grad_refs,  # noqa: E402
                                      kernel_times_us, time_ms, short_error)
from flashtriton.launchers import backward as lib_backward  # noqa: E402
from flashtriton.launchers import backward_gluon, plans, policy  # noqa: E402
from flashtriton.launchers import forward as lib_forward  # noqa: E402
from flashtriton.launchers.common import AttnParams  # noqa: E402

DTYPE = torch.bfloat16
TOKENS = 16384
NS = [int(x) for x in os.environ.get("S29_NS", "1024,2048,4096,16384").split(",")]
DS = [int(x) for x in os.environ.get("S29_DS", "128,64").split(",")]
CASES = [(d, n, causal) for d in DS for n in NS for causal in (False, True)]
CHECK_NS = [int(x) for x in os.environ.get("S29_CHECK_NS", "1024,4096").split(",")]   # (the f64 checks' N)
SETTINGS = {"old": (False, False), "pre": (True, False), "pre+rev": (True, True)}
SEEN = []
_real_fused_into = backward_gluon.fused_into


def _spy(*a, **kw):
    SEEN.append(kw.get("preprocess") is not None)
    return _real_fused_into(*a, **kw)


backward_gluon.fused_into = _spy


def setting(name: str) -> None:
    backward_gluon.FUSED_DQ_ZERO_IN_PREPROCESS, backward_gluon.FUSED_DQ_CAST_REVERSE = SETTINGS[name]
    plans.clear()


def force_route(d: int, causal: bool) -> None:
    policy.GLUON_BWD_FUSED_MIN_N["causal" if causal else "plain"][d] = 0


def params(d, causal):
    return AttnParams(d ** -0.5, window_right=0 if causal else -1, deterministic=False)


def make_inputs(d, n, causal, seed=0):
    h, b = 2048 // d, TOKENS // n
    torch.manual_seed(seed)
    q = torch.randn(b, n, h, d, device="cuda", dtype=DTYPE)
    k, v = (torch.randn(b, n, h, d, device="cuda", dtype=DTYPE) for _ in range(2))
    dout = torch.randn_like(q)
    out, lse = lib_forward.fwd(q, k, v, params(d, causal))
    return q, k, v, dout, out, lse


def call(d, causal, inp):
    q, k, v, dout, out, lse = inp
    return lambda: lib_backward.bwd(dout, q, k, v, out, lse, params(d, causal))


def check_one_head(d, causal, inp, grads) -> tuple:
    q, k, v, dout, _, _ = inp
    return head0_grad_check(grads, head0_grad_refs(q, k, v, dout, softmax_scale=d ** -0.5,
                                                   window_right=0 if causal else -1))


def checks():
    for d, n, causal in CASES:
        if n not in CHECK_NS:
            continue
        force_route(d, causal)
        inp = make_inputs(d, n, causal)
        grads = {}
        for name in SETTINGS:
            tag = f"check D={d} N={n} causal={causal} {name}"
            try:
                setting(name)
                SEEN.clear()
                print(f"{tag}: launching {time.strftime('%H:%M:%S')}", flush=True)
                g = [t.clone() for t in call(d, causal, inp)()]
                torch.cuda.synchronize()
                routed = "route ok" if SEEN == [True] else f"ROUTE WRONG (fused_into: {SEEN})"
                ok, text = check_one_head(d, causal, inp, g)
                grads[name] = g
                print(f"{tag}: {'ok' if ok else 'FAILED'} {routed}; {text}", flush=True)
            except Exception as exc:  # noqa: BLE001  (reported, not fatal)
                print(f"{tag}: ERROR {short_error(exc)}", flush=True)
                traceback.print_exc(limit=3)
        for name in ("pre", "pre+rev"):
            if name in grads and "old" in grads:
                a, o = grads[name], grads["old"]
                dq = ((a[0].float() - o[0].float()).abs().max() / o[0].float().abs().max()).item()
                bit = torch.equal(a[1], o[1]) and torch.equal(a[2], o[2])
                print(f"check D={d} N={n} causal={causal} {name} vs old: dk/dv {'bitwise' if bit else 'DIFFER'}, "
                      f"dq rel diff {dq:.1e}", flush=True)
        del inp, grads
        torch.cuda.empty_cache()
    setting("old")


def timed(fn) -> tuple:
    try:
        return graph_time_ms(fn), ""
    except Exception as exc:  # noqa: BLE001
        print(f"  (graph capture failed: {short_error(exc)}; eager)", flush=True)
        torch.cuda.synchronize()
        return time_ms(fn, "cuda"), "*"


def ab():
    rows = {}
    names = list(SETTINGS)
    for rnd in range(2):
        cases = CASES if rnd == 0 else CASES[::-1]
        for d, n, causal in cases:
            force_route(d, causal)
            inp = make_inputs(d, n, causal)
            for name in (names if rnd == 0 else names[::-1]):
                try:
                    setting(name)
                    ms, mark = timed(call(d, causal, inp))
                    rows.setdefault((d, n, causal, name), []).append(ms)
                    print(f"ab round {rnd + 1} D={d} N={n} causal={causal} {name}: {ms * 1e3:.1f}{mark} us",
                          flush=True)
                except Exception as exc:  # noqa: BLE001
                    print(f"ab round {rnd + 1} D={d} N={n} causal={causal} {name}: ERROR {short_error(exc)}", flush=True)
            del inp
            torch.cuda.empty_cache()
    setting("old")
    print("\n| D | N | causal | old us (r1 / r2) | pre us | pre+rev us | pre - old (best) | pre+rev - old (best) |")
    print("|---|---|---|---|---|---|---|---|")
    for d, n, causal in CASES:
        r = {name: rows.get((d, n, causal, name), []) for name in names}
        if not all(r.values()):
            continue
        best = {name: min(v) for name, v in r.items()}
        cells = [" / ".join(f"{ms * 1e3:.1f}" for ms in r[name]) for name in names]
        print(f"| {d} | {n} | {'yes' if causal else 'no'} | {' | '.join(cells)} | "
              f"{(best['pre'] - best['old']) * 1e3:+.1f} ({best['pre'] / best['old'] - 1:+.1%}) | "
              f"{(best['pre+rev'] - best['old']) * 1e3:+.1f} ({best['pre+rev'] / best['old'] - 1:+.1%}) |", flush=True)


def profile():
    d, n, causal = 128, 1024, False
    force_route(d, causal)
    inp = make_inputs(d, n, causal)
    for name in ("old", "pre+rev"):
        try:
            setting(name)
            ev = kernel_times_us(call(d, causal, inp), top=6)
            print(f"profile D={d} N={n} {name}: " + "; ".join(f"{k[:50]} {t:.0f} us" for k, t in ev), flush=True)
        except Exception as exc:  # noqa: BLE001
            print(f"profile {name}: ERROR {short_error(exc)}", flush=True)
    setting("old")


def main(argv):
    what = argv[1] if len(argv) > 1 else "all"
    t0 = time.time()
    saved = {kind: dict(t) for kind, t in policy.GLUON_BWD_FUSED_MIN_N.items()}
    try:
        if what in ("all", "check"):
            checks()
        if what in ("all", "ab"):
            ab()
        if what in ("all", "profile"):
            profile()
    finally:
        for kind, t in saved.items():
            policy.GLUON_BWD_FUSED_MIN_N[kind].clear()
            policy.GLUON_BWD_FUSED_MIN_N[kind].update(t)
        setting("old")
    print(f"done in {time.time() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    main(sys.argv)
