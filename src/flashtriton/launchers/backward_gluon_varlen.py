"""Host side of the fused Gluon backward's VARLEN variant (kernels/bwd_gluon_fused.py, session 50): a packed
batch's dq, dk, dv in one kernel plus the zero and the cast of the fp32 dq accumulator, as the dense fused route
(launchers/backward_gluon.fused_into) does for (B, N, H, D) batches.

    fused_varlen_table(varlen, causal, n_slots, order=True, window=None)
        the kernel's SCHED (int32, on the device, no host sync; remembered on cu_seqlens_q): the cumulative
        key-block counts, cu_seqlens_q, cu_seqlens_k, and with order the slots' dispatch order
    fused_varlen_into(q, k, v, dout, lse, delta, softmax_scale, causal, dq, dk, dv, varlen, table,
                      preprocess=None, window=None, dropout_p=0.0, keys=None)
        the route (launchers/backward.py, where policy.gluon_bwd_fused_varlen accepts the call)
    varlen_window(window, varlen)
        the kernel's (win_left, win_right) of a windowed call

Layout: q, dout, dq (total_q, H, D); k, v, dk, dv (total_k, Hk, D); lse, delta (H, total_q) fp32 (the packed
forward's lse; the preprocess writes delta so). One CTA a (key block of BLOCK_N = 128 keys of one sequence, KV
head): grid (cdiv(total_k, 128) + B, Hk), an upper bound on the blocks (spare CTAs return at once), so nothing
about cu_seqlens reaches the host. The grid is not max_seqlen_k / 128 x B: no CTA is spent on padding.

NON-DETERMINISTIC dq, as the dense fused kernel's (the fp32 reduce-adds of the key blocks arrive in any order);
dk / dv deterministic. deterministic=True calls never come here (policy).
"""
from __future__ import annotations

import torch

from .. import memory
from ..kernels.bwd_gluon_fused import FUSED_CONFIG, dq_stage_layout, k_layout
from .backward_gluon import _run_fused
from .common import LOG2E, Varlen, _cached_map, _cu_blocks, _stamp
from .forward_gluon import _box_layout

__all__ = ["VARLEN_ORDER", "fused_varlen_table", "fused_varlen_into", "varlen_slots", "varlen_window"]

# The dispatch order of the key-block slots: heaviest first (the most query tiles a block visits), as the
# varlen forwards' (launchers/common._heaviest_first). Without it, slots in sequence order.
VARLEN_ORDER = True
# The VARLEN variant's tile, one for every head dim (the kernel's static_assert: the 64-row tile): 64 query rows a
# ring tile, 128 keys a CTA. The table, the grid and the launch all read it from here.
BLOCK_M, BLOCK_N = 64, 128
assert all(cfg[:2] == (BLOCK_M, BLOCK_N) for cfg in FUSED_CONFIG.values()), "FUSED_CONFIG's tile changed"


