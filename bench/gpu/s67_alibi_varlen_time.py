"""Session 67: non-causal varlen calls with ALiBi take the anchored form (alibi_anchor.needed: the host does not read
the lengths); their cost against the tree with the anchored branch compiled out. bf16, D = 128, H = 16, 16k tokens in
random lengths 128-4096 (Nq = Nk per sequence, seed 0), ALiBi slopes 2^-(8 h / H); forward and forward + backward,
median ms of triton.testing.do_bench, TFLOP/s by the FlashAttention-2 paper's count over the sequences.
Usage: PYTHONPATH=<tree>/src python bench/gpu/s67_alibi_varlen_time.py <label> [causal]"""
import random
import sys

import torch
import triton

from flashtriton import flash_attn_varlen_func

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

    def fwd():
        return flash_attn_varlen_func(q, k, v, cu, cu, max(lens), max(lens), causal=CAUSAL, alibi_slopes=slopes)

    def fwd_bwd():
        torch.autograd.grad(fwd(), (q, k, v), dout)

    with torch.no_grad():
        t_f = triton.testing.do_bench(fwd, warmup=50, rep=300)
    t_fb = triton.testing.do_bench(fwd_bwd, warmup=50, rep=300)
    print(f"{LABEL} varlen {len(lens)} sequences causal={CAUSAL}: fwd {t_f:.3f} ms {flops / t_f / 1e9:.0f} TFLOP/s, "
          f"fwd+bwd {t_fb:.3f} ms {2.5 * flops / t_fb / 1e9:.0f} TFLOP/s", flush=True)


if __name__ == "__main__":
    main()
