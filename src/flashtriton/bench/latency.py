"""Per-call latency at a small shape, where launch and Python overhead dominate:
flashtriton (eager) against SDPA's FLASH_ATTENTION and CUDNN_ATTENTION backends.

    python -m flashtriton.bench.latency
"""
from __future__ import annotations

import torch

from flashtriton.bench import common, providers


def main(shapes=((1, 128, 16, 128), (1, 512, 16, 128), (4, 1024, 16, 64))):
    provs = providers.gpu_providers(include_flex=False)
    print("| B | N | H | D | provider | fwd us | fwd us, CUDA graph | fwd+bwd us |")
    print("|---|---|---|---|---|---|---|---|")
    rows = []
    for b, n, h, d in shapes:
        q, k, v = (torch.randn(b, n, h, d, dtype=torch.bfloat16, device="cuda", requires_grad=True) for _ in range(3))
        dout = torch.randn_like(q)
        for name, fn in provs.items():
            fwd = common.time_ms(lambda: fn(q, k, v, True), "cuda") * 1e3
            graph = common.graph_time_ms(lambda: fn(q, k, v, True)) * 1e3
            fb = common.time_ms(lambda: torch.autograd.grad(fn(q, k, v, True), (q, k, v), dout), "cuda") * 1e3
            rows.append(dict(batch=b, seqlen=n, nheads=h, head_dim=d, provider=name, fwd_us=fwd, fwd_graph_us=graph,
                             fwd_bwd_us=fb))
            print(f"| {b} | {n} | {h} | {d} | {name} | {fwd:.1f} | {graph:.1f} | {fb:.1f} |")
    return rows


if __name__ == "__main__":
    main()
