"""Session 55: the GPU fp32 forward's error against the tests' criterion (a fuzz case failed: fp32, D = 192,
Nq = 1, Nk = 113, causal, scale -0.2, out 6.2e-6 against PyTorch fp32's 1.0e-6). Sweeps that case's neighbours
(scale, Nq, D, seeds; `python s55_fp32_probe.py [cpu|cuda] [NQ,..]`: where the fp32 reference runs), prints ours / PyTorch-fp32 error ratios (the criterion: <= 2 + floor) and the kernels
that ran (torch profiler)."""
import math, sys
import torch
sys.path.insert(0, "tests")
from helpers import max_err, ATOL_FLOOR
from flashtriton import flash_attn_func, reference


def case(d, nq, nk, scale, causal, seed, hk=2, g=2, b=2):
    torch.manual_seed(seed)
    q = torch.randn(b, nq, hk * g, d); k = torch.randn(b, nk, hk, d); v = torch.randn_like(k)
    o = flash_attn_func(q.cuda(), k.cuda(), v.cuda(), softmax_scale=scale, causal=causal).cpu()
    kw = dict(softmax_scale=scale if scale is not None else 1 / math.sqrt(d), window_left=-1, window_right=0 if causal else -1)
    r64, _ = reference.attention(q.double(), k.double(), v.double(), **kw)
    r32, _ = reference.attention(*(t.to(REF) for t in (q, k, v)), **kw)
    e, e0 = max_err(o, r64), max_err(r32.cpu(), r64)
    return e, e0, e <= 2 * e0 + ATOL_FLOOR[torch.float32]


REF = sys.argv[1] if len(sys.argv) > 1 else "cpu"     # where the fp32 reference runs (the tests: the inputs' device)
NQ = [int(x) for x in sys.argv[2].split(",")] if len(sys.argv) > 2 else [1, 2, 17, 128]
for d in (192, 128, 64):
    for nq in NQ:
        for scale in (-0.2, 0.2, None):
            rs = [case(d, nq, 113, scale, True, s) for s in range(8 if len(NQ) < 3 else 4)]
            print(f"D={d:3d} nq={nq:3d} scale={scale}: ours/torch32 " + " ".join(f"{e / e0:5.2f}" for e, e0, _ in rs)
                  + f"  ours max {max(e for e, _, _ in rs):.2e}  fails {sum(not ok for *_, ok in rs)}", flush=True)
from torch.profiler import profile, ProfilerActivity
for nq in (1, 17):
    q = torch.randn(2, nq, 4, 192, device="cuda"); k = torch.randn(2, 113, 2, 192, device="cuda")
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        flash_attn_func(q, k, k, softmax_scale=-0.2, causal=True); torch.cuda.synchronize()
    print(f"nq={nq} kernels:", sorted({e.name[:60] for e in prof.events() if e.device_type.name == "CUDA"}))
