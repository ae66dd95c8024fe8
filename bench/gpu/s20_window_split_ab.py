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

Result (s20/call5): both sides lose (bench/NOTES.md, Session 20; this file moved onto
bench/gpu/bwd_ab.py after the run). The switch it sets was
removed after the run; to run this again, re-add it: launchers.backward.SPLIT_KERNELS
({"window": kernels, "other": kernels}), a `kernels` argument of _bwd_warp_spec that skips
the other launch, and in the split branch bwd.py's whole launch (_tile) for a kernel not
named.
"""
from bwd_ab import alternate, backward_call, kernel_profile, row, warp_spec
from flashtriton.launchers import backward

D, WINDOW = 128, (1024, 0)      # at N = 16k: B = 1, H = 16
VARIANTS = {"bwd.py": (None, ("dkdv", "dq")), "split-both": ("1", ("dkdv", "dq")),
            "split-dq": ("1", ("dq",)), "split-dkdv": ("1", ("dkdv",))}


def use(name):
    ws, kernels = VARIANTS[name]
    backward.SPLIT_KERNELS = {"window": kernels, "other": ("dkdv", "dq")}
    warp_spec(ws)


def main():
    _, _, grad = backward_call(D, 16384, dict(window_size=WINDOW))
    for name in ("bwd.py", "split-both"):
        use(name)
        total, cells = kernel_profile(grad, width=40)
        print(f"profile {name} ({total:.0f} us a backward): {cells}", flush=True)
    names = list(VARIANTS)
    res, notes = alternate(grad, names, use, lambda ms: ms)
    print(row(f"window {WINDOW} N=16384 D={D} backward ms", names, res, notes, "{:.3f}"), flush=True)
    use("bwd.py")


if __name__ == "__main__":
    main()
