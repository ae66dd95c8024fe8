"""The fused Gluon backward's variant A/B that s30_fused_bwd_d64_ab.py (the WIDE tile) and
s31_fused_bwd_d128_ab.py (DEFER_DQ) share: the library's whole backward
(launchers.backward.bwd: delta preprocess, zero, fused kernel, cast) with the fused route
forced at every N, "old" (the variant's policy table empty) against the variant (its table
set for D) and cuDNN (SDPA CUDNN_ATTENTION's backward, timed as the grid times it:
bench.common.graph_backward_ms). First the checks (batch 0 / head 0 against float64 within
3x PyTorch's same-dtype error, every element finite, the launch seen by a spy on
backward_gluon._run_fused; the variant against old over the whole tensors); a variant that
fails is not timed. Then two timing rounds of CUDA-graph replays, the second in reverse
order. Scripts import it as `from fused_bwd_ab import ...` (Python puts the script's folder
on sys.path). (Both scripts were moved onto it after their session-30 runs, same logic; git
history holds the versions that ran.)
"""
from __future__ import annotations

import os
import time
import traceback
from dataclasses import dataclass
from typing import Callable

os.environ.setdefault("FLASHTRITON_PLANS", "0")

import torch  # noqa: E402

from flashtriton.bench.common import (attention_flops, graph_backward_ms, graph_or_eager_ms,  # noqa: E402
                                      head0_grad_check, head0_grad_refs, short_error)
from flashtriton.launchers import backward as lib_backward  # noqa: E402
from flashtriton.launchers import backward_gluon, plans, policy  # noqa: E402
from flashtriton.launchers import forward as lib_forward  # noqa: E402
from flashtriton.launchers.common import AttnParams  # noqa: E402

TOKENS, DTYPE = 16384, torch.bfloat16


@dataclass
class Variant:
    name: str                         # its column: "wide", "defer"
    table: str                        # its policy table: gluon_kind -> frozenset of head dims
    kinds: tuple                      # the table's keys (each emptied for "old")
    launched: Callable[[dict], object]  # the fused launch's constexprs -> what tells the variant ran
    expect: Callable[[bool], object]    # on (the variant) / off (old) -> launched's value


@dataclass
class Setup:
    variant: Variant
    d: int
    h: int
    cases: list                       # [(N, causal)], B = TOKENS // N
    check_ns: list


SEEN = []
_real_run = backward_gluon._run_fused


def _install_spy(variant: Variant) -> None:
    def spy(*a, **kw):
        SEEN.append(variant.launched(a[6]))
        return _real_run(*a, **kw)
    backward_gluon._run_fused = spy


def _setting(s: Setup, name: str, causal: bool) -> None:
    kind = "causal" if causal else "plain"
    policy.GLUON_BWD_FUSED_MIN_N[kind][s.d] = 0                      # the fused route at every N
    setattr(policy, s.variant.table, {k: frozenset() for k in s.variant.kinds})
    if name == s.variant.name:
        getattr(policy, s.variant.table)[kind] = frozenset({s.d})
    plans.clear()


def _params(s: Setup, causal: bool) -> AttnParams:
    return AttnParams(s.d ** -0.5, window_right=0 if causal else -1, deterministic=False)


def _inputs(s: Setup, n: int, causal: bool, seed: int = 0):
    torch.manual_seed(seed)
    b = TOKENS // n
    q, k, v = (torch.randn(b, n, s.h, s.d, device="cuda", dtype=DTYPE) for _ in range(3))
    dout = torch.randn_like(q)
    out, lse = lib_forward.fwd(q, k, v, _params(s, causal))
    return q, k, v, dout, out, lse


def _call(s: Setup, causal: bool, inp):
    q, k, v, dout, out, lse = inp
    return lambda: lib_backward.bwd(dout, q, k, v, out, lse, _params(s, causal))


