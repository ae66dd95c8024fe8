"""Per-sequence views of the backend's inputs and outputs, and the per-head float32
copies the tile loops work on.

Dense tensors are (B, N, H, D) with lse (B, H, N); variable-length ones are
(total, H, D) with lse (H, total) and cu_seqlens offsets. Both become a list of
sequences whose tensors are views: q (n_q, H, D), k / v (n_k, Hk, D), lse (H, n_q).
sequences() makes no copy.

The copies are made one (sequence, KV head) at a time, so the extra memory is
O(N * D) per head on top of the O(threads * tile^2) score tiles, never O(N^2):
rows of the G query heads of a KV head as (n_q * G, D) float32 (row i * G + g is
query i of head h0 + g), K / V of one head in float32, and V^T (or q^T, dO^T, K^T
in the backward) in size-aligned transposed tiles, the weight layout of
engine.mm_nt (x @ w^T with a contiguous w). Converting bf16 / fp16 to float32 is
exact, so a float32 product of the converted tensors equals the low-precision
product with float32 accumulation.
"""
from __future__ import annotations

from typing import NamedTuple, Optional

import torch


class Seq(NamedTuple):
    index: int
    q: torch.Tensor                 # (n_q, H, D)
    k: torch.Tensor                 # (n_k, Hk, D)
    v: torch.Tensor                 # (n_k, Hk, D)
    extra: tuple                    # more (n_q, H, D) views (out, dout, ...)
    lse: Optional[torch.Tensor]     # (H, n_q)


def sequences(q, k, v, varlen, extra=(), lse=None) -> list[Seq]:
    """Split a dense or variable-length call into per-sequence views. `extra` are
    tensors laid out like q (out, dout, dq ...); lse is (B, H, Nq) or (H, total)."""
    out = []
    if varlen is None:
        for b in range(q.shape[0]):
            out.append(Seq(b, q[b], k[b], v[b], tuple(t[b] for t in extra), None if lse is None else lse[b]))
        return out
    cq = varlen.cu_seqlens_q.tolist()
    ck = varlen.cu_seqlens_k.tolist()
    for b in range(len(cq) - 1):
        sq, eq, sk, ek = cq[b], cq[b + 1], ck[b], ck[b + 1]
        out.append(Seq(b, q[sq:eq], k[sk:ek], v[sk:ek], tuple(t[sq:eq] for t in extra),
                       None if lse is None else lse[:, sq:eq]))
    return out


def key_views(varlen, *tensors) -> list[tuple]:
    """Per-sequence (n_k, Hk, D) views of tensors laid out like k (dk, dv)."""
    if varlen is None:
        return [tuple(t[b] for t in tensors) for b in range(tensors[0].shape[0])]
    ck = varlen.cu_seqlens_k.tolist()
    return [tuple(t[s:e] for t in tensors) for s, e in zip(ck, ck[1:])]


def group_rows(x: torch.Tensor, hk: int, group: int, scale: float = 1.0) -> torch.Tensor:
    """(n, H, D) -> (n * G, D) float32: the rows of the G query heads of KV head hk,
    row i * G + g = x[i, hk * G + g] * scale."""
    n, _, d = x.shape
    res = torch.empty(n, group, d, dtype=torch.float32)
    res.copy_(x[:, hk * group:(hk + 1) * group])
    if scale != 1.0:
        res.mul_(scale)
    return res.view(n * group, d)


def head_f32(x: torch.Tensor, hk: int) -> torch.Tensor:
    """(n, Hk, D) -> (n, D) contiguous float32 of KV head hk."""
    res = torch.empty(x.shape[0], x.shape[2], dtype=torch.float32)
    res.copy_(x[:, hk])
    return res


def transposed_tiles(x: torch.Tensor, size: int) -> list[torch.Tensor]:
    """(n, D) -> [(D, size) float32 contiguous, ..., (D, n % size)]: the size-aligned
    key tiles of x, each transposed (the weight layout of engine.mm_nt)."""
    n, d = x.shape
    full = n // size
    tiles = []
    if full:
        blk = torch.empty(full, d, size, dtype=torch.float32)
        blk.copy_(x[:full * size].view(full, size, d).transpose(1, 2))
        tiles.extend(blk.unbind(0))
    if n % size:
        tail = torch.empty(d, n - full * size, dtype=torch.float32)
        tail.copy_(x[full * size:].t())
        tiles.append(tail)
    return tiles
