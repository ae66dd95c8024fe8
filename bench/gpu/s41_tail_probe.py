"""Session 41: is the D = 128 backward's ~0.94x cuDNN a wave-quantisation tail?

The fused Gluon backward launches one CTA per (128-key block, batch x KV head): at the paper grid's 16k tokens and
H = 16 that is always 16384 / 128 x 16 = 2048 CTAs, 15.52 waves of 132 (one CTA an SM: 240-register consumers), so
the last wave leaves 64 SMs idle for one CTA's time (~3% of the pass). cuDNN's backward is persistent (grid 132) and,
if its work unit is smaller (its kernel name says 64x64x128), nearly tail-free. If the tail explains part of our
gap, ours / cuDNN moves with the wave count at a fixed N and per-head work:

    B x H x Nk / 128 = 1984 (15.03 waves, waste ceil(w) / w - 1 = 6.4%), 2048 (15.52, 3.1%), 2112 (16.00, 0%),
    2176 (16.48, 3.2%)

at N = 2k (16 key blocks a head): B = 4 and H = 31 / 32 / 33 / 34. Prediction (tail-only model, cuDNN insensitive):
ours / cuDNN backward 0.91 / 0.94 / 0.97 / 0.94 (H = 31 / 32 / 33 / 34), forward (persistent, non-causal) flat.
If ours / cuDNN is flat within +-1%, the tail is not the gap. Also causal (heaviest-first CTAs: expected flat).

Timing: kernel-only CUDA-graph replays (bench.common.graph_backward_ms: forward+backward minus forward), two
rounds in opposite orders, each provider checked against float64 on one head first.
Run: PYTHONPATH=src python bench/gpu/s41_tail_probe.py
"""
import torch

import flashtriton
from flashtriton.bench.common import (attention_flops, graph_backward_ms, graph_time_ms, head0_grad_check,
                                      head0_grad_refs)
from flashtriton.bench.providers import gpu_providers


def main():
    torch.manual_seed(0)
    prov = {k: v for k, v in gpu_providers(include_flex=False).items() if k in ("flashtriton", "sdpa-cudnn")}
    n, d, b = 2048, 128, 4
    print(f"flashtriton {flashtriton.__version__}, torch {torch.__version__}, {torch.cuda.get_device_name()}")
    for causal in (False, True):
        for h in (31, 32, 33, 34):
            q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
                       for _ in range(3))
            dout = torch.randn_like(q)
            refs = head0_grad_refs(q.detach(), k.detach(), v.detach(), dout, softmax_scale=d ** -0.5,
                                   window_left=-1, window_right=0 if causal else -1)
            ctas = b * h * n // 128
            res = {}
            for name, fn in prov.items():
                g = torch.autograd.grad(fn(q, k, v, causal), (q, k, v), dout)
                ok, text = head0_grad_check(g, refs)
                res[name] = {"check": text, "fwd": [], "bwd": []}
            for rnd in range(2):
                for name in (list(prov) if rnd == 0 else list(prov)[::-1]):
                    fn = prov[name]
                    f_ms = graph_time_ms(lambda: fn(q, k, v, causal))
                    b_ms = graph_backward_ms(lambda: fn(q, k, v, causal), (q, k, v), dout)
                    res[name]["fwd"].append(attention_flops(b, h, n, n, d, causal, "fwd") / f_ms / 1e9)
                    res[name]["bwd"].append(attention_flops(b, h, n, n, d, causal, "bwd") / b_ms / 1e9)
            o, c = res["flashtriton"], res["sdpa-cudnn"]
            print(f"causal={causal} B={b} H={h} CTAs={ctas} waves={ctas / 132:.2f}: "
                  f"fwd ours {max(o['fwd']):.0f} cudnn {max(c['fwd']):.0f} ({max(o['fwd']) / max(c['fwd']):.3f}x); "
                  f"bwd ours {'/'.join(f'{x:.0f}' for x in o['bwd'])} cudnn {'/'.join(f'{x:.0f}' for x in c['bwd'])} "
                  f"({max(o['bwd']) / max(c['bwd']):.3f}x) | {o['check']} | cudnn {c['check']}", flush=True)
            del q, k, v, dout
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
