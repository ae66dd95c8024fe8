"""Session 66: the bf16 backward's time (B = 1, H = 8, N = 2048, D = 64; median of 6) plain / ALiBi / softcap 30 /
causal ALiBi, one line labelled by argv[1]; run alternately on the old and new trees (ABBA), output
bench/results/cpu-2core/s66/probes/abba.txt.
Usage (repo root): PYTHONPATH=src python bench/cpu/s66_bwd_alibi_softcap_time.py LABEL"""
import sys, time, torch, flashtriton
torch.manual_seed(0)
B, H, N, D = 1, 8, 2048, 64
q, k, v = (torch.randn(B, N, H, D, dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
dout = torch.randn(B, N, H, D, dtype=torch.bfloat16)
res = {}
for name, kw in [("plain", dict()), ("alibi", dict(alibi_slopes=torch.tensor([2 ** -i for i in range(1, 9)]))), ("softcap", dict(softcap=30.0)), ("causal_alibi", dict(causal=True, alibi_slopes=torch.tensor([2 ** -i for i in range(1, 9)])))]:
    ts = []
    for it in range(6):
        out = flashtriton.flash_attn_func(q, k, v, **kw)
        t0 = time.perf_counter(); torch.autograd.grad(out, (q, k, v), dout); ts.append(time.perf_counter() - t0)
    res[name] = sorted(ts)[len(ts) // 2] * 1e3
print(sys.argv[1], " ".join("%s %.1f ms" % kv for kv in res.items()), flush=True)
