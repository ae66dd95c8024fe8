"""Session 20: the window (1024, 0) backward at N = 16k, D = 128 (issue 3: 0.61x causal's
band TFLOP/s, target 0.85x; behind Flex's 1.246 ms) with the split path on one kernel
only (launchers.backward.SPLIT_KERNELS["window"]).

The split on both kernels measured 1.55 against bwd.py's 1.29 ms (s20 call 1), but no
run split the time per kernel: if one of the two gains from bwd_ws.py while the other
loses, mixing takes the gain. First a per-kernel profile (torch.profiler, 10 backward
calls each: bwd.py and the split on both), then the backward ms of bwd.py / split both
/ split dQ only / split dK/dV only, two rounds alternating (time_ms, plans cleared;
gradients against bwd.py's, NaN counted).

Prediction (from the dQ side's shape: a 128-row query block against ~9 key tiles of
the band, where bwd.py's dQ runs 64 x 64 tiles at 4 warps): the dQ split level to -5%
against bwd.py's dQ, the dK/dV split the loser (its resumed launch reloads K and V for
the left edge's tiles): the mixed variant at best ~3% faster than bwd.py.

    PYTHONPATH=src python bench/gpu/s20_window_split_ab.py

Result (s20/call5): both sides lose (bench/NOTES.md, Session 20). The switch it sets was
removed after the run; to run this again, re-add it: launchers.backward.SPLIT_KERNELS
({"window": kernels, "other": kernels}), a `kernels` argument of _bwd_warp_spec that skips
the other launch, and in the split branch bwd.py's whole launch (_tile) for a kernel not
named.
"""
import os
from collections import defaultdict

import torch

import flashtriton
from flashtriton.bench.common import time_ms
from flashtriton.launchers import backward, plans

N, H, D, WINDOW = 16384, 16, 128, (1024, 0)
VARIANTS = {"bwd.py": (None, ("dkdv", "dq")), "split-both": ("1", ("dkdv", "dq")),
            "split-dq": ("1", ("dq",)), "split-dkdv": ("1", ("dkdv",))}


def use(name):
    ws, kernels = VARIANTS[name]
    backward.SPLIT_KERNELS = {"window": kernels, "other": ("dkdv", "dq")}
    if ws is None:
        os.environ.pop("FLASHTRITON_WARP_SPEC", None)
    else:
        os.environ["FLASHTRITON_WARP_SPEC"] = ws
    plans.clear()


def main():
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, N, H, D, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    out = flashtriton.flash_attn_func(q, k, v, window_size=WINDOW)
    dout = torch.randn_like(out)

    def grad():
        return torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)
    for name in ("bwd.py", "split-both"):
        use(name)
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
        cells = ", ".join(f"{k_[:40]} {t:.0f}" for k_, t in sorted(per.items(), key=lambda x: -x[1]) if t > 1)
        print(f"profile {name} (us a backward): {cells}", flush=True)
    names = list(VARIANTS)
    res, ref, notes = {}, None, {}
    for rnd in range(2):
        for name in (names if rnd == 0 else names[::-1]):
            use(name)
            g = grad()
            nan = sum(int(x.isnan().sum()) for x in g)
            ref = g if ref is None else ref
            err = max(((x.float() - y.float()).abs().max() / y.float().abs().max()).item() for x, y in zip(g, ref))
            notes[name] = f"err {err:.1e}, NaN {nan}"
            res.setdefault(name, []).append(time_ms(grad, "cuda"))
    print(f"window {WINDOW} N={N} D={D} backward ms: " + "  ".join(
        f"{nm} " + " / ".join(f"{x:.3f}" for x in res[nm]) + f" ({notes[nm]})" for nm in names), flush=True)
    use("bwd.py")


if __name__ == "__main__":
    main()
