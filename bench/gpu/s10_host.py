"""Session 10: where the host time of an eager fwd+bwd goes on the GPU machine. Call 2's
timeline (s10_bwd_ab.py) showed the causal D = 128 N = 4k fwd+bwd host-bound: ~1 ms from
the forward's launch to the backward's first, and 150-250 us between the backward's
launches, against 1.5 ms of kernels. cProfile over 30 calls (CUDA work still async), then
the wall time per call without the profiler, and the same for one forward alone."""
import cProfile
import pstats
import sys
import time


def main():
    import torch
    import flashtriton
    b, n, h, d = 2, 4096, 16, 128
    q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    dout = torch.randn_like(q)
    for causal in (True, False):
        f = lambda: torch.autograd.grad(flashtriton.flash_attn_func(q, k, v, causal=causal), (q, k, v), dout)  # noqa
        for _ in range(5):
            f()
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(30):
            f()
        host = (time.perf_counter() - t) / 30
        torch.cuda.synchronize()
        wall = (time.perf_counter() - t) / 30
        print(f"causal={causal}: host {host * 1e6:.0f} us / call (enqueue), wall {wall * 1e6:.0f} us / call",
              flush=True)
        if causal:
            pr = cProfile.Profile()
            pr.enable()
            for _ in range(30):
                f()
            pr.disable()
            torch.cuda.synchronize()
            st = pstats.Stats(pr)
            st.sort_stats("tottime").print_stats(30)
            st.sort_stats("cumtime").print_stats(45)
    # the forward alone, small: the host path with nothing to wait for
    qs, ks, vs = (torch.randn(1, 512, 16, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    for causal in (False, True):
        g = lambda: flashtriton.flash_attn_func(qs, ks, vs, causal=causal)  # noqa
        for _ in range(20):
            g()
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(200):
            g()
        print(f"forward N=512 causal={causal}: host {(time.perf_counter() - t) / 200 * 1e6:.0f} us / call", flush=True)


if __name__ == "__main__":
    main()
    sys.exit(0)