def varlen_slots(total_k: int, batch: int) -> int:
    """The grid's slots: an upper bound on the key blocks of any batch of `batch` sequences holding total_k keys
    (each sequence wastes at most one partial block)."""
    return -(-total_k // BLOCK_N) + batch


def varlen_window(window, total_q: int, total_k: int) -> tuple[int, int]:
    """The WINDOW variant's (win_left, win_right) >= 0 from a call's effective window (left, right), -1 unbounded
    (launchers.common._effective_window over the batch's max_seqlen): an unbounded side as total_q + total_k,
    past every key of every sequence, small enough for the kernel's int32 index arithmetic (the policy bounds the
    totals), and fixed by the shapes, so that a launch plan's recorded value fits every batch of the signature."""
    return tuple(int(w) if w >= 0 else total_q + total_k for w in window)


def _slot_order(varlen: Varlen, cu_kb: torch.Tensor, n_slots: int, block_m: int, block_n: int,
                causal: bool, window=None) -> torch.Tensor:
    """The slots' dispatch order, by the query tiles each key block visits a head, most first (stable: a
    sequence's blocks keep their order among equals); spare slots last. On the device, no host sync. Mirrors
    kernels/bwd_gluon_fused.fused_varlen_coords' n_m (window: its (win_left, win_right), varlen_window's)."""
    dev = cu_kb.device
    g = torch.arange(n_slots, device=dev, dtype=torch.int32)
    batch = cu_kb.numel() - 1
    seq = torch.searchsorted(cu_kb[1:], g, right=True)                 # == batch: a spare slot
    valid = seq < batch
    s = seq.clamp(max=batch - 1)
    nq = (varlen.cu_seqlens_q[1:] - varlen.cu_seqlens_q[:-1])[s]
    nk = (varlen.cu_seqlens_k[1:] - varlen.cu_seqlens_k[:-1])[s]
    n_q_tiles = (nq + block_m - 1) // block_m
    if window is not None:
        n0 = (g - cu_kb[s]) * block_n
        lo = n0 - (nk - nq) - window[1]
        hi = n0 + block_n - 1 - (nk - nq) + window[0]
        j0 = torch.minimum(lo.clamp(min=0) // block_m, (n_q_tiles - 1).clamp(min=0))
        j1 = torch.minimum(((hi + 1).clamp(min=0) + block_m - 1) // block_m, n_q_tiles)
        work = (j1 - j0).clamp(min=1)
    elif causal:
        n0 = (g - cu_kb[s]) * block_n
        first = (n0 - (nk - nq) - block_m + 1).clamp(min=0)
        j0 = torch.minimum((first + block_m - 1) // block_m, (n_q_tiles - 1).clamp(min=0))
        work = (n_q_tiles - j0).clamp(min=1)
    else:
        work = n_q_tiles.clamp(min=1)
    work = torch.where(valid, work, torch.full_like(work, -1))
    return torch.sort(work, descending=True, stable=True).indices.to(torch.int32)


def fused_varlen_table(varlen: Varlen, causal: bool, n_slots: int, order: bool = True, window=None) -> torch.Tensor:
    """The VARLEN kernel's SCHED: int32 [cumulative key-block counts (B + 1), cu_seqlens_q (B + 1), cu_seqlens_k
    (B + 1)] and, with order, the n_slots slots' dispatch order (_slot_order). Built on the device without a host
    sync and remembered on cu_seqlens_q with cu_seqlens_k's stamp (launchers/common._cached_map: a model passes
    the same cu_seqlens to every layer). window: the WINDOW variant's (win_left, win_right) (varlen_window), for
    the order's work."""
    cu_q, cu_k = varlen.cu_seqlens_q, varlen.cu_seqlens_k
    block_m, block_n = BLOCK_M, BLOCK_N

    def make():
        cu_kb = _cu_blocks(cu_k, block_n)
        parts = [cu_kb, cu_q.to(torch.int32), cu_k.to(torch.int32)]
        if order:
            parts.append(_slot_order(varlen, cu_kb, n_slots, block_m, block_n, causal, window))
        return torch.cat(parts).contiguous()
    key = ("gluon_bwd_varlen", bool(causal), n_slots, bool(order), None if window is None else tuple(window),
           _stamp(cu_k))
    return _cached_map(cu_q, key, make)


def _rows_desc(x: torch.Tensor, rows: int, layout=None):
    """A Gluon descriptor over x (total, heads, D) as (total, heads * D) rows, box (rows, D), x itself its base
    (a launch plan rebinds it by its base). layout: the shared layout (default: forward_gluon's for the box)."""
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor
    total, h, d = x.shape
    return TensorDescriptor(x, [total, h * d], [x.stride(0), 1], [rows, d],
                            layout if layout is not None else _box_layout(rows, d, x.dtype))


def fused_varlen_into(q, k, v, dout, lse, delta, softmax_scale, causal: bool, dq, dk, dv, varlen: Varlen,
                      table: torch.Tensor, preprocess=None, window=None, dropout_p: float = 0.0,
                      keys: torch.Tensor | None = None) -> None:
    """The route (policy.gluon_bwd_fused_varlen has accepted the call: packed 16-byte rows, bf16 / fp16, D in
    FUSED_CONFIG, lse (H, total_q) packed): the preprocess (delta; the caller's closure), then the zero of the
    fp32 dq accumulator, the VARLEN kernel and the cast (backward_gluon._run_fused), into dq, dk, dv (contiguous,
    shaped like q, k, v). table: fused_varlen_table(varlen, causal, varlen_slots(...), VARLEN_ORDER, window).
    window: None, or the WINDOW variant's (win_left, win_right) (varlen_window; causal False).
    dropout_p > 0 (session 51; plain or causal, no window): the backward of the packed dropout forward whose key
    table is keys (launchers.common._dropout_keys(rng, H, total_q, max(max_seqlen_k, 1)): the packed layout, row
    keys by packed row, column keys by the key's index in its sequence), the kernel's DROPOUT."""
    dropout = dropout_p > 0
    if dropout and (window is not None or keys is None):
        raise ValueError("dropout_p > 0: needs keys (the call's key table) and takes no window (the kernel's "
                         "WINDOW variant has no dropout)")
    total_q, h, d = q.shape
    total_k, hk = k.shape[0], k.shape[1]
    batch = varlen.cu_seqlens_q.numel() - 1
    block_m, block_n, stages = BLOCK_M, BLOCK_N, FUSED_CONFIG[d][2]
    n_slots = varlen_slots(total_k, batch)
    dq_accum = memory.empty((total_q, h, d), torch.float32, q.device)       # zeroed by _run_fused's launch
    klay = k_layout(d)
    half = block_n // 2
    q_desc, do_desc = _rows_desc(q, block_m), _rows_desc(dout, block_m)
    k_desc, v_desc = _rows_desc(k, half, klay), _rows_desc(v, half)
    dk_desc, dv_desc = _rows_desc(dk, half, klay), _rows_desc(dv, half)
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor
    dq_desc = TensorDescriptor(dq_accum, [total_q, h * d], [h * d, 1], [block_m, d // 2], dq_stage_layout(block_m))
    scale = float(softmax_scale)
    drop_args = (keys, total_q, float(dropout_p)) if dropout else (None, None, None)
    args = (q_desc, do_desc, k_desc, v_desc, dk_desc, dv_desc, dq_desc, lse, delta,
            total_q, total_k, h, hk, h // hk, scale, scale * LOG2E, *drop_args,
            *(window if window is not None else (None, None)))
    order = table.numel() > 3 * (batch + 1)
    kwargs = dict(HEAD_DIM=d, BLOCK_M=block_m, BLOCK_N=block_n, NUM_STAGES=stages, CAUSAL=bool(causal),
                  ROTATE=not causal and window is None, DROPOUT=dropout, SCHED=table, batch=batch, DK=dk, DV=dv,
                  VARLEN=True, VARLEN_ORDER=order, num_warps=4)
    if dropout:
        kwargs["rng_stride"] = max(int(varlen.max_seqlen_k), 1)     # (the table's columns; absent otherwise)
    if window is not None:
        kwargs["WINDOW"] = True          # (absent otherwise: the binder's key of the plain / CAUSAL variants)
    _run_fused(dq, dk, dv, dq_accum, (n_slots, hk), args, kwargs, replayable=True, preprocess=preprocess)
