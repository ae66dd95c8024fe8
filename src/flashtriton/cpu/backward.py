"""Backward pass: FlashAttention-2's recomputation, on transposed float32 tiles.

For one sequence and one KV head, with rows = (query i, head g) pairs as in the
forward pass, P is recomputed from the saved lse, never stored:

    delta = rowsum(dO * O)                                   # (n_q * G,)
    for each key tile [j0, j1):                              # rows of the transposed tiles
        dK_j = dV_j = 0                                      # (w, D) float32
        for each query block that sees the tile:             # causal / window: others skipped
            sT  = k_j @ (q * scale * log2 e)^T               # (w, r)  S^T in log2 units
            pT  = exp2(sT - lse * log2 e)                    # P^T, exact softmax probabilities
            dpT = v_j @ dO^T                                 # (w, r)  dP^T
            dV_j += [dropout(pT)] @ dO                       # (w, D)
            dsT  = pT * ([dropout](dpT) - delta)             # dS^T
            dK_j += dsT @ q                                  # (w, D)
            dQ   += dsT^T @ k_j                              # (r, D)  (one transpose copy)

Why transposed (keys as rows): the float32 engine computes x @ w^T with a contiguous
w, so with S^T as the tile, four of the five products take their operands in the
layouts they already have (k_j, v_j as x; q, dO, and cached q^T / dO^T / k^T tiles
as w); only dQ needs dS in row-major form, one (w, r) transpose copy per tile.

Precision: S^T and dP^T are float32-exact products of the (exactly converted)
inputs, so dS = P (dP - delta), which cancels, starts from float32 values. For bf16
inputs the three accumulating products take P and dS rounded to bf16 and run as
bf16 matmuls (torch.mm handles the transposed operands, no copies): ~2x the float32
rate, as flash-attn does on GPUs, each tile's product rounded to bf16 before its
float32 accumulation. fp16 / fp32 inputs keep every product in float32.
The loops are sequential and every op is deterministic for a fixed thread count, so
the result is bitwise repeatable; no atomics, no merges.
"""
from __future__ import annotations

from typing import NamedTuple

import torch

from flashtriton import memory

from . import config, engine, layout
from .dropout import Dropout
from .forward import q_scale
from .tiles import LOG2E, Band, alibi_distance, alibi_slopes_log2, mask_, tiles


def bwd(dout, q, k, v, out, lse, params, alibi=None, rng=None, varlen=None):
    """Backend entry point: returns (dq, dk, dv), contiguous, shaped like q, k, v."""
    nheads, nheads_k = q.shape[-2], k.shape[-2]
    group = nheads // nheads_k
    dq = memory.empty(q.shape, q.dtype, q.device)
    dk = memory.empty(k.shape, k.dtype, k.device)
    dv = memory.empty(v.shape, v.dtype, v.device)
    if varlen is None:
        mq, mk = q.shape[1], k.shape[1]
    else:
        mq, mk = varlen.max_seqlen_q, varlen.max_seqlen_k
    drop = Dropout(params.dropout_p, rng, nheads, mq, mk) if params.dropout_p > 0 else None
    ctx = _Ctx(params, alibi, drop, group, q.shape[-1], config.products_in_input_precision(q.dtype))
    seqs = layout.sequences(q, k, v, varlen, extra=(out, dout, dq), lse=lse)
    bn = config.BWD_KEYS
    for seq, (dk_s, dv_s) in zip(seqs, layout.key_views(varlen, dk, dv)):
        band = Band(seq.q.shape[0], seq.k.shape[0], params.window_left, params.window_right)
        for hk in range(nheads_k):
            if band.n_k == 0 or band.n_q == 0:
                _empty_head(ctx, seq, band, hk, dk_s, dv_s)
                continue
            head = _head_inputs(ctx, seq, hk)
            for t, j0, j1 in tiles(0, band.n_k, bn):
                _key_tile(ctx, seq, band, hk, dk_s, dv_s, t, j0, j1, head)
            _write_dq(ctx, seq, hk, head.dq_rows)
    return dq, dk, dv


class _Ctx(NamedTuple):
    params: object
    alibi: object
    drop: object
    group: int
    head_dim: int
    lowp: bool


def _write_dq(ctx, seq, hk, dq_rows):
    n_q = seq.q.shape[0]
    g = ctx.group
    seq.extra[2][:, hk * g:(hk + 1) * g].copy_(dq_rows.mul_(ctx.params.softmax_scale).view(n_q, g, ctx.head_dim))


class _HeadInputs(NamedTuple):
    qs: torch.Tensor       # (n_q * G, D) float32 q * q_scale: the weight of S^T
    do: torch.Tensor       # (n_q * G, D) float32 dO: the weight of dP^T
    delta: torch.Tensor    # (1, n_q * G) rowsum(dO * O)
    lse2: torch.Tensor     # (1, n_q * G) lse in log2 units
    kf: torch.Tensor       # (n_k, D) float32
    vf: torch.Tensor       # (n_k, D) float32
    # operands of the three accumulating products dV += P^T dO, dK += dS^T q, dQ += dS k:
    # lowp: (rows, D) bf16 tensors for torch.mm; else transposed float32 tiles for mm_nt
    lowp: bool
    dv_w: list | torch.Tensor   # [(D, rb)] dO^T tiles, or dO (n_q * G, D) bf16
    dk_w: list | torch.Tensor   # [(D, rb)] (q * q_scale)^T tiles, or q (n_q * G, D) bf16 (unscaled)
    dq_w: list | torch.Tensor   # [(D, bn)] k^T tiles, or k (n_k, D) bf16
    slopes_t: object            # (1, 1, G) -slope * log2 e, or None
    dq_rows: torch.Tensor       # (n_q * G, D) float32 dQ accumulator


