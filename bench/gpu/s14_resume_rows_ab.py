"""Measured 2026-11-30 (session 14): level at D = 64, slower at D = 128; the code it drove was removed (bench/NOTES.md, Session 14).
Written in session 13 for the next GPU session (not run yet): the split backward's resumed
dK/dV (bwd.py RESUME, the masked tiles after bwd_ws.py) in key rows (today) against query
rows (launchers.backward.RESUME_QUERY_ROWS), on the calls that take the split path: causal
D = 64 from N = 8k, causal D = 128 from 4k.

Why: sm_90a offline (compile_report, HAS_RIGHT, num_warps 8): D = 64's resume tile (128,
128, 8, 2) spills 2528 bytes in key rows and 224 in query rows; D = 128's (64, 128, 8, 2)
1720 against 3108. D = 64 causal backward at 8k / 16k reads 284 / 334 TFLOP/s against
cuDNN's 409 / 435 (prefill.md).

Prediction (written before any run): D = 64 +3-8% backward at 8k / 16k (the resumed kernel
does the diagonal's masked tiles, ~1/8-1/6 of the work at 8k, and would run ~1.5x faster);
D = 128 slower (more spills), so it stays out.

Backward TFLOP/s as eager calls (forward+backward minus forward), each variant twice
in alternating order; the gradients of each variant against the first (max |diff|).
"""
import os
import sys

os.environ["FLASHTRITON_PLANS"] = "0"     # variants change a module constant

import torch

import flashtriton
from flashtriton.bench.common import attention_flops
from flashtriton.launchers import backward

CASES = [  # label, B, N, H, D
    ("D64 causal 8k", 2, 8192, 32, 64),
    ("D64 causal 16k", 1, 16384, 32, 64),
    ("D128 causal 4k", 4, 4096, 16, 128),
    ("D128 causal 16k", 1, 16384, 16, 128),
]


def bwd_ms(q, k, v, dout):
    # Eager (session 14): capturing these calls failed in the first run (bench/gpu/
    # s14_capture_debug.py looks for why); at 8k-16k the kernels take milliseconds, so the
    # host's ~0.1 ms per call is within the noise of the difference.
    from triton.testing import do_bench

    def both():
        return torch.autograd.grad(flashtriton.flash_attn_func(q, k, v, causal=True), (q, k, v), dout)

    def fwd():
        with torch.no_grad():
            return flashtriton.flash_attn_func(q, k, v, causal=True)

    return (do_bench(both, warmup=30, rep=300, return_mode="median")
            - do_bench(fwd, warmup=30, rep=300, return_mode="median"))


def main():
    for label, b, n, h, d in CASES:
        q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
                   for _ in range(3))
        dout = torch.randn_like(q)
        flops = attention_flops(b, h, n, n, d, True, "bwd")
        variants = [("key rows", set()), ("query rows", {d})]
        times = {name: [] for name, _ in variants}
        grads = {}
        for rep in range(2):
            for name, rows in (variants if rep == 0 else variants[::-1]):
                saved = set(backward.RESUME_QUERY_ROWS)
                backward.RESUME_QUERY_ROWS.clear()
                backward.RESUME_QUERY_ROWS.update(rows)
                try:
                    if rep == 0:
                        out = flashtriton.flash_attn_func(q, k, v, causal=True)
                        grads[name] = torch.autograd.grad(out, (q, k, v), dout)
                    times[name].append(bwd_ms(q, k, v, dout))
                except Exception as exc:  # noqa: BLE001
                    print(f"{label:18s} {name}: {type(exc).__name__}: {str(exc).splitlines()[0][:150]}", flush=True)
                finally:
                    backward.RESUME_QUERY_ROWS.clear()
                    backward.RESUME_QUERY_ROWS.update(saved)
        ref = grads.get("key rows")
        for name, ms in times.items():
            if ms and name in grads and ref is not None:
                err = max((a.float() - r.float()).abs().max().item() for a, r in zip(grads[name], ref))
                print(f"{label:18s} {name:11s} bwd " + " / ".join(f"{flops / t / 1e9:6.1f}" for t in ms)
                      + f" TFLOP/s (two passes)  max|dgrad diff| vs key rows {err:.1e}", flush=True)
        del q, k, v, dout
    sys.exit(0)


if __name__ == "__main__":
    main()
