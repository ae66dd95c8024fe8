"""Session 67: the cost of the ALiBi anchor (kernels/common.scores_log2 takes max(i + diag, 0)) on the Triton
prefill kernels. One process times one tree (PYTHONPATH); bench/gpu/s67.sh alternates trees (before the change,
after it, variants) in interleaved rounds. bf16, D = 128, H = 16, ALiBi slopes 2^-(8 h / H); forward and forward +
backward, median ms of triton.testing.do_bench, TFLOP/s by the FlashAttention-2 paper's count (4 Nq Nk D H B a pass,
x2.5 fwd+bwd, halved where causal; the Nq > Nk rows count Nq Nk).
Usage: PYTHONPATH=<tree>/src python bench/gpu/s67_alibi_anchor_time.py <label>"""
import sys

import torch
import triton

from flashtriton import flash_attn_func

LABEL = sys.argv[1] if len(sys.argv) > 1 else "tree"
CASES = [(4, 4096, 4096, False), (4, 4096, 4096, True), (2, 8192, 2048, False)]   # (B, Nq, Nk, causal)
H, D = 16, 128


def main():
    torch.manual_seed(0)
    slopes = torch.tensor([2.0 ** (-8.0 * (h + 1) / H) for h in range(H)], device="cuda")
    for b, nq, nk, causal in CASES:
        q = torch.randn(b, nq, H, D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        k = torch.randn(b, nk, H, D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        v = torch.randn_like(k, requires_grad=True)
        dout = torch.randn_like(q)
        flops = 4.0 * b * H * nq * nk * D * (0.5 if causal else 1.0)
        report(f"{LABEL} B={b} Nq={nq} Nk={nk} causal={causal}",
               lambda: flash_attn_func(q, k, v, causal=causal, alibi_slopes=slopes), (q, k, v), dout, flops)


def report(label, fwd, inputs, dout, flops):
    """Times fwd() and fwd() + its backward into inputs (median ms, triton.testing.do_bench) and prints both with
    TFLOP/s (flops a forward; x2.5 with the backward)."""
    def fwd_bwd():
        torch.autograd.grad(fwd(), inputs, dout)

    with torch.no_grad():
        t_f = triton.testing.do_bench(fwd, warmup=50, rep=300)
    t_fb = triton.testing.do_bench(fwd_bwd, warmup=50, rep=300)
    print(f"{label}: fwd {t_f:.3f} ms {flops / t_f / 1e9:.0f} TFLOP/s, "
          f"fwd+bwd {t_fb:.3f} ms {2.5 * flops / t_fb / 1e9:.0f} TFLOP/s", flush=True)


if __name__ == "__main__":
    main()
