"""Session 37 probe: the host time of one flashtriton call (forward, backward, forward+backward),
measured with the GPU kept busy by torch.cuda._sleep so that no launch waits for the GPU: the
wall time of the Python call is then all host work. Compared with the GPU time of the same call
(CUDA events, bench.common.time_ms) and with cuDNN's host time. Then cProfile of 50 forward+backward
calls of ours (host functions by total time).

Prediction: with launch plans replaying, ours ~150-250 us of host time a forward+backward (cuDNN
~100-150): below the GPU time at every grid shape (smallest: D = 256 causal 512, 510 us), so the
grid's forward+backward is not host-bound in a quiet process; wrong if ours >= 450 us.

Result (session 37, H200): the _sleep method read ~1.0-1.25 ms a forward+backward for ours and
0.83-1.25 ms for cuDNN (the first call after a long GPU wait runs slow on the host: idle clocks), while
cProfile of 50 back-to-back calls read ~0.5 ms a call for ours (with the profiler's own overhead);
at D = 256 causal 512 (0.525 ms of GPU time) the call is close to host-bound. No lever taken."""
import cProfile
import io
import pstats
import time

import torch

from flashtriton.bench import common, providers

SHAPES = [(32, 8, 512, 256, True), (16, 16, 1024, 128, True), (32, 16, 512, 128, True), (8, 16, 2048, 128, False)]


def host_us(f, reps=20):
    f()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        torch.cuda._sleep(50_000_000)      # ~25+ ms of GPU spinning: launches below never wait
        t0 = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t0)
        torch.cuda.synchronize()
    ts.sort()
    return ts[len(ts) // 2] * 1e6


def main():
    from torch.nn.attention import SDPBackend
    ours, cudnn = providers.ours, providers._sdpa(SDPBackend.CUDNN_ATTENTION)
    for b, h, n, d, causal in SHAPES:
        q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
        dout = torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16)
        line = [f"B={b} H={h} N={n} D={d} causal={causal}:"]
        for name, fn in (("ours", ours), ("cudnn", cudnn)):
            out = fn(q, k, v, causal)
            fwd = lambda: fn(q, k, v, causal)  # noqa: E731
            bwd = lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)  # noqa: E731
            fb = lambda: torch.autograd.grad(fn(q, k, v, causal), (q, k, v), dout)  # noqa: E731
            hs = [host_us(f) for f in (fwd, bwd, fb)]
            gs = [common.time_ms(f, "cuda") * 1e3 for f in (fwd, bwd, fb)]
            line.append(f"{name} host fwd/bwd/fb {hs[0]:.0f}/{hs[1]:.0f}/{hs[2]:.0f} us, "
                        f"GPU {gs[0]:.0f}/{gs[1]:.0f}/{gs[2]:.0f} us;")
        print(" ".join(line), flush=True)
        if (n, d) == (512, 256):
            fb = lambda: torch.autograd.grad(ours(q, k, v, causal), (q, k, v), dout)  # noqa: E731
            pr = cProfile.Profile()
            pr.enable()
            for _ in range(50):
                fb()
            pr.disable()
            torch.cuda.synchronize()
            s = io.StringIO()
            pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(25)
            print(s.getvalue()[:6000])


if __name__ == "__main__":
    main()
