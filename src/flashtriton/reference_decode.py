"""Plain-PyTorch semantics of one flash_attn_with_kvcache call: append, rotary, attend.

This is the `reference` backend's kvcache_fwd and the truth of tests/test_kvcache.py.
It loops over the batch in Python and materialises every score matrix: for
checking, not for speed. The contract it implements is written out in the
docstring of flashtriton.kvcache; in short, for every sequence b:

  start  = cache_leftpad[b] (0 without it),  end = cache_seqlens[b]   (absolute cache positions)
  1. append: when k_new / v_new are given, k_new[b, i] (rotated at position end + i when
     rotary is on) and v_new[b, i] are written IN PLACE at cache position end + i,
     i < Snew. The rotation is computed in float32 and rounded to the cache dtype.
  2. q[b, i] is rotated (when rotary is on) at position end + i if the call is causal
     or windowed, else at position end for every i; float32 math, rounded to q.dtype.
  3. attention of the (rotated) queries over the keys at positions [start, end + Snew)
     with exactly flashtriton.reference.attention's semantics on that slice: the
     causal / window alignment is bottom-right and ALiBi distances are relative to
     the slice; rows that see no key output 0 with lse = +inf.

Cache positions map to memory as: contiguous cache (B_cache, S_cache, Hk, D),
position p of sequence b -> k_cache[cache_batch_idx[b] (or b), p]; paged cache
(num_blocks, page_size, Hk, D), p -> k_cache[block_table[b, p // page_size], p % page_size].
"""
from __future__ import annotations

import math

import torch

from . import memory, reference


def rotary_dim(rotary_cos) -> int:
    return 0 if rotary_cos is None else 2 * rotary_cos.shape[1]


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, positions: torch.Tensor,
                 interleaved: bool) -> torch.Tensor:
    """Rotary embedding of x (S, H, D) at positions (S,); cos, sin (S_ro, R / 2).

    Only the first R features rotate. interleaved=True (GPT-J) pairs features
    (2i, 2i + 1); interleaved=False (GPT-NeoX) pairs (i, i + R / 2). Pair i at
    position p turns by the angle whose cosine and sine are cos[p, i], sin[p, i]:
        (x1, x2) -> (x1 cos - x2 sin, x2 cos + x1 sin).
    Computed in float32 (float64 for float64 x) and returned in x.dtype.
    """
    half = cos.shape[1]
    r = 2 * half
    cd = torch.float64 if x.dtype == torch.float64 else torch.float32
    c = cos[positions].to(cd)[:, None, :]  # (S, 1, R/2)
    s = sin[positions].to(cd)[:, None, :]
    xr = x[..., :r].to(cd)
    if interleaved:
        x1, x2 = xr[..., 0::2], xr[..., 1::2]
        rot = torch.stack((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1).flatten(-2)
    else:
        x1, x2 = xr[..., :half], xr[..., half:]
        rot = torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1)
    return torch.cat((rot.to(x.dtype), x[..., r:]), dim=-1)


