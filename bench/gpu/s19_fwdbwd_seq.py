"""Session 19: the grid's forward+backward reads ~10% below fwd + bwd on some rows when
several rows run in one process (D = 128 8k non-causal 9.09 ms against 1.97 + 6.29),
but adds up when that row runs alone (468 TFLOP/s, s19 call 6). Replays the grid's
sequence of shapes for flashtriton alone and prints, per row, the three times and the
caching allocator's device allocations / frees / retries during the fwd+bwd timing.

Prediction: the allocator frees and re-allocates device memory inside the timed
fwd+bwd calls (fragmentation after earlier rows), which synchronizes.

    PYTHONPATH=src python bench/gpu/s19_fwdbwd_seq.py
"""
import torch
from triton.testing import do_bench

import flashtriton
from flashtriton.bench.common import attention_flops

KEYS = ("num_device_alloc", "num_device_free", "num_alloc_retries", "num_sync_all_streams")
for d in (64, 128):
    for causal in (False, True):
        for n in (8192, 16384):
            b, h = 16384 // n, 2048 // d
            q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
            dout = torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16)
            fwd = lambda: flashtriton.flash_attn_func(q, k, v, causal=causal)  # noqa: E731
            out = fwd()
            bwd = lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)  # noqa: E731
            both = lambda: torch.autograd.grad(fwd(), (q, k, v), dout)  # noqa: E731
            t = {}
            for name, f in (("fwd", fwd), ("bwd", bwd), ("both", both)):
                s0 = torch.cuda.memory_stats()
                t[name] = do_bench(f, warmup=25, rep=100, return_mode="median")
                s1 = torch.cuda.memory_stats()
                if name == "both":
                    delta = {key: s1.get(key, 0) - s0.get(key, 0) for key in KEYS}
            fl = attention_flops(b, h, n, n, d, causal, "fwd_bwd")
            print(f"D={d} N={n} causal={causal}: ms fwd {t['fwd']:.3f} bwd {t['bwd']:.3f} both {t['both']:.3f}"
                  f" (sum {t['fwd'] + t['bwd']:.3f}; {fl / t['both'] / 1e9:.0f} TFLOP/s)  allocator in both: {delta}"
                  f"  reserved {torch.cuda.memory_reserved() / 2**30:.1f} GiB", flush=True)
            del q, k, v, dout, out
