"""Session 11, call 3: bwd.py's dK/dV kernel with its tiles as query rows x key columns
(KEY_ROWS=False) against key rows x query columns (the layout so far).

Why (offline, sm_90a, Triton 3.6.0): with key rows, K and V are the A operands of S^T and
dP^T, and both consumer warpgroups hold all of them in registers (2 x 64 x 256 bf16 = 128
registers a thread at D = 256) next to dK and dV (128): the kernel sits at 255 registers,
spills, and ran at 283 TFLOP/s for its four matmuls against 647 for the dQ kernel (call 2,
`s11-probe-2.txt`: dK/dV 7.78 of the 10.3 ms backward at D = 256, N = 8k). With query rows,
S = Q K^T and dP = dO V^T read both operands from shared memory (TTGIR: two memdesc
operands), and only P^T / dS^T (64 x 64) reach dV's and dK's dots from registers.

Prediction: D = 256 dK/dV from ~283 to ~450 TFLOP/s (backward 10.3 -> ~7.5 ms at N = 8k,
~360 TFLOP/s, level with cuDNN's 358); at D = 128 (bwd.py's path: causal below 4k,
windows) the query-rows (128, 64, 8, 2) tile, which compiles without a spill, +10-20%.

Each case: the backward alone (do_bench, forward once), per variant, and the largest
difference of dq, dk, dv from the baseline variant's.
"""
import os
import sys

os.environ["FLASHTRITON_PLANS"] = "0"     # variants change module constants

import torch
import triton

import flashtriton
from flashtriton.bench.common import attention_flops
from flashtriton.kernels import configs
from flashtriton.launchers import prefill

T = configs.Tile
CASES = [
    # label, B, N, H, D, causal, window, variants [(key_rows, tile)], first = baseline
    ("D256 full 8k", 2, 8192, 8, 256, False, (-1, -1),
     [(True, T(64, 64, 8, 2)), (False, T(64, 64, 8, 2)), (False, T(64, 64, 8, 1)), (False, T(128, 64, 8, 1))]),
    ("D256 causal 8k", 2, 8192, 8, 256, True, (-1, -1),
     [(True, T(64, 64, 8, 2)), (False, T(64, 64, 8, 2)), (False, T(128, 64, 8, 1))]),
    ("D256 causal 2k", 8, 2048, 8, 256, True, (-1, -1),
     [(True, T(64, 64, 8, 2)), (False, T(64, 64, 8, 2))]),
    ("D128 causal 2k", 8, 2048, 16, 128, True, (-1, -1),
     [(True, T(64, 64, 4, 2)), (False, T(128, 64, 8, 2)), (False, T(64, 64, 4, 2)), (False, T(128, 64, 8, 1))]),
    ("D128 window(1024,0) 16k", 1, 16384, 16, 128, False, (1024, 0),
     [(True, T(64, 64, 4, 2)), (False, T(128, 64, 8, 2)), (False, T(64, 64, 4, 2))]),
]


# Call 5 (argument "2"): D = 64 (behind FA2's backward at N <= 4k causal, default tile (32,
# 128, 4, 2) key rows) and more D = 128 query-rows tiles; first variant = the default.
# Prediction: D = 64 query rows with a no-spill 64-row tile ((64, 64, 4, 2): 242 registers,
# (128, 64, 8, 2): 210) +5-15% on the causal backward at 1k-4k; D = 128 within 3%.
CASES_2 = [
    ("D64 causal 2k", 8, 2048, 32, 64, True, (-1, -1),
     [(True, T(32, 128, 4, 2)), (False, T(64, 64, 4, 2)), (False, T(64, 64, 4, 3)), (False, T(128, 64, 8, 2)),
      (False, T(64, 128, 8, 2))]),
    ("D64 causal 1k", 16, 1024, 32, 64, True, (-1, -1),
     [(True, T(32, 128, 4, 2)), (False, T(64, 64, 4, 2)), (False, T(128, 64, 8, 2))]),
    ("D64 full 1k", 16, 1024, 32, 64, False, (-1, -1),
     [(True, T(32, 128, 4, 2)), (False, T(64, 64, 4, 2)), (False, T(128, 64, 8, 2))]),
    ("D64 causal 4k", 4, 4096, 32, 64, True, (-1, -1),
     [(True, T(32, 128, 4, 2)), (False, T(64, 64, 4, 2)), (False, T(128, 64, 8, 2))]),
    ("D128 causal 2k", 8, 2048, 16, 128, True, (-1, -1),
     [(False, T(64, 64, 4, 2)), (False, T(64, 64, 4, 3)), (False, T(64, 128, 8, 2))]),
    ("D128 causal 1k", 16, 1024, 16, 128, True, (-1, -1),
     [(False, T(64, 64, 4, 2)), (True, T(64, 64, 4, 2)), (False, T(64, 64, 4, 3))]),
]