def cache_index(b: int, positions: torch.Tensor, cache_batch_idx, block_table, page_size: int):
    """Index tuple selecting cache rows (S, Hk, D) of sequence b at positions (S,)."""
    if block_table is not None:
        pages = block_table[b].long()[positions // page_size]
        return pages, positions % page_size
    row = int(cache_batch_idx[b]) if cache_batch_idx is not None else b
    return row, positions


def append(k_cache, v_cache, k_new, v_new, rotary_cos, rotary_sin, cache_seqlens, cache_batch_idx, block_table,
           rotary_interleaved: bool) -> None:
    """Step 1 alone: writes the (rotated) new keys and the new values into the caches."""
    paged = block_table is not None
    page_size = k_cache.shape[1] if paged else 0
    snew = k_new.shape[1]
    for b, end in enumerate(cache_seqlens.tolist()):
        pos = torch.arange(end, end + snew, device=k_cache.device)
        kn = k_new[b]
        if rotary_cos is not None:
            kn = apply_rotary(kn, rotary_cos, rotary_sin, pos, rotary_interleaved)
        idx = cache_index(b, pos, cache_batch_idx, block_table if paged else None, page_size)
        k_cache[idx] = kn.to(k_cache.dtype)
        v_cache[idx] = v_new[b].to(v_cache.dtype)


def kvcache_fwd(q, k_cache, v_cache, k_new, v_new, rotary_cos, rotary_sin, cache_seqlens, cache_batch_idx,
                cache_leftpad, block_table, params, rotary_interleaved, alibi_slopes, num_splits,
                need_lse=True, *, compute_dtype=None):
    """The backend function (see flashtriton.kvcache). Mutates k_cache / v_cache when
    k_new is given. Returns (out like q, lse (B, H, Sq)).

    compute_dtype: the dtype of the attention math (the rotary is always float32
    rounded to the input dtype, as in the kernels). Default: float32 for fp16 / bf16
    inputs, the input dtype otherwise. The tests pass float64 (the truth) and q.dtype
    (plain PyTorch in the input dtype, the error baseline). num_splits does not
    change the result and is ignored here.
    """
    batch, seqlen_q, nheads, _ = q.shape
    paged = block_table is not None
    page_size = k_cache.shape[1] if paged else 0
    cd = compute_dtype or (q.dtype if q.dtype in (torch.float32, torch.float64) else torch.float32)
    lse_dtype = torch.float64 if cd == torch.float64 or q.dtype == torch.float64 else torch.float32
    if k_new is not None and k_new.shape[1] > 0:
        append(k_cache, v_cache, k_new, v_new, rotary_cos, rotary_sin, cache_seqlens, cache_batch_idx,
               block_table, rotary_interleaved)
        snew = k_new.shape[1]
    else:
        snew = 0
    per_row = params.window_left >= 0 or params.window_right >= 0  # causal or windowed
    ends = cache_seqlens.tolist()
    starts = cache_leftpad.tolist() if cache_leftpad is not None else [0] * batch
    out = memory.empty(q.shape, q.dtype, q.device)
    lse = memory.empty((batch, nheads, seqlen_q), lse_dtype, q.device)
    for b in range(batch):
        end = ends[b]
        qb = q[b]
        if rotary_cos is not None:
            offs = torch.arange(seqlen_q, device=q.device) if per_row else torch.zeros(seqlen_q, dtype=torch.long,
                                                                                        device=q.device)
            qb = apply_rotary(qb, rotary_cos, rotary_sin, end + offs, rotary_interleaved)
        pos = torch.arange(starts[b], end + snew, device=q.device)
        if pos.numel() == 0:  # no key at all: every row is empty
            out[b] = 0
            lse[b] = math.inf
            continue
        idx = cache_index(b, pos, cache_batch_idx, block_table, page_size)
        kb, vb = k_cache[idx], v_cache[idx]  # (n, Hk, D)
        slopes = alibi_slopes
        if slopes is not None and slopes.dim() == 2:
            slopes = slopes[b]
        o, l = reference.attention(qb[None].to(cd), kb[None].to(cd), vb[None].to(cd),
                                   softmax_scale=params.softmax_scale, window_left=params.window_left,
                                   window_right=params.window_right, softcap=params.softcap, alibi_slopes=slopes)
        out[b] = o[0].to(q.dtype)
        lse[b] = l[0].to(lse_dtype)
    return out, lse


def merge_states(outs: torch.Tensor, lses: torch.Tensor):
    """Merge N partial attention results by their logsumexp (flashtriton.merge's math).

    outs (N, *rows, D) and lses (N, *rows), where `rows` indexes one query row of
    one head. Returns (out (*rows, D) in outs' dtype, lse (*rows) float32 or float64):
        lse = log(sum_i exp(lse_i)),   out = sum_i exp(lse_i - lse) * out_i.
    A part whose lse is +inf or -inf saw no key and gets weight 0; a row where every
    part is empty outputs 0 with lse = +inf. Computed in float32 (float64 inputs: float64).
    """
    cd = torch.float64 if outs.dtype == torch.float64 or lses.dtype == torch.float64 else torch.float32
    lse = lses.to(cd)
    empty = torch.isinf(lse)
    lse = lse.masked_fill(empty, -math.inf)
    m = lse.amax(dim=0)
    m_safe = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    w = torch.exp(lse - m_safe)                        # (N, *rows); 0 for empty parts
    total = w.sum(dim=0)
    all_empty = total == 0
    wn = w / torch.where(all_empty, torch.ones_like(total), total)
    out = (wn.unsqueeze(-1) * outs.to(cd).masked_fill(empty.unsqueeze(-1), 0.0)).sum(dim=0)
    lse_out = torch.where(all_empty, torch.full_like(m, math.inf), m_safe + torch.log(total))
    return out.to(outs.dtype), lse_out.to(torch.float64 if cd == torch.float64 else torch.float32)
