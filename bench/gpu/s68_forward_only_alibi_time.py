"""Session 68: the cost of the ALiBi anchor in the forward-only Triton kernels (flashtriton/alibi_anchor.py).
One process times one tree (PYTHONPATH); bench/gpu/s68.sh alternates trees (before = the launchers' anchor switched
off by a sed, after = this tree). bf16, D = 128, ALiBi slopes 2^-(8 h / H), median of triton.testing.do_bench:
- flash_attn_with_kvcache, B = 8, H = 32, Hk = 8, caches of 8k keys, not causal: Sq = 1 (never anchored: the
  kernel's SASS is the same) and Sq = 4 (anchored); GB/s = the K and V bytes read / time;
- flash_attn_varlen_func with block_table (kernels/fwd_paged.py: ALiBi never takes the Gluon paged kernel), 8
  sequences of 2k queries over 2k keys, pages of 256, H = 16, not causal; TFLOP/s by the FlashAttention-2 count.
Usage: PYTHONPATH=<tree>/src python bench/gpu/s68_forward_only_alibi_time.py <label>"""
import sys

import torch
import triton

from flashtriton import flash_attn_varlen_func, flash_attn_with_kvcache, paged

LABEL = sys.argv[1] if len(sys.argv) > 1 else "tree"
D = 128


def slopes_for(h):
    return torch.tensor([2.0 ** (-8.0 * (i + 1) / h) for i in range(h)], device="cuda")


def kvcache_rows():
    b, h, hk, n = 8, 32, 8, 8192
    kc = torch.randn(b, n, hk, D, device="cuda", dtype=torch.bfloat16)
    vc = torch.randn_like(kc)
    lens = torch.full((b,), n, dtype=torch.int32, device="cuda")
    al = slopes_for(h)
    for sq in (1, 4):
        q = torch.randn(b, sq, h, D, device="cuda", dtype=torch.bfloat16)
        ms = triton.testing.do_bench(lambda: flash_attn_with_kvcache(q, kc, vc, cache_seqlens=lens, alibi_slopes=al),
                                     warmup=50, rep=300)
        gbs = 2 * kc.numel() * kc.element_size() / ms / 1e6
        print(f"{LABEL} kvcache B={b} Sq={sq} L={n}: {ms * 1e3:.1f} us {gbs:.0f} GB/s", flush=True)


def paged_rows():
    h, hk, n, seqs, page = 16, 16, 2048, 8, 256
    lens = [n] * seqs
    cu = torch.tensor([0] + [n * (i + 1) for i in range(seqs)], dtype=torch.int32, device="cuda")
    q = torch.randn(n * seqs, h, D, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(n * seqs, hk, D, device="cuda", dtype=torch.bfloat16)
    v = torch.randn_like(k)
    kc, vc, table = paged.scatter_to_pages(k, v, lens, page)
    al = slopes_for(h)
    ms = triton.testing.do_bench(lambda: flash_attn_varlen_func(q, kc, vc, cu, cu, n, n, block_table=table,
                                                                alibi_slopes=al), warmup=50, rep=300)
    flops = 4.0 * seqs * n * n * D * h
    print(f"{LABEL} paged prefill {seqs} x {n}, page {page}: {ms:.3f} ms {flops / ms / 1e9:.0f} TFLOP/s", flush=True)


if __name__ == "__main__":
    torch.manual_seed(0)
    kvcache_rows()
    paged_rows()