# Call 6 (argument "3"): D = 64 causal with (64, 64, 4, 3) in query rows at the other
# lengths (call 5: +8% at 2k, the only length it ran at). Prediction: +3-8% at 1k-4k.
CASES_3 = [
    (f"D64 causal {n // 1024 or 0.5}k", 16384 // n, n, 32, 64, True, (-1, -1),
     [(True, T(32, 128, 4, 2)), (False, T(64, 64, 4, 3))]) for n in (512, 1024, 4096)
] + [("D64 window(1024,0) 16k", 1, 16384, 32, 64, False, (1024, 0), [(True, T(32, 128, 4, 2)), (False, T(64, 64, 4, 3))]),
     ("D128 causal 512", 32, 512, 16, 128, True, (-1, -1), [(False, T(64, 64, 4, 2)), (True, T(64, 64, 4, 2))])]


def band_flops(b, n, h, d, window):
    rows = torch.arange(n)
    keys = (rows - (rows - window[0]).clamp(min=0) + 1).sum().item()
    return 4 * b * h * d * keys * 2.5


def main():
    cases = {"2": CASES_2, "3": CASES_3}.get(sys.argv[1] if sys.argv[1:] else "", CASES)
    original = set(prefill.DKDV_QUERY_ROWS)
    for label, b, n, h, d, causal, window, variants in cases:
        q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
        dout = torch.randn_like(q)
        out = flashtriton.flash_attn_func(q, k, v, causal=causal, window_size=window)
        flops = (band_flops(b, n, h, d, window) if window[0] >= 0
                 else attention_flops(b, h, n, n, d, causal) * 2.5)
        base = None
        saved = configs.DEFAULTS["dkdv"][d]
        for key_rows, tile in variants:
            prefill.DKDV_QUERY_ROWS.discard(d)
            if not key_rows:
                prefill.DKDV_QUERY_ROWS.add(d)
            configs.DEFAULTS["dkdv"][d] = tile
            try:
                f = lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)  # noqa: E731
                g = f()
                if base is None:
                    base = g
                err = max((a.float() - r.float()).abs().max().item() for a, r in zip(g, base))
                finite = all(torch.isfinite(x).all().item() for x in g)
                ms = triton.testing.do_bench(f, warmup=50, rep=300)
                print(f"{label:24s} {'key' if key_rows else 'query'} rows {tile.block_m}x{tile.block_n} "
                      f"w{tile.num_warps} s{tile.num_stages}: bwd {ms:.3f} ms {flops / ms / 1e9:6.1f} TFLOP/s "
                      f"max|diff| vs first {err:.2e} finite={finite}", flush=True)
            except Exception as exc:  # noqa: BLE001
                print(f"{label:24s} {key_rows} {tile}: {type(exc).__name__}: {str(exc).splitlines()[0][:150]}",
                      flush=True)
            finally:
                configs.DEFAULTS["dkdv"][d] = saved
                prefill.DKDV_QUERY_ROWS.clear()
                prefill.DKDV_QUERY_ROWS.update(original)
        del q, k, v, dout, out, base
    sys.exit(0)


if __name__ == "__main__":
    main()
