"""Prepared in session 20 for session 21: the split path's resumed launches with their
tiles in one loop (launchers.backward.RESUME_ONE_LOOP, bwd.py ONE_LOOP).

Why: s20/call7's profile of the causal D = 128 backward at N = 1k: the resumed launches
took 424 of 860 us (dK/dV 286, dQ 138) for ~18% of the work; a resumed program runs its
one to three tiles in up to four loops of one or two iterations each, which the pipeliner
cannot overlap. One loop, the mask on every tile: the same tiles in the same order
(bitwise the same gradients under the interpreter: test_split_backward_resumed_in_one_loop),
and offline sm_90a (bench/one_loop_compile.py) less spill (D = 128 halved dK/dV 328 -> 220
bytes; D = 64 580 -> 256) and a quarter of the code (HGMMA 96 -> 24).

Variants (backward alone, autograd.grad of a fixed forward, time_ms median, plans cleared,
two rounds alternating, gradients against the first variant's - expected bitwise equal -
and NaN counted): four loops (the default) / one loop. Cases: causal D = 128 at 1k / 2k /
4k / 16k, D = 64 at 4k / 8k (the split path's default range), window (1024, 0) at 16k with
the split forced (bwd.py alongside, ms). Then the per-kernel profile at causal D = 128 1k.

Prediction: the resumed launches -30-50%: causal D = 128 backward +10-20% at 1k / 2k,
+4-8% at 4k, +2-4% at 16k; D = 64 +3-8%; the window split from 1.55 to ~1.3-1.4 ms (level
with bwd.py's 1.29 at best).

    PYTHONPATH=src python bench/gpu/s21_one_loop_ab.py
"""
import os
from collections import defaultdict

import torch

import flashtriton
from flashtriton.bench.common import attention_flops, time_ms
from flashtriton.launchers import backward, plans

VARIANTS = {"four-loops": set(), "one-loop": {64, 128}}


def use(name, ws=None):
    backward.RESUME_ONE_LOOP = set(VARIANTS[name]) if name in VARIANTS else set()
    if ws is None:
        os.environ.pop("FLASHTRITON_WARP_SPEC", None)
    else:
        os.environ["FLASHTRITON_WARP_SPEC"] = ws
    plans.clear()


def inputs(d, n, kw):
    b, h = 16384 // n, 2048 // d
    torch.manual_seed(0)
    q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    out = flashtriton.flash_attn_func(q, k, v, **kw)
    dout = torch.randn_like(out)
    return b, h, lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)


def ab(d, n, kw, names, ws, label):
    b, h, grad = inputs(d, n, kw)
    res, ref, notes = {}, None, {}
    for rnd in range(2):
        for name in (names if rnd == 0 else names[::-1]):
            use(name, None if name == "bwd.py" else ws)
            g = grad()
            nan = sum(int(x.isnan().sum()) for x in g)
            ref = g if ref is None else ref
            same = all(torch.equal(x, y) for x, y in zip(g, ref))
            err = max(((x.float() - y.float()).abs().max() / y.float().abs().max()).item() for x, y in zip(g, ref))
            notes[name] = f"{'bitwise' if same else f'err {err:.1e}'}, NaN {nan}"
            ms = time_ms(grad, "cuda")
            res.setdefault(name, []).append(attention_flops(b, h, n, n, d, True, "bwd") / ms / 1e9
                                            if kw.get("causal") else ms)
    fmt = "{:.0f}" if kw.get("causal") else "{:.3f}"
    print(f"D={d} N={n} {label}: " + "  ".join(
        f"{nm} " + " / ".join(fmt.format(x) for x in res[nm]) + f" ({notes[nm]})" for nm in names), flush=True)


def profile(d, n, name):
    use(name)
    _, _, grad = inputs(d, n, dict(causal=True))
    for _ in range(3):
        grad()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(10):
            grad()
        torch.cuda.synchronize()
    per = defaultdict(float)
    for ev in prof.key_averages():
        t = getattr(ev, "self_device_time_total", None)
        per[ev.key] += (t if t is not None else getattr(ev, "self_cuda_time_total", 0)) / 10
    print(f"profile D={d} N={n} causal {name} (us a backward): " + ", ".join(
        f"{k[:32]} {t:.0f}" for k, t in sorted(per.items(), key=lambda x: -x[1]) if t >= 1), flush=True)


def main():
    names = list(VARIANTS)
    for d, n in [(128, 1024), (128, 2048), (128, 4096), (128, 16384), (64, 4096), (64, 8192)]:
        ab(d, n, dict(causal=True), names, None, "causal backward TFLOP/s")
    ab(128, 16384, dict(window_size=(1024, 0)), ["bwd.py"] + names, "1", "window (1024, 0) backward ms (split forced)")
    for name in names:
        profile(128, 1024, name)
    use("four-loops")


if __name__ == "__main__":
    main()
