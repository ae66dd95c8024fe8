"""Session 66: bf16 softcap gradients of the CPU backend against the criterion, 6 shapes x 4 (softcap, scale) x 8
draws (half with ALiBi); prints each cell's worst error / the criterion's bound. Outputs in
bench/results/cpu-2core/s66/probes/: sc_before (session 65's code, no softcap shift), sc_v4 (final).
Usage (repo root): PYTHONPATH=src python bench/cpu/s66_softcap_grad_probe.py"""
import sys, torch, flashtriton
sys.path.insert(0, "tests")
from flashtriton import flash_attn_func
from helpers import bound_ratios
cases = [(1, 1, False, 64), (64, 1, True, 40), (2, 257, False, 96), (113, 113, False, 64), (17, 257, True, 128), (200, 17, False, 40)]
dtype = torch.bfloat16
for softcap, scale in ((5.0, None), (5.0, 0.3), (30.0, 1.0), (50.0, None)):
  for nq, nk, causal, d in cases:
    worst = {}
    for seed in range(8):
      torch.manual_seed(seed)
      b, h, hk = 1, 4, 2
      q = torch.randn(b, nq, h, d, dtype=dtype); k = torch.randn(b, nk, hk, d, dtype=dtype); v = torch.randn_like(k)
      dout = torch.randn(b, nq, h, d, dtype=dtype)
      alibi = torch.tensor([0.5, 0.25, 0.125, 0.0625]) if seed % 2 else None
      qq, kk, vv = (t.clone().requires_grad_() for t in (q, k, v))
      o = flash_attn_func(qq, kk, vv, softmax_scale=scale, causal=causal, softcap=softcap, alibi_slopes=alibi)
      gr = torch.autograd.grad(o, (qq, kk, vv), dout)
      sc = scale if scale is not None else d ** -0.5
      kw = dict(softmax_scale=sc, window_left=-1, window_right=0 if causal else -1, softcap=softcap, alibi_slopes=alibi)
      for nm, r in bound_ratios((o, *gr), q, k, v, dout, **kw).items():
          worst[nm] = max(worst.get(nm, 0.0), r)
    print("softcap", softcap, "scale", scale, (nq, nk, causal, d), " ".join("%s %.2f" % kv for kv in worst.items()), flush=True)
