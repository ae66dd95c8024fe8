"""Session 14: cProfile of the eager decode step's host path on the GPU machine (B = 1,
L = 8k, bf16, Hq 32 / Hk 8 / D 128), the GPU held busy so no call waits on it. Host time per
call first without the profiler (s14_decode_eager.py measured 107-338 us, cuDNN's 47-84)."""
import cProfile
import pstats
import time

import torch

from flashtriton.bench import decode as bd


def main():
    inp = bd.make_inputs(1, 8192, "cuda")
    fn = lambda: bd.ours(inp)  # noqa: E731
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    for rep in range(3):
        torch.cuda._sleep(400_000_000)
        t0 = time.perf_counter()
        for _ in range(200):
            fn()
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        print(f"host per call {((t1 - t0) / 200 * 1e6):.1f} us", flush=True)
    torch.cuda._sleep(800_000_000)
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(300):
        fn()
    prof.disable()
    torch.cuda.synchronize()
    st = pstats.Stats(prof)
    st.sort_stats("tottime").print_stats(30)
    st.sort_stats("cumtime").print_stats(30)


if __name__ == "__main__":
    main()
