"""A/B (session 42): the compiled float32 backward (cpu/native_backward.py) against the torch-ops
backward (cpu/backward.py) and torch SDPA's backward, fp32, B=1 H=8 N=2048 D=64, non-causal and
causal, interleaved in one process (A, B, C, A, B, C, ...) for several rounds; min / median ms.

    python bench/cpu/s42_bwd_compiled_ab.py [--rounds 7] [--n 2048] [--keys 96 --rows 256]

bwd: the backend's backward alone (flashtriton.cpu.bwd on a saved forward; SDPA: autograd.grad of
a saved graph, retain_graph). fwd+bwd: forward then autograd.grad, the bench's fwd+bwd case
(src/flashtriton/bench/cpu.py bench_fwd_bwd).
"""
import argparse
import statistics
import time

import torch
import torch.nn.functional as F

import flashtriton
from flashtriton.cpu import backward, config, fwd
from flashtriton.launchers.prefill import AttnParams


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--n", type=int, default=2048)
    ap.add_argument("--h", type=int, default=8)
    ap.add_argument("--d", type=int, default=64)
    ap.add_argument("--keys", type=int, default=None)
    ap.add_argument("--rows", type=int, default=None)
    ap.add_argument("--only-bwd", action="store_true")
    a = ap.parse_args()
    if a.keys:
        config.BWD_C_KEYS = a.keys
    if a.rows:
        config.BWD_C_ROWS = a.rows
    torch.manual_seed(0)
    b, n, h, d = 1, a.n, a.h, a.d
    q, k, v = (torch.randn(b, n, h, d, requires_grad=True) for _ in range(3))
    dout = torch.randn(b, n, h, d)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, B={b} H={h} N={n} D={d} fp32, "
          f"keys {config.BWD_C_KEYS} rows {config.BWD_C_ROWS}")
    for causal in (False, True):
        params = AttnParams(d ** -0.5, -1, 0 if causal else -1)
        with torch.no_grad():
            out, lse = fwd(q.detach(), k.detach(), v.detach(), params)
        qs, ks, vs = (t.detach().transpose(1, 2).requires_grad_(True) for t in (q, k, v))
        so = F.scaled_dot_product_attention(qs, ks, vs, is_causal=causal)
        dos = dout.transpose(1, 2)

        def bwd_with(path):
            def f():
                config.BWD_PATH = path
                backward.bwd(dout, q.detach(), k.detach(), v.detach(), out, lse, params)
            return f

        def sdpa_bwd():
            torch.autograd.grad(so, (qs, ks, vs), dos, retain_graph=True)

        def fb_with(path):
            def f():
                config.BWD_PATH = path
                with flashtriton.use_backend("cpu"):
                    o = flashtriton.flash_attn_func(q, k, v, causal=causal)
                torch.autograd.grad(o, (q, k, v), dout)
            return f

        def sdpa_fb():
            o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                               is_causal=causal).transpose(1, 2)
            torch.autograd.grad(o, (q, k, v), dout)

        fns = {"bwd compiled": bwd_with("compiled"), "bwd ops": bwd_with("ops"), "bwd sdpa": sdpa_bwd}
        if not a.only_bwd:
            fns.update({"fwd+bwd compiled": fb_with("compiled"), "fwd+bwd ops": fb_with("ops"),
                        "fwd+bwd sdpa": sdpa_fb})
        for f in fns.values():
            f()
        times = {name: [] for name in fns}
        for _ in range(a.rounds):
            for name, f in fns.items():
                t0 = time.perf_counter()
                f()
                times[name].append((time.perf_counter() - t0) * 1e3)
        config.BWD_PATH = "auto"
        flops = 2.5 * 4 * n * n * d * h * b * (0.5 if causal else 1.0)
        print(f"\ncausal={causal}  (backward {flops / 1e9:.1f} GFLOP)")
        for name, t in times.items():
            extra = f"  {flops / min(t) / 1e6:6.1f} GFLOP/s" if name.startswith("bwd") else ""
            print(f"  {name:18s} min {min(t):7.1f} ms  median {statistics.median(t):7.1f} ms{extra}")


if __name__ == "__main__":
    main()
