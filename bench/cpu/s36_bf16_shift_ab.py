"""Session 36: the bf16 CPU backward with the per-row shift folded into the S^T product
(config.BWD_BF16_SHIFT, two extra bf16 columns: K = D + 2) against the unshifted product, timed
interleaved in one process (5 rounds, median of each round's 3 calls), backward only
(out.backward with retain_graph), the bench's fwd+bwd shape B=1 H=8 N=2048 D=64.

    PYTHONPATH=src python bench/cpu/s36_bf16_shift_ab.py      # ~1 min on 2 cores; nothing else running

PREDICTION (before the run): the S^T product's K grows 64 -> 66 (+3% of 1 of 5 products, ~40% of the
backward's time in products: +0.3-0.6%), plus the per-head shift vector (O(N) work): level within
noise (+0-1%).
"""
import statistics
import time

import torch

import flashtriton
from flashtriton.cpu import config

B, H, N, D = 1, 8, 2048, 64


def main():
    torch.manual_seed(0)
    q, k, v = (torch.randn(B, N, H, D, dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    dout = torch.randn(B, N, H, D, dtype=torch.bfloat16)
    with flashtriton.use_backend("cpu"):
        out = flashtriton.flash_attn_func(q, k, v)

    def bwd():
        q.grad = k.grad = v.grad = None
        out.backward(dout, retain_graph=True)

    for threads in (torch.get_num_threads(), 1):
        torch.set_num_threads(threads)
        res = {False: [], True: []}
        for _ in range(5):
            for shift in (False, True):
                config.BWD_BF16_SHIFT = shift
                bwd()
                ts = []
                for _ in range(3):
                    t0 = time.perf_counter()
                    bwd()
                    ts.append((time.perf_counter() - t0) * 1e3)
                res[shift].append(statistics.median(ts))
        off, on = statistics.median(res[False]), statistics.median(res[True])
        print(f"threads={threads}: off {' '.join(f'{x:.1f}' for x in res[False])} (median {off:.1f} ms); "
              f"on {' '.join(f'{x:.1f}' for x in res[True])} (median {on:.1f} ms): {on / off:.3f}x", flush=True)


if __name__ == "__main__":
    main()
