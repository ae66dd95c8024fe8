"""Interleaved timing rounds for the A/B scripts in this folder (session 62): every variant once to warm up, then
`rounds` rounds that call each in turn, the order reversed every other round (ABBA: drift in the host's speed falls
on both sides alike); `before` (e.g. a cache flush) runs ahead of each timed call, untimed."""
import time


def abba(fns: dict, rounds: int, before=None) -> dict:
    """Seconds per call of each fn, {name: [one per round]}."""
    for f in fns.values():
        f()
    times = {name: [] for name in fns}
    for i in range(rounds):
        for name in (list(fns) if i % 2 == 0 else list(fns)[::-1]):
            if before is not None:
                before()
            t0 = time.perf_counter()
            fns[name]()
            times[name].append(time.perf_counter() - t0)
    return times


def median(xs: list) -> float:
    return sorted(xs)[len(xs) // 2]


def save(path: str, rounds: int, rows: list, **meta):
    """The A/B scripts' JSON: torch's version, its thread count, the rounds, the UTC date, `meta`, the rows."""
    import json

    import torch
    with open(path, "w") as f:
        json.dump(dict(torch=torch.__version__, threads=torch.get_num_threads(), rounds=rounds, **meta,
                       date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), rows=rows), f, indent=1)


def sdpa_bnhd(q, k, v, **kw):
    """torch's scaled_dot_product_attention on flash-attn's (B, N, H, D) layout (the A/B scripts' torch column and
    float64 references; kw: is_causal, enable_gqa)."""
    import torch.nn.functional as F
    return F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), **kw).transpose(1, 2)
