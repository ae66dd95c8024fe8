"""One-row forwards on a backend's decode kernel (session 60), shared by the Triton backend
(launchers/policy.one_row_decode, launchers/forward.fwd) and the CPU backend (cpu/forward.fwd).

flash_attn_func with Nq = 1, or flash_attn_varlen_func with one query a sequence, is what a generation loop
that does not call flash_attn_with_kvcache runs every step. The prefill kernels give such a call one row a
head, each head streaming its K / V alone; the decode kernels split the keys and read each KV byte once per
GQA group. The semantics are the same: flash-attn aligns both APIs' masks and ALiBi bottom-right, and the
decode kernels place them relative to a sequence's left pad.
"""
from __future__ import annotations

import torch

from .launchers.common import AttnParams, _effective_window


def takes(q, k, params, varlen, min_nk: int) -> bool:
    """Whether a call is one-row: dense with Nq = 1 and Nk >= min_nk, or varlen whose every sequence has one query
    (max_seqlen_q = 1 and total_q = batch: with the validated cu_seqlens_q, one each) and max_seqlen_k >= min_nk;
    no dropout (the decode kernels have none). Each backend adds its own rules (dtypes, its switch)."""
    if params.dropout_p != 0:
        return False
    if varlen is None:
        return q.shape[1] == 1 and k.shape[1] >= min_nk
    return (varlen.max_seqlen_q == 1 and q.shape[0] == varlen.cu_seqlens_q.numel() - 1
            and varlen.max_seqlen_k >= min_nk)


def run(kvcache_fwd, q, k, v, params, alibi=None, varlen=None, **varlen_options):
    """The call on kvcache_fwd (a backend's flash_attn_with_kvcache entry point). Dense: k, v (B, Nk, Hk, D) as a
    full cache (cache_seqlens = Nk), q (B, 1, H, D). Varlen: q (B, H, D) as (B, 1, H, D), the packed k, v
    (total_k, Hk, D) as one cache every sequence shares (batch stride 0), sequence b's keys [cu_k[b], cu_k[b + 1])
    as cache_leftpad / cache_seqlens; varlen_options go to kvcache_fwd (the Triton launcher's span). Returns
    (out, lse) in the prefill layouts: lse (B, H, 1) dense, (H, total_q = B) varlen."""
    p = _effective_window(params, 1, k.shape[1] if varlen is None else varlen.max_seqlen_k)
    p = AttnParams(p.softmax_scale, p.window_left, p.window_right, p.softcap)
    if varlen is None:
        seqlens = torch.full((q.shape[0],), k.shape[1], dtype=torch.int32, device=q.device)
        return kvcache_fwd(q, k, v, None, None, None, None, seqlens, None, None, None, p, False, alibi, 0,
                           need_lse=True)
    batch = q.shape[0]
    cu_k = varlen.cu_seqlens_k.contiguous()
    kc, vc = (t.unsqueeze(0).expand(batch, *t.shape) for t in (k, v))            # (B, total_k, Hk, D), stride 0
    out, lse = kvcache_fwd(q.unsqueeze(1), kc, vc, None, None, None, None, cu_k[1:], None, cu_k[:-1], None, p,
                           False, alibi, 0, need_lse=True, **varlen_options)
    return out.squeeze(1), lse.squeeze(2).t().contiguous()                        # (B, H, D), (H, B)
