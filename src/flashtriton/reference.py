"""Plain-PyTorch attention with exactly the semantics of the kernels.

This is the `reference` backend and the truth of the test-suite. It runs on any
device and in any dtype (float64 included) and materialises the full score
matrix, so it is for checking, not for speed.

Semantics (those of flash-attn 2.x):
- q (B, Nq, H, D), k and v (B, Nk, Hk, D); query head h reads kv head h // (H // Hk).
- scores = q @ k^T * softmax_scale; then softcap * tanh(scores / softcap) when
  softcap > 0; then the ALiBi bias -slope * |i + Nk - Nq - j|; then the window:
  key j is visible to query i when i + Nk - Nq - left <= j <= i + Nk - Nq + right
  (a negative bound means unbounded; causal is right = 0).
- lse = logsumexp over the visible keys, float32 (float64 for float64 inputs);
  a row that sees no key has lse = +inf and outputs 0 (and zero gradients).
- dropout keeps an element with probability 1 - p and scales kept ones by 1/(1-p).
"""
from __future__ import annotations

import math

import torch


def visible_mask(nq: int, nk: int, window_left: int, window_right: int, device) -> torch.Tensor | None:
    """(Nq, Nk) bool, True where key j is visible to query i; None when all are."""
    if window_left < 0 and window_right < 0:
        return None
    i = torch.arange(nq, device=device)[:, None] + (nk - nq)
    j = torch.arange(nk, device=device)[None, :]
    mask = torch.ones(nq, nk, dtype=torch.bool, device=device)
    if window_left >= 0:
        mask &= j >= i - window_left
    if window_right >= 0:
        mask &= j <= i + window_right
    return mask


def alibi_bias(slopes: torch.Tensor, batch: int, nheads: int, nq: int, nk: int, dtype) -> torch.Tensor:
    """(B, H, Nq, Nk) bias -slope * |i + Nk - Nq - j| from slopes (H,) or (B, H)."""
    slopes = slopes.to(dtype)
    slopes = slopes.expand(batch, nheads) if slopes.dim() == 1 else slopes
    i = torch.arange(nq, device=slopes.device, dtype=dtype)[:, None] + (nk - nq)
    j = torch.arange(nk, device=slopes.device, dtype=dtype)[None, :]
    return -slopes[:, :, None, None] * (i - j).abs()


def dropout_keep_mask(rng_state: torch.Tensor, shape, dropout_p: float, device) -> torch.Tensor:
    """Keep-mask of the reference backend, drawn from a generator seeded by rng_state.

    The Triton kernels draw their own mask with Philox; the two backends agree in
    distribution, and tests compare them exactly by passing the kernel's mask
    (returned through return_attn_probs) as `dropout_mask`.
    """
    gen = torch.Generator(device=device)
    gen.manual_seed(int(rng_state[0].item()) ^ int(rng_state[1].item()))
    return torch.rand(shape, generator=gen, device=device) >= dropout_p


def attention(q, k, v, *, softmax_scale: float, window_left: int = -1, window_right: int = -1,
              softcap: float = 0.0, alibi_slopes=None, dropout_p: float = 0.0, dropout_mask=None,
              return_probs: bool = False):
    """Dense attention. Returns (out (B, Nq, H, D), lse (B, H, Nq)[, probs (B, H, Nq, Nk)]).

    Computes in q.dtype: pass float64 tensors for the truth, low-precision ones for
    the "same-dtype PyTorch math" that the error criterion compares against.
    """
    b, nq, h, d = q.shape
    nk, hk = k.shape[1], k.shape[2]
    group = h // hk
    k = k.repeat_interleave(group, dim=2) if group > 1 else k
    v = v.repeat_interleave(group, dim=2) if group > 1 else v
    s = torch.einsum("bqhd,bkhd->bhqk", q, k) * softmax_scale  # (B, H, Nq, Nk)
    if softcap > 0:
        s = softcap * torch.tanh(s / softcap)
    if alibi_slopes is not None:
        s = s + alibi_bias(alibi_slopes, b, h, nq, nk, s.dtype)
    mask = visible_mask(nq, nk, window_left, window_right, q.device)
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    # Softmax with a detached max shift: exact (softmax is shift invariant) and a
    # row with no visible key gives exp(-inf) = 0 with finite gradients.
    if s.shape[-1] == 0:  # no keys at all (a zero-length sequence of a varlen batch)
        m = s.new_full(s.shape[:-1] + (1,), float("-inf"))
    else:
        m = s.amax(dim=-1, keepdim=True).detach()
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    e = torch.exp(s - m)
    l = e.sum(dim=-1, keepdim=True)
    p = e / torch.where(l == 0, torch.ones_like(l), l)
    lse_dtype = torch.float64 if q.dtype == torch.float64 else torch.float32
    lse = (m + torch.log(l)).squeeze(-1).to(lse_dtype)
    lse = torch.where(l.squeeze(-1) == 0, torch.full_like(lse, math.inf), lse)
    p_used = p
    if dropout_p > 0:
        if dropout_mask is None:
            raise ValueError("dropout_mask: required by reference.attention when dropout_p > 0")
        p_used = p.masked_fill(~dropout_mask, 0.0) / (1.0 - dropout_p)
    out = torch.einsum("bhqk,bkhd->bqhd", p_used.to(v.dtype), v)
    if return_probs:
        return out, lse, p
    return out, lse


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, *, dropout_mask=None, **kw):
    """Variable-length attention: q (total_q, H, D). Returns (out, lse (H, total_q))."""
    cq = cu_seqlens_q.tolist()
    ck = cu_seqlens_k.tolist()
    outs, lses = [], []
    for i in range(len(cq) - 1):
        qi = q[cq[i]:cq[i + 1]].unsqueeze(0)
        ki = k[ck[i]:ck[i + 1]].unsqueeze(0)
        vi = v[ck[i]:ck[i + 1]].unsqueeze(0)
        extra = dict(kw)
        if extra.get("alibi_slopes") is not None and extra["alibi_slopes"].dim() == 2:
            extra["alibi_slopes"] = extra["alibi_slopes"][i]
        if dropout_mask is not None:
            extra["dropout_mask"] = dropout_mask[i:i + 1, :, :qi.shape[1], :ki.shape[1]]
        o, lse = attention(qi, ki, vi, **extra)
        outs.append(o[0])
        lses.append(lse[0])
    return torch.cat(outs, 0), torch.cat(lses, -1)


