"""The backward A/B harness the session-20 / 21 scripts share (bench/gpu/s20_*.py,
s21_*.py): one backward call on the grid's shapes, variants timed two rounds in
alternating order with their gradients compared, and a per-kernel profile. Scripts
import it as `from bwd_ab import ...` (Python puts the script's folder on sys.path).

(s20_split_short_ab.py, s20_resume_sweep.py, s20_window_split_ab.py and s20_short_bwd_profile.py were moved onto
it after their runs, same logic; git history holds the versions that ran.)
"""
import os
from collections import defaultdict

import torch

import flashtriton
from flashtriton.bench.common import attention_flops, time_ms
from flashtriton.launchers import plans


def warp_spec(ws):
    """FLASHTRITON_WARP_SPEC = ws ("1": forced), or unset (the policy's choice) with None;
    then the launch plans cleared (they key on the environment, not on module switches)."""
    if ws is None:
        os.environ.pop("FLASHTRITON_WARP_SPEC", None)
    else:
        os.environ["FLASHTRITON_WARP_SPEC"] = ws
    plans.clear()


def backward_call(d, n, kw, device="cuda"):
    """(b, h, grad): bf16 inputs of the FA2 grid (16k tokens, hidden 2048; b = h = 1 / 2 off
    the GPU, for smoke runs), one forward, and grad() = its backward (autograd.grad of a
    fixed dout, graph kept)."""
    b, h = (16384 // n, 2048 // d) if device == "cuda" else (1, 2)
    torch.manual_seed(0)
    q, k, v = (torch.randn(b, n, h, d, device=device, dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    out = flashtriton.flash_attn_func(q, k, v, **kw)
    dout = torch.randn_like(out)
    return b, h, lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)


def alternate(grad, names, use, measure, device="cuda"):
    """Two rounds, the second in reverse order: use(name) switches the variant, then one
    call's gradients are compared with the first variant's (bitwise, or the largest
    relative difference) and NaN counted, then measure(ms) of time_ms(grad) is kept.
    Returns (results name -> [two values], notes name -> str)."""
    res, ref, notes = {}, None, {}
    bench = dict(warmup_ms=1, rep_ms=1) if device != "cuda" else {}
    for rnd in range(2):
        for name in (names if rnd == 0 else names[::-1]):
            use(name)
            g = grad()
            nan = sum(int(x.isnan().sum()) for x in g)
            ref = g if ref is None else ref
            same = all(torch.equal(x, y) for x, y in zip(g, ref))
            err = max(((x.float() - y.float()).abs().max() / y.float().abs().max()).item() for x, y in zip(g, ref))
            notes[name] = f"{'bitwise' if same else f'err {err:.1e}'}, NaN {nan}"
            res.setdefault(name, []).append(measure(time_ms(grad, device, **bench)))
    return res, notes


def tflops(b, h, n, d, causal=True):
    """measure() for alternate: backward TFLOP/s (FA2 count) from ms."""
    return lambda ms: attention_flops(b, h, n, n, d, causal, "bwd") / ms / 1e9


def row(label, names, res, notes, fmt="{:.0f}"):
    """One printed line: label, then each variant's two values and its note."""
    return f"{label}: " + "  ".join(
        f"{nm} " + " / ".join(fmt.format(x) for x in res[nm]) + f" ({notes[nm]})" for nm in names)


def kernel_profile(fn, iters=10, width=48):
    """(total us, "kernel us, ...") of fn's GPU time by kernel, a call averaged over iters
    calls after 3 warm-ups (torch.profiler)."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(iters):
            fn()
        torch.cuda.synchronize()
    per = defaultdict(float)
    for ev in prof.key_averages():
        t = getattr(ev, "self_device_time_total", None)
        per[ev.key] += (t if t is not None else getattr(ev, "self_cuda_time_total", 0)) / iters
    cells = ", ".join(f"{k[:width]} {t:.0f}" for k, t in sorted(per.items(), key=lambda x: -x[1]) if t >= 1)
    return sum(per.values()), cells
