"""Session 15: the floor of an eager call's host time on the GPU machine, next to our
decode step and cuDNN's (issue 5, B = 1, L = 8k eager is host-bound: our host 98-143 us
against cuDNN's ~48). Each line: us per call with the GPU held busy (bench.common.host_us,
best of 3 loops of 200). Then cProfile of 300 of our steps, sorted by own time."""
import cProfile
import pstats

import torch
import triton
import triton.language as tl

from flashtriton.bench import decode as bd
from flashtriton.bench.common import host_us


@triton.jit
def _touch(x_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs) + 1)


def main():
    inp = bd.make_inputs(1, 8192, "cuda")
    q = inp["q"]
    x = torch.zeros(128, device="cuda")
    views = (inp["k_cache"].transpose(1, 2).contiguous(), inp["v_cache"].transpose(1, 2).contiguous())
    cudnn = bd._sdpa("CUDNN_ATTENTION")
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    qt = q.transpose(1, 2)

    def cudnn_raw():
        return F.scaled_dot_product_attention(qt, views[0], views[1], enable_gqa=True)

    def ctx_only():
        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
            pass

    cases = {
        "python no-op": lambda: None,
        "torch.empty cuda (1,1,32,128) bf16": lambda: torch.empty((1, 1, 32, 128), dtype=torch.bfloat16, device="cuda"),
        "torch.empty_like(q)": lambda: torch.empty_like(q),
        "x.add_(1) (one aten kernel)": lambda: x.add_(1),
        "triton trivial kernel launch": lambda: _touch[(1,)](x, 128),
        "sdpa_kernel ctx enter/exit": ctx_only,
        "cudnn sdpa (default backend order)": cudnn_raw,
        "cudnn sdpa with ctx (bench)": lambda: cudnn(inp, views),
        "ours decode step": lambda: bd.ours(inp),
    }
    for rep in range(2):
        for name, fn in cases.items():
            print(f"{name:40s} {host_us(fn, calls=200, reps=3):7.1f} us", flush=True)
    fn = lambda: bd.ours(inp)  # noqa: E731
    torch.cuda._sleep(800_000_000)
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(300):
        fn()
    prof.disable()
    torch.cuda.synchronize()
    st = pstats.Stats(prof)
    st.sort_stats("tottime").print_stats(35)
    st.sort_stats("cumtime").print_stats(25)


if __name__ == "__main__":
    main()
