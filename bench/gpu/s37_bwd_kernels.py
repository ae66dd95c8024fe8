"""Session 37 probe: the kernels of one backward (torch.profiler, GPU time a kernel, 5 calls
averaged), ours against cuDNN's, bf16 D = 128 at 2k / 4k / 8k non-causal and 2k / 8k causal
(16k tokens, H = 16). Separates the main kernel's share of the D = 128 backward gap (0.94-0.99x
cuDNN) from the auxiliary kernels' (ours: delta preprocess, dQ zero, dQ cast).

Prediction: our aux kernels ~117 us a call at every N (35 + 31 + 51, as the fwd/bwd probe showed),
cuDNN's ~100-240 us (session 33 at 8k: 133 + 105); so the gap is in the main kernel at 4k / 8k
(~5%), while at 2k aux kernels are ~8% of ours and decide the cell."""
import torch
from torch.profiler import ProfilerActivity, profile

from flashtriton.bench import providers

SHAPES = [(8, 16, 2048, 128, False), (4, 16, 4096, 128, False), (2, 16, 8192, 128, False),
          (8, 16, 2048, 128, True), (2, 16, 8192, 128, True)]


def kernels(fn, q, k, v, dout, causal, reps=5):
    out = fn(q, k, v, causal)
    for _ in range(3):
        torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)
        torch.cuda.synchronize()
    agg = {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            agg[e.name[:70]] = agg.get(e.name[:70], 0) + (e.time_range.end - e.time_range.start) / reps
    return sorted(agg.items(), key=lambda x: -x[1])


def main():
    from torch.nn.attention import SDPBackend
    ours, cudnn = providers.ours, providers._sdpa(SDPBackend.CUDNN_ATTENTION)
    for b, h, n, d, causal in SHAPES:
        q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
        dout = torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16)
        print(f"== B={b} H={h} N={n} D={d} causal={causal}")
        for name, fn in (("ours", ours), ("cudnn", cudnn)):
            ks = kernels(fn, q, k, v, dout, causal)
            tot = sum(t for _, t in ks)
            print(f"  {name}: total {tot:.0f} us; " + "; ".join(f"{nm} {t:.0f}" for nm, t in ks))


if __name__ == "__main__":
    main()
