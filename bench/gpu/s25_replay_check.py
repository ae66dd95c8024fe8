"""Session 25: the Gluon forward routes replayed by launch plans (Gluon descriptors rebound):
three calls a case with fresh inputs, each against float32 SDPA math; the plan counter."""
import torch
import torch.nn.functional as F

from flashtriton import flash_attn_func
from flashtriton.launchers import plans


def ref(q, k, v, causal, window):
    qt, kt, vt = (t.transpose(1, 2).float() for t in (q, k, v))
    n = q.shape[1]
    i = torch.arange(n, device=q.device)[:, None]
    j = torch.arange(n, device=q.device)[None, :]
    mask = torch.ones(n, n, dtype=torch.bool, device=q.device)
    if causal:
        mask &= j <= i
    if window is not None:
        mask &= (j >= i - window[0]) & (j <= i + window[1])
    return F.scaled_dot_product_attention(qt, kt, vt, attn_mask=mask).transpose(1, 2)


for name, b, n, kw in (("plain 2k", 2, 2048, {}), ("causal 4k", 2, 4096, dict(causal=True)),
                       ("window 4k", 1, 4096, dict(window_size=(1024, 0)))):
    plans.clear()
    errs = []
    for seed in range(3):
        torch.manual_seed(seed)
        q, k, v = (torch.randn(b, n, 8, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        out = flash_attn_func(q, k, v, **kw)
        r = ref(q, k, v, kw.get("causal", False), kw.get("window_size"))
        errs.append((out.float() - r).abs().max().item())
    print(f"{name}: max err per call {['%.1e' % e for e in errs]}, plans {plans.stats}", flush=True)
