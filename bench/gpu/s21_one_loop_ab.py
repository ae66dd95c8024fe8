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
from bwd_ab import alternate, backward_call, kernel_profile, row, tflops, warp_spec
from flashtriton.launchers import backward

VARIANTS = {"four-loops": set(), "one-loop": {64, 128}}


def use(name, ws=None):
    backward.RESUME_ONE_LOOP = set(VARIANTS[name]) if name in VARIANTS else set()
    warp_spec(ws)


def main():
    names = list(VARIANTS)
    for d, n in [(128, 1024), (128, 2048), (128, 4096), (128, 16384), (64, 4096), (64, 8192)]:
        b, h, grad = backward_call(d, n, dict(causal=True))
        res, notes = alternate(grad, names, use, tflops(b, h, n, d))
        print(row(f"D={d} N={n} causal backward TFLOP/s", names, res, notes), flush=True)
    # the window with the split forced (bwd.py, the default there, alongside), ms
    wnames = ["bwd.py"] + names
    _, _, grad = backward_call(128, 16384, dict(window_size=(1024, 0)))
    res, notes = alternate(grad, wnames, lambda nm: use(nm, None if nm == "bwd.py" else "1"), lambda ms: ms)
    print(row("D=128 N=16384 window (1024, 0) backward ms (split forced)", wnames, res, notes, "{:.3f}"), flush=True)
    for name in names:
        use(name)
        _, _, grad = backward_call(128, 1024, dict(causal=True))
        total, cells = kernel_profile(grad, width=32)
        print(f"profile D=128 N=1024 causal {name} ({total:.0f} us a backward): {cells}", flush=True)
    use("four-loops")


if __name__ == "__main__":
    main()
