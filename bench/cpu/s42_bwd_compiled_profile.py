"""Phase split (session 42) of the compiled float32 backward (cpu/native_backward.py): its FT_PROF build
sums TSC cycles per phase over the threads (packing, S^T + dP^T, the exp2 / dS pass, dV + dK, dQ), at
B=1 H=8 N=2048 D=64 fp32, non-causal and causal, 1 and 2 threads.

    python bench/cpu/s42_bwd_compiled_profile.py
"""
import ctypes
import time

import torch

from flashtriton.cpu import fwd, native_backward
from flashtriton.launchers.prefill import AttnParams

PHASES = ("pack", "S^T+dP^T", "exp2/dS", "dV+dK", "dQ")


def main():
    lib = native_backward.load_variant("FT_PROF")
    prof = (ctypes.c_double * 8).in_dll(lib, "ft_prof")
    torch.manual_seed(0)
    n, h, d = 2048, 8, 64
    q, k, v, dout = (torch.randn(1, n, h, d) for _ in range(4))
    before = torch.get_num_threads()
    try:
        for threads in (1, 2):
            torch.set_num_threads(threads)
            for causal in (False, True):
                params = AttnParams(d ** -0.5, -1, 0 if causal else -1)
                out, lse = fwd(q, k, v, params)
                native_backward.backward(lib, dout, q, k, v, out, lse, params)     # warm-up
                for i in range(8):
                    prof[i] = 0.0
                t0 = time.perf_counter()
                native_backward.backward(lib, dout, q, k, v, out, lse, params)
                ms = (time.perf_counter() - t0) * 1e3
                total = sum(prof[:5])
                split = "  ".join(f"{name} {prof[i] / total * 100:.0f}%" for i, name in enumerate(PHASES))
                print(f"threads={threads} causal={causal}: {ms:.1f} ms  {split}")
    finally:
        torch.set_num_threads(before)


if __name__ == "__main__":
    main()
