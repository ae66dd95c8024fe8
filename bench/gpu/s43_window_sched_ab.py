"""Session 43 (prepared offline in session 42; bench/wip/gluon-window-sched.patch): the window forward with the host's
longest-first deal (SCHEDULED with WINDOW, launchers/schedule.py window_schedule) against the routed round robin.

Why: session 42's TIMELINE of the routed window forward (PERSISTENT, O_STAGE, LEAN_MASK; (1024, 0), 16k, D = 128,
H = 16) read SM end times max / mean 1.070, where a static deal's floor is 16 / 15.52 = 1.031 blocks (2048 blocks on
132 CTAs). Model (schedule.makespan in key tiles + 1.5 a block): round robin 168 against LPT ~160. Prediction:
+3-5% at 16k, +1-3% at 4k (B = 4), outputs bitwise. Kernel-only CUDA-graph replays, three interleaved rounds.

Run: PYTHONPATH=src python bench/gpu/s43_window_sched_ab.py (session 43 call 1 ran it with the patch, now in the tree)
"""
import torch

from flashtriton.launchers import forward_gluon

from s42_timing import kernel_ms


def main():
    h, d, w = 16, 128, 1024
    for n, b in ((16384, 1), (4096, 4)):
        torch.manual_seed(0)
        q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        band = sum(min(i, w) + 1 for i in range(n))
        fl = 4 * b * h * band * d
        runs, outs = {}, {}
        for name, kw in (("O_STAGE LEAN (routed)", dict()), ("+ SCHEDULED", dict(scheduled=True))):
            o = torch.full_like(q, float("nan"))
            lse = torch.full((b, h, n), float("nan"), device="cuda", dtype=torch.float32)
            runs[name] = forward_gluon._launch_into(q, k, v, o, lse, d ** -0.5, 128, 128, 3, False, window=(w, 0),
                                                    persistent=True, lean_mask=True, o_stage=True, **kw)
            outs[name] = (o, lse)
        res = {x: [] for x in runs}
        for _ in range(3):
            for name, fn in runs.items():
                res[name].append(fl / kernel_ms(fn) / 1e9)
        for fn in runs.values():
            fn()
        torch.cuda.synchronize()
        (o1, l1), (o2, l2) = outs.values()
        print(f"window (1024, 0) N={n} B={b}: " + "; ".join(f"{x} {' / '.join(f'{y:.0f}' for y in ys)}"
                                                           for x, ys in res.items())
              + f" band TFLOP/s; bitwise {torch.equal(o1, o2) and torch.equal(l1, l2)}", flush=True)


if __name__ == "__main__":
    main()