def attention_backward(dout, q, k, v, *, softmax_scale: float, window_left: int = -1, window_right: int = -1,
                       softcap: float = 0.0, alibi_slopes=None, dropout_p: float = 0.0, dropout_mask=None):
    """(dq, dk, dv) of `attention` by the explicit formulas, without autograd (which a
    torch.library op cannot use inside its own implementation):
        dV = Pd^T dO,  dP = (dO V^T) * Z / (1 - p),  dS = P * (dP - rowsum(dP * P)),
        dS *= 1 - tanh^2 with softcap,  dQ = scale dS K,  dK = scale dS^T Q,
    where Pd = P * Z / (1 - p) and Z is the dropout keep-mask; GQA sums over the group."""
    b, nq, h, d = q.shape
    hk = k.shape[2]
    group = h // hk
    kr = k.repeat_interleave(group, dim=2) if group > 1 else k
    vr = v.repeat_interleave(group, dim=2) if group > 1 else v
    _, _, p = attention(q, k, v, softmax_scale=softmax_scale, window_left=window_left, window_right=window_right,
                        softcap=softcap, alibi_slopes=alibi_slopes, dropout_p=dropout_p, dropout_mask=dropout_mask,
                        return_probs=True)                                    # p (B, H, Nq, Nk)
    keep_scale = 1.0
    if dropout_p > 0:
        keep_scale = dropout_mask.to(p.dtype) / (1.0 - dropout_p)
    dv = torch.einsum("bhqk,bqhd->bkhd", p * keep_scale, dout)
    dp = torch.einsum("bqhd,bkhd->bhqk", dout, vr) * keep_scale
    ds = p * (dp - (dp * p).sum(-1, keepdim=True))
    if softcap > 0:
        t = torch.tanh(torch.einsum("bqhd,bkhd->bhqk", q, kr) * softmax_scale / softcap)
        ds = ds * (1 - t * t)
    dq = torch.einsum("bhqk,bkhd->bqhd", ds, kr) * softmax_scale
    dk = torch.einsum("bhqk,bqhd->bkhd", ds, q) * softmax_scale
    if group > 1:
        dk = dk.unflatten(2, (hk, group)).sum(3)
        dv = dv.unflatten(2, (hk, group)).sum(3)
    return dq, dk, dv


def attention_backward_varlen(dout, q, k, v, cu_seqlens_q, cu_seqlens_k, *, dropout_mask=None, **kw):
    """attention_backward per sequence of a variable-length batch."""
    cq, ck = cu_seqlens_q.tolist(), cu_seqlens_k.tolist()
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    for i in range(len(cq) - 1):
        extra = dict(kw)
        if extra.get("alibi_slopes") is not None and extra["alibi_slopes"].dim() == 2:
            extra["alibi_slopes"] = extra["alibi_slopes"][i]
        nq, nk = cq[i + 1] - cq[i], ck[i + 1] - ck[i]
        if dropout_mask is not None:
            extra["dropout_mask"] = dropout_mask[i:i + 1, :, :nq, :nk]
        g = attention_backward(dout[cq[i]:cq[i + 1]][None], q[cq[i]:cq[i + 1]][None], k[ck[i]:ck[i + 1]][None],
                               v[ck[i]:ck[i + 1]][None], **extra)
        dq[cq[i]:cq[i + 1]], dk[ck[i]:ck[i + 1]], dv[ck[i]:ck[i + 1]] = g[0][0], g[1][0], g[2][0]
    return dq, dk, dv


def attention_grad(dout, q, k, v, *, varlen_args=None, **kw):
    """(dq, dk, dv) of `attention` (or `attention_varlen`) by recomputation and autograd:
    the tests' truth, independent of the explicit formulas above."""
    with torch.enable_grad():
        qg, kg, vg = (t.detach().requires_grad_(True) for t in (q, k, v))
        if varlen_args is None:
            out = attention(qg, kg, vg, **kw)[0]
        else:
            out = attention_varlen(qg, kg, vg, *varlen_args, **kw)[0]
        return torch.autograd.grad(out, (qg, kg, vg), dout)