def _head_inputs(ctx, seq, hk) -> _HeadInputs:
    group = ctx.group
    n_q = seq.q.shape[0]
    h0 = hk * group
    rb = max(1, config.BWD_ROWS // group) * group
    out, dout, _ = seq.extra
    qs = layout.group_rows(seq.q, hk, group, q_scale(ctx.params))
    do = layout.group_rows(dout, hk, group)
    delta = (do * layout.group_rows(out, hk, group)).sum(dim=1)[None, :]
    lse2 = seq.lse[h0:h0 + group].t().reshape(1, n_q * group) * LOG2E
    kf = layout.head_f32(seq.k, hk)
    vf = layout.head_f32(seq.v, hk)
    if ctx.lowp:
        sl = slice(h0, h0 + group)
        dv_w = dout[:, sl].reshape(n_q * group, -1)
        dk_w = seq.q[:, sl].reshape(n_q * group, -1)
        dq_w = seq.k[:, hk].contiguous()
    else:
        dv_w = layout.transposed_tiles(do, rb)
        dk_w = layout.transposed_tiles(qs, rb)
        dq_w = layout.transposed_tiles(kf, config.BWD_KEYS)
    slopes = alibi_slopes_log2(ctx.alibi, seq.index, h0, group)
    return _HeadInputs(qs, do, delta, lse2, kf, vf, ctx.lowp, dv_w, dk_w, dq_w,
                       None if slopes is None else slopes.view(1, 1, group), torch.zeros(n_q * group, ctx.head_dim))


def _empty_head(ctx, seq, band, hk, dk, dv):
    """A sequence without queries or without keys: all its gradients are zero."""
    g = ctx.group
    if band.n_q:
        seq.extra[2][:, hk * g:(hk + 1) * g].zero_()
    if band.n_k:
        dk[:, hk].zero_()
        dv[:, hk].zero_()


def _key_tile(ctx, seq, band: Band, hk, dk, dv, t, j0, j1, head: _HeadInputs):
    """dK, dV of keys [j0, j1) of KV head hk, and their dQ contributions."""
    params, group, d, drop = ctx.params, ctx.group, ctx.head_dim, ctx.drop
    h0 = hk * group
    n_q = band.n_q
    bm = max(1, config.BWD_ROWS // group)  # query positions per block
    w = j1 - j0
    dk_acc = torch.zeros(w, d)
    dv_acc = torch.zeros(w, d)
    cap2 = params.softcap * LOG2E
    k_j, v_j = head.kf[j0:j1], head.vf[j0:j1]
    i_lo, i_hi = band.query_range(j0, j1)
    # whole aligned query blocks, so that the cached q^T / dO^T tiles are used as they are
    for tq, _, _ in tiles(i_lo, i_hi, bm):
        i0, i1 = tq * bm, min(n_q, (tq + 1) * bm)
        r0, r1 = i0 * group, i1 * group
        st = engine.mm_nt(k_j, head.qs[r0:r1])                # (w, r) S^T, log2 units
        if params.softcap > 0:
            tanh_t = st.tanh_()                                # kept for the derivative
            st = torch.mul(tanh_t, cap2)
        st3 = st.view(w, i1 - i0, group)
        if head.slopes_t is not None:
            st3.addcmul_(alibi_distance(band, i0, i1, j0, j1).permute(2, 0, 1), head.slopes_t)
        if not band.full(i0, i1, j0, j1):
            mask_(st3.permute(1, 2, 0), band, i0, i1, j0, j1)
        pt = st.sub_(head.lse2[:, r0:r1]).exp2_()             # (w, r) P^T
        dpt = engine.mm_nt(v_j, head.do[r0:r1])               # (w, r) dP^T
        if drop is not None:
            keep_t = drop.keep(seq.index, h0, group, i0, i1, j0, j1).permute(2, 0, 1)  # (w, bm, G)
            pdt = pt.view(w, i1 - i0, group).masked_fill(~keep_t, 0.0).mul_(drop.scale).view(w, -1)
            dpt.view(w, i1 - i0, group).masked_fill_(~keep_t, 0.0).mul_(drop.scale)
        else:
            pdt = pt
        if head.lowp:
            dv_acc.add_(torch.mm(pdt.to(torch.bfloat16), head.dv_w[r0:r1]))
        else:
            dv_acc.add_(engine.mm_nt(pdt, head.dv_w[tq]))
        dst = dpt.sub_(head.delta[:, r0:r1]).mul_(pt)          # (w, r) dS^T, natural units
        if params.softcap > 0:
            dst.mul_(tanh_t.square_().neg_().add_(1.0))        # d cap*tanh(x/cap) / dx = 1 - tanh^2
        if head.lowp:
            ds16 = dst.to(torch.bfloat16)
            dk_acc.add_(torch.mm(ds16, head.dk_w[r0:r1]))
            head.dq_rows[r0:r1].add_(torch.mm(ds16.t(), head.dq_w[j0:j1]))
        else:
            dk_acc.add_(engine.mm_nt(dst, head.dk_w[tq]))
            head.dq_rows[r0:r1].add_(engine.mm_nt(dst.t().contiguous(), head.dq_w[t]))
    # dS is w.r.t. scale * q.k; the float32 path's q carries q_scale instead of scale
    dk[j0:j1, hk].copy_(dk_acc.mul_(params.softmax_scale if head.lowp else params.softmax_scale / q_scale(params)))
    dv[j0:j1, hk].copy_(dv_acc)
