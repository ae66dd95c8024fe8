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
    rows += decode_steps()
    return rows


def decode_steps(shapes=((1, 8192), (8, 8192))):
    """One eager decode step (bench/decode.py's case: Hq=32, Hk=8, D=128, bf16, one query)
    against SDPA with enable_gqa on contiguous (B, Hk, L, D) copies of the cache."""
    from flashtriton.bench import decode
    print("\n| B | L | provider | decode step us | decode step us, CUDA graph |")
    print("|---|---|---|---|---|")
    rows = []
    for b, n in shapes:
        inp = decode.make_inputs(b, n, "cuda")
        views = tuple(t.transpose(1, 2).contiguous() for t in (inp["k_cache"], inp["v_cache"]))
        fns = {"flashtriton": lambda: decode.ours(inp)}
        for name, backend in decode.SDPA.items():
            fns[name] = (lambda run: lambda: run(inp, views))(decode._sdpa(backend))
        for name, fn in fns.items():
            eager = common.time_ms(fn, "cuda") * 1e3
            graph = common.graph_time_ms(fn) * 1e3
            rows.append(dict(kind="decode", batch=b, seqlen=n, provider=name, step_us=eager, step_graph_us=graph))
            print(f"| {b} | {n} | {name} | {eager:.1f} | {graph:.1f} |")
    return rows


if __name__ == "__main__":
    main()