def _cudnn_ms(s: Setup, causal: bool, inp) -> float:
    """cuDNN's backward: forward+backward captured together minus the forward alone (a
    backward captured without its forward fails: autograd runs it on the forward's stream,
    and the failed capture left the CUDA generator unusable, session 30 call A)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    q, k, v, dout, _, _ = inp
    qt, kt, vt = (t.transpose(1, 2).detach().requires_grad_() for t in (q, k, v))

    def fwd():
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=causal, scale=s.d ** -0.5)

    return graph_backward_ms(fwd, (qt, kt, vt), dout.transpose(1, 2))


def checks(s: Setup, bad: set) -> None:
    names = ("old", s.variant.name)
    for n, causal in s.cases:
        if n not in s.check_ns:
            continue
        inp = _inputs(s, n, causal)
        q, k, v, dout, _, _ = inp
        refs = head0_grad_refs(q, k, v, dout, softmax_scale=s.d ** -0.5, window_right=0 if causal else -1)
        grads = {}
        for name in names:
            tag = f"check N={n} causal={causal} {name}"
            try:
                _setting(s, name, causal)
                SEEN.clear()
                print(f"{tag}: launching {time.strftime('%H:%M:%S')}", flush=True)
                g = [t.clone() for t in _call(s, causal, inp)()]
                torch.cuda.synchronize()
                want = s.variant.expect(name != "old")
                routed = "route ok" if SEEN == [want] else f"ROUTE WRONG (launched: {SEEN})"
                ok, text = head0_grad_check(g, refs)
                if not ok or SEEN != [want]:
                    bad.add((name, causal))
                grads[name] = g
                print(f"{tag}: {'ok' if ok else 'FAILED'} {routed}; {text}", flush=True)
            except Exception as exc:  # noqa: BLE001  (reported, not fatal)
                bad.add((name, causal))
                print(f"{tag}: ERROR {short_error(exc)}", flush=True)
                traceback.print_exc(limit=3)
        if len(grads) == 2:
            a, o = grads[s.variant.name], grads["old"]
            dq = ((a[0].float() - o[0].float()).abs().max() / o[0].float().abs().max()).item()
            bit = torch.equal(a[1], o[1]) and torch.equal(a[2], o[2])
            dk = (a[1].float() - o[1].float()).abs().max().item()
            print(f"check N={n} causal={causal} {s.variant.name} vs old: dk/dv "
                  f"{'bitwise' if bit else f'differ (dk max {dk:.1e})'}, dq rel diff {dq:.1e}", flush=True)
        del inp, grads
        torch.cuda.empty_cache()


def ab(s: Setup, bad: set) -> None:
    var = s.variant.name
    variants = ("old", var)
    names = list(variants) + ["cudnn"]
    rows = {}
    for rnd in range(2):
        for n, causal in (s.cases if rnd == 0 else s.cases[::-1]):
            inp = _inputs(s, n, causal)
            for name in (names if rnd == 0 else names[::-1]):
                if (name, causal) in bad:
                    continue
                try:
                    if name == "cudnn":
                        ms, mark = _cudnn_ms(s, causal, inp), ""
                    else:
                        _setting(s, name, causal)
                        ms, mark = graph_or_eager_ms(_call(s, causal, inp))
                    rows.setdefault((n, causal, name), []).append(ms)
                    tf = attention_flops(TOKENS // n, s.h, n, n, s.d, causal, "bwd") / ms / 1e9
                    print(f"ab round {rnd + 1} N={n} causal={causal} {name}: {ms * 1e3:.1f}{mark} us "
                          f"{tf:.0f} TFLOP/s", flush=True)
                except Exception as exc:  # noqa: BLE001
                    print(f"ab round {rnd + 1} N={n} causal={causal} {name}: ERROR {short_error(exc)}", flush=True)
            del inp
            torch.cuda.empty_cache()
    print(f"\nD = {s.d}, H = {s.h}")
    print(f"\n| N | causal | old TFLOP/s (r1 / r2) | {var} | cuDNN | {var} / old (best) | old, {var} vs cuDNN (best) |")
    print("|---|---|---|---|---|---|---|")
    for n, causal in s.cases:
        fl = attention_flops(TOKENS // n, s.h, n, n, s.d, causal, "bwd")
        tf = {name: [fl / ms / 1e9 for ms in rows.get((n, causal, name), [])] for name in names}
        cells = [" / ".join(f"{x:.0f}" for x in tf[name]) or "-" for name in names]
        best = {name: max(v) for name, v in tf.items() if v}
        ratio = f"{best[var] / best['old']:.3f}x" if var in best and "old" in best else "-"
        vs = " / ".join(f"{best[x] / best['cudnn']:.2f}x" for x in variants if x in best and "cudnn" in best)
        print(f"| {n} | {'yes' if causal else 'no'} | {' | '.join(cells)} | {ratio} | {vs or '-'} |", flush=True)


def main(argv, s: Setup) -> None:
    """argv[1] == "checks": the correctness part only."""
    what = argv[1] if len(argv) > 1 else "all"
    t0 = time.time()
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}", flush=True)
    _install_spy(s.variant)
    bad = set()
    checks(s, bad)
    if what != "checks":
        ab(s, bad)
    print(f"done in {time.time() - t0:.0f} s", flush=True)
