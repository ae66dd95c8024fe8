"""Session 67: non-causal varlen calls with ALiBi take the anchored form (alibi_anchor.needed: the host does not read
the lengths); their cost against the tree with the anchored branch compiled out. bf16, D = 128, H = 16, 16k tokens in
random lengths 128-4096 (Nq = Nk per sequence, seed 0), ALiBi slopes 2^-(8 h / H); forward and forward + backward,
median ms of triton.testing.do_bench, TFLOP/s by the FlashAttention-2 paper's count over the sequences.
Usage: PYTHONPATH=<tree>/src python bench/gpu/s67_alibi_varlen_time.py <label> [causal]"""
import os
import random
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from flashtriton import flash_attn_varlen_func  # noqa: E402
from s67_alibi_anchor_time import report  # noqa: E402

LABEL = sys.argv[1] if len(sys.argv) > 1 else "tree"
CAUSAL = len(sys.argv) > 2 and sys.argv[2] == "causal"
H, D, TOTAL = 16, 128, 16384


def main():
    rng = random.Random(0)
    lens = []
    while sum(lens) < TOTAL:
        lens.append(min(rng.randint(128, 4096), TOTAL - sum(lens)))
    cu = torch.tensor([0] + [sum(lens[:i + 1]) for i in range(len(lens))], dtype=torch.int32, device="cuda")
    torch.manual_seed(0)
    q, k, v = (torch.randn(TOTAL, H, D, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    dout = torch.randn_like(q)
    slopes = torch.tensor([2.0 ** (-8.0 * (h + 1) / H) for h in range(H)], device="cuda")
    flops = sum(4.0 * H * n * n * D for n in lens) * (0.5 if CAUSAL else 1.0)
    report(f"{LABEL} varlen {len(lens)} sequences causal={CAUSAL}",
           lambda: flash_attn_varlen_func(q, k, v, cu, cu, max(lens), max(lens), causal=CAUSAL, alibi_slopes=slopes),
           (q, k, v), dout, flops)


if __name__ == "__main__":
    main()
