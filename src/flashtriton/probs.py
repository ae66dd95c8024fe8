"""S_dmask for return_attn_probs: the softmax probabilities, negated where dropped.

Materialises (B, H, Nq, Nk), like flash-attn's own return_attn_probs: for tests and
inspection, never for training. The probabilities are recomputed from q, k and the
lse the kernel returned; the sign comes from the backend's own dropout mask.
"""
from __future__ import annotations

import torch

from . import backends, reference
from .launchers.prefill import AttnParams, Varlen


def _probs_dense(q, k, lse, scale, window_left, window_right, softcap, alibi):
    b, nq, h, _ = q.shape
    nk, hk = k.shape[1], k.shape[2]
    k = k.float().repeat_interleave(h // hk, dim=2)
    s = torch.einsum("bqhd,bkhd->bhqk", q.float(), k) * scale
    if softcap > 0:
        s = softcap * torch.tanh(s / softcap)
    if alibi is not None:
        s = s + reference.alibi_bias(alibi, b, h, nq, nk, s.dtype)
    mask = reference.visible_mask(nq, nk, window_left, window_right, q.device)
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return torch.exp(s - lse.float()[..., None])  # lse = +inf on empty rows: p = 0


def attention_probs(q, k, lse, backend, scale, window_left, window_right, softcap, alibi, dropout_p, rng,
                    varlen) -> torch.Tensor:
    with torch.no_grad():
        if varlen is None:
            p = _probs_dense(q, k, lse, scale, window_left, window_right, softcap, alibi)
        else:
            cu_q, cu_k, max_q, max_k = varlen
            cq, ck = cu_q.tolist(), cu_k.tolist()
            p = q.new_zeros((len(cq) - 1, q.shape[1], max_q, max_k), dtype=torch.float32)
            for i in range(len(cq) - 1):
                qi, ki = q[cq[i]:cq[i + 1]][None], k[ck[i]:ck[i + 1]][None]
                al = alibi if alibi is None or alibi.dim() == 1 else alibi[i]
                lse_i = lse[:, cq[i]:cq[i + 1]][None]
                p[i, :, :qi.shape[1], :ki.shape[1]] = _probs_dense(qi, ki, lse_i, scale, window_left,
                                                                   window_right, softcap, al)[0]
        if dropout_p > 0:
            params = AttnParams(scale, window_left, window_right, softcap, dropout_p)
            vl = None if varlen is None else Varlen(*varlen)
            keep = backends.get(backend).dropout_mask(q, k, params, rng, vl)
            p = torch.where(keep, p, -p)
        return p.to(q.dtype)
