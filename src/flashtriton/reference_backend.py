"""The `reference` backend: flashtriton.reference behind the backend interface.

Low-precision inputs compute in float32 and cast the output back; float32 and
float64 inputs compute in their own dtype. The dropout mask comes from a generator
seeded by rng_state, so the forward and backward passes see the same mask.
"""
from __future__ import annotations

import torch

from . import alibi_anchor, memory, paged, reference
from .launchers.prefill import AttnParams, Varlen


def _prepare(q, k, params: AttnParams, alibi, rng, varlen):
    """(compute dtype, keyword arguments of reference.attention)."""
    cd = q.dtype if q.dtype in (torch.float32, torch.float64) else torch.float32
    kw = dict(softmax_scale=params.softmax_scale, window_left=params.window_left,
              window_right=params.window_right, softcap=params.softcap, alibi_slopes=alibi,
              dropout_p=params.dropout_p)
    if params.dropout_p > 0:
        if varlen is None:
            shape = (q.shape[0], q.shape[2], q.shape[1], k.shape[1])
        else:
            shape = (varlen.cu_seqlens_q.numel() - 1, q.shape[1], varlen.max_seqlen_q, varlen.max_seqlen_k)
        kw["dropout_mask"] = reference.dropout_keep_mask(rng, shape, params.dropout_p, q.device)
    return cd, kw


def fwd(q, k, v, params: AttnParams, alibi=None, rng=None, varlen: Varlen | None = None):
    """(out, lse), the lse relative to the ALiBi anchor as every backend's fwd returns it
    (alibi_anchor.py)."""
    out, lse = _fwd_plain(q, k, v, params, alibi, rng, varlen)
    vl = None if varlen is None else (varlen.cu_seqlens_q, varlen.cu_seqlens_k)
    return out, alibi_anchor.to_anchored(lse, alibi, q.shape[1], k.shape[1], vl)


def _fwd_plain(q, k, v, params: AttnParams, alibi=None, rng=None, varlen: Varlen | None = None):
    """(out, flash-attn's lse)."""
    cd, kw = _prepare(q, k, params, alibi, rng, varlen)
    q_, k_, v_ = (t.to(cd) for t in (q, k, v))
    if varlen is None:
        out, lse = reference.attention(q_, k_, v_, **kw)
    else:
        out, lse = reference.attention_varlen(q_, k_, v_, varlen.cu_seqlens_q, varlen.cu_seqlens_k, **kw)
    res = memory.empty(q.shape, q.dtype, q.device)
    res.copy_(out)
    return res, lse.to(torch.float64 if q.dtype == torch.float64 else torch.float32)


def bwd(dout, q, k, v, out, lse, params: AttnParams, alibi=None, rng=None, varlen: Varlen | None = None):
    cd, kw = _prepare(q, k, params, alibi, rng, varlen)
    args = [t.to(cd) for t in (dout, q, k, v)]
    if varlen is None:
        grads = reference.attention_backward(*args, **kw)
    else:
        grads = reference.attention_backward_varlen(*args, varlen.cu_seqlens_q, varlen.cu_seqlens_k, **kw)
    # Contiguous, as the op's fake implementation declares (the einsums leave their
    # results in other layouts).
    res = tuple(memory.empty(t.shape, t.dtype, t.device) for t in (q, k, v))
    for r, g in zip(res, grads):
        r.copy_(g)
    return res


def fwd_paged(q, k_cache, v_cache, block_table, params: AttnParams, alibi, varlen: Varlen):
    """flash_attn_varlen_func with block_table: the pages gathered into the unpaged varlen
    layout (flashtriton.paged), then the forward. Its lse is flash-attn's: the paged op is
    forward-only and returns it as it is (alibi_anchor.py)."""
    k, v = paged.gather_kv(k_cache, v_cache, block_table, varlen.cu_seqlens_k)
    return _fwd_plain(q, k, v, params, alibi, None, varlen)


def dropout_mask(q, k, params: AttnParams, rng, varlen: Varlen | None = None) -> torch.Tensor:
    """The keep-mask (B, H, Nq, Nk) bool that fwd / bwd use for this rng state."""
    return _prepare(q, k, params, None, rng, varlen)[1]["dropout_mask"]
from .reference_decode import kvcache_fwd  # noqa: E402,F401  (flash_attn_with_kvcache)
