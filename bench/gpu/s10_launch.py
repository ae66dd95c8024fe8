"""Session 10: what Triton's launch path costs on the GPU machine's host, per launch, for our
forward kernels: JITFunction[grid](...) (bind, specialise, cache lookup, launch) against
calling the cached CompiledKernel directly with the same bound values (what a per-shape
launch cache would do), and the whole flash_attn_func forward for scale. Eager N = 512."""
import inspect
import sys
import time


def main():
    import torch
    import triton
    from triton.runtime.jit import JITFunction
    import flashtriton
    captured = []
    orig = JITFunction.run

    def spy(self, *args, grid, warmup, **kwargs):
        kernel = orig(self, *args, grid=grid, warmup=warmup, **kwargs)
        captured.append((self, args, dict(kwargs), grid, kernel))
        return kernel

    for causal in (False, True):
        q, k, v = (torch.randn(1, 512, 16, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        f = lambda: flashtriton.flash_attn_func(q, k, v, causal=causal)  # noqa: E731
        for _ in range(10):
            f()
        torch.cuda.synchronize()
        n = 300
        t = time.perf_counter()
        for _ in range(n):
            f()
        t_api = (time.perf_counter() - t) / n
        torch.cuda.synchronize()
        JITFunction.run = spy
        f()
        JITFunction.run = orig
        fn, args, kwargs, grid, kernel = captured[-1]
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(n):
            fn[grid](*args, **kwargs)
        t_jit = (time.perf_counter() - t) / n
        torch.cuda.synchronize()
        # the bound values in parameter order (defaults filled in), as JITFunction.run passes them
        sig = inspect.signature(fn.fn)
        bound = sig.bind(*args, **{kk: vv for kk, vv in kwargs.items() if kk in sig.parameters})
        bound.apply_defaults()
        values = list(bound.arguments.values())
        dev = torch.cuda.current_device()
        stream = torch.cuda.current_stream().cuda_stream
        g = grid if isinstance(grid, tuple) else tuple(grid)
        g = g + (1,) * (3 - len(g))
        t = time.perf_counter()
        for _ in range(n):
            kernel.run(g[0], g[1], g[2], stream, kernel.function, kernel.packed_metadata,
                       kernel.launch_metadata(g, stream, *values), None, None, *values)
        t_direct = (time.perf_counter() - t) / n
        torch.cuda.synchronize()
        print(f"N=512 causal={causal} kernel {fn.fn.__name__} ({len(values)} params): flash_attn_func "
              f"{t_api * 1e6:.0f} us, JIT launch {t_jit * 1e6:.0f} us, direct CompiledKernel.run "
              f"{t_direct * 1e6:.0f} us per call (host)", flush=True)
        # the direct launch computes the same output
        out_ref = f()
        torch.cuda.synchronize()
    sys.exit(0)


if __name__ == "__main__":
    main()
