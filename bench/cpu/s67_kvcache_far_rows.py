"""Session 67: flash_attn_with_kvcache (which keeps the plain ALiBi bias, flashtriton/alibi_anchor.py) on query rows
that sit before every key: q of 200 rows against a cache of 17, not causal, fp32, ALiBi slopes 0.5 / 2 (heads 1-3:
1/2, 1/4, 1/8 of it), 6 seeds; prints the worst output error over the criterion's bound (2x PyTorch's fp32 error +
1e-6; 1 = the bound). Output: bench/results/cpu-2core/s67/probes/kvcache_far_rows.txt.
Usage (repo root): PYTHONPATH=src python bench/cpu/s67_kvcache_far_rows.py [cpu|cuda]"""
import sys

import torch

from flashtriton import flash_attn_with_kvcache, reference

DEV = sys.argv[1] if len(sys.argv) > 1 else "cpu"
worst = 0.0
for seed in range(6):
    for slope in (0.5, 2.0):
        torch.manual_seed(seed)
        q = torch.randn(1, 200, 4, 32, device=DEV)
        kc = torch.randn(1, 17, 2, 32, device=DEV)
        vc = torch.randn_like(kc)
        al = slope * torch.tensor([1.0, 0.5, 0.25, 0.125], device=DEV)
        out = flash_attn_with_kvcache(q, kc, vc, cache_seqlens=torch.tensor([17], dtype=torch.int32, device=DEV),
                                      alibi_slopes=al)
        kw = dict(softmax_scale=32 ** -0.5, alibi_slopes=al)
        r64, _ = reference.attention(q.double(), kc.double(), vc.double(), **kw)
        r32, _ = reference.attention(q, kc, vc, **kw)
        err = (out.double() - r64).abs().max().item()
        base = (r32.double() - r64).abs().max().item()
        worst = max(worst, err / (2 * base + 1e-6))
print(f"{DEV}: flash_attn_with_kvcache, 200 rows before 17 keys, fp32 ALiBi: worst out / bound {worst:.3f}")
