"""Session 66: ALiBi gradients of the CPU backend against the criterion, 6 shapes (far rows Nq > Nk, few rows Nq << Nk,
square, causal) x 3 slope sets x 12 draws; prints each cell's worst error / the criterion's bound (1 = the bound).
Outputs in bench/results/cpu-2core/s66/probes/: p3_before_* (session 65's code), p3_after_* (the first, two-part
fix), p3_after2_bf16 (with the ALiBi weight), p3_v4_bf16 (final).
Usage (repo root): PYTHONPATH=src python bench/cpu/s66_alibi_grad_probe.py bf16|fp32"""
import math, sys, torch, flashtriton
sys.path.insert(0, "tests")
from flashtriton import flash_attn_func
from helpers import bound_ratios
cases = [(200, 1, False, 32), (200, 17, False, 40), (17, 257, True, 96), (2, 257, False, 64), (113, 113, False, 64), (64, 300, True, 128)]
dtype = {"bf16": torch.bfloat16, "fp32": torch.float32}[sys.argv[1]]
for slope in (0.25, 0.5, 2.0):
  for nq, nk, causal, d in cases:
    worst = {}
    for seed in range(6):
      torch.manual_seed(seed)
      for scale in (None, -0.2):
        b, h, hk = 1, 4, 2
        q = torch.randn(b, nq, h, d, dtype=dtype); k = torch.randn(b, nk, hk, d, dtype=dtype); v = torch.randn_like(k)
        dout = torch.randn(b, nq, h, d, dtype=dtype)
        alibi = torch.full((h,), slope) * torch.tensor([1.0, 0.5, 0.25, 0.125])
        qq, kk, vv = (t.clone().requires_grad_() for t in (q, k, v))
        o = flash_attn_func(qq, kk, vv, softmax_scale=scale, causal=causal, alibi_slopes=alibi)
        gr = torch.autograd.grad(o, (qq, kk, vv), dout)
        sc = scale if scale is not None else d ** -0.5
        kw = dict(softmax_scale=sc, window_left=-1, window_right=0 if causal else -1, softcap=0.0, alibi_slopes=alibi)
        for nm, r in bound_ratios((o, *gr), q, k, v, dout, **kw).items():
            worst[nm] = max(worst.get(nm, 0.0), r)
    print(sys.argv[1], slope, (nq, nk, causal, d), " ".join("%s %.2f" % kv for kv in worst.items()), flush=True)
