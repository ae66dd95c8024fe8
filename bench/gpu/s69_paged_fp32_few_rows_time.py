"""Session 69: the fp32 paged forward (kernels/fwd_paged.py) at one query row a sequence, before (the 64 x 32 /
32 x 32 fp32 tile, whose score slices spilled: 8.9 / 11.3 KB of stack a thread at D = 128 / 256 tile) and after
(configs.DEFAULTS_FP32["fwd_few_rows"], 16 x 32). One process times one tree (PYTHONPATH); bench/gpu/s69.sh
alternates trees. flash_attn_varlen_func with block_table, 32 sequences of one query over 4k keys, H = 32, Hk = 8,
pages of 16, causal, fp32; median of triton.testing.do_bench; GB/s = the K and V bytes of the cache the sequences
use / time (each GQA group's heads read them: the bound is 4x that traffic, from L2 if it holds).
Usage: PYTHONPATH=<tree>/src python bench/gpu/s69_paged_fp32_few_rows_time.py <label>"""
import sys

import torch
import triton

from flashtriton import flash_attn_varlen_func, paged

LABEL = sys.argv[1] if len(sys.argv) > 1 else "tree"


def main():
    torch.manual_seed(0)
    seqs, h, hk, n, page = 32, 32, 8, 4096, 16
    for d in (64, 128, 192):
        cu_q = torch.arange(seqs + 1, dtype=torch.int32, device="cuda")
        cu_k = torch.arange(seqs + 1, dtype=torch.int32, device="cuda") * n
        q = torch.randn(seqs, h, d, device="cuda")
        k = torch.randn(seqs * n, hk, d, device="cuda")
        v = torch.randn_like(k)
        kc, vc, table = paged.scatter_to_pages(k, v, [n] * seqs, page)
        ms = triton.testing.do_bench(lambda: flash_attn_varlen_func(q, kc, vc, cu_q, cu_k, 1, n, block_table=table,
                                                                    causal=True), warmup=20, rep=200)
        gbs = 2 * k.numel() * 4 / ms / 1e6
        print(f"{LABEL} paged fp32 one query D={d}, {seqs} x {n} keys: {ms * 1e3:.1f} us {gbs:.0f} GB/s", flush=True)


if __name__ == "__main__":
    main()
