"""Layer 2: the host launcher of the paged varlen forward (kernels/fwd_paged.py).

flash_attn_varlen_func(q, k_cache, v_cache, cu_seqlens_q, cu_seqlens_k, ..., block_table=...):
queries packed (total_q, H, D); keys and values in a paged cache (num_blocks, page_size, Hk, D)
read in place through block_table (B, max_blocks_per_seq) int32; cu_seqlens_k holds the
key lengths only. Inputs arrive validated (flashtriton.paged: structure in the API layer,
values in the op), so what is left here is allocation, strides, the program map and the tile.
"""
from __future__ import annotations

import triton
import torch

from .. import alibi_anchor, memory
from ..kernels import configs
from ..kernels.fwd_paged import attn_fwd_paged_kernel
from . import plans
from .common import (AttnParams, Varlen, _alibi_strides, _cached_map, _common_scalars, _cu_blocks, _dot_precision,
                     _effective_window, _unit_stride_varlen, block_d, interpreting, qk_levels, reg_options)
from .decode import _kv_descriptor, _tma_ready, page_gather_kind
from . import forward_gluon
from .policy import gluon_fwd_paged, gluon_kind

# Key / value tiles by TMA where a page holds whole tiles (PAGE_SIZE >= BLOCK_N) and the caches are contiguous with a
# 16-byte aligned base (decode's rule, _tma_ready); else pointer loads. Session 49: bench/NOTES.md "Session 49".
PAGED_KV_TMA = True


def fwd_paged(q, k_cache, v_cache, block_table, params: AttnParams, alibi, varlen: Varlen):
    """Returns (out (total_q, H, D) like q, lse (H, total_q) fp32)."""
    varlen = _unit_stride_varlen(varlen)
    if block_table.stride(1) != 1:     # the kernel reads a sequence's entries as BLOCK_TABLE + row + j
        block_table = block_table.contiguous()
    total_q, nheads, head_dim = q.shape
    page_size, nheads_k = k_cache.shape[1], k_cache.shape[2]
    batch = varlen.cu_seqlens_q.numel() - 1
    params = _effective_window(params, varlen.max_seqlen_q, varlen.max_seqlen_k)
    if gluon_fwd_paged(q, k_cache, v_cache, block_table, params, alibi, block_d(head_dim), varlen):
        # (session 51: the Gluon VARLEN kernel's VARLEN_PAGED, plain or the canonical causal mask; its own launch plan)
        kind = gluon_kind(params)
        return forward_gluon.fwd_varlen_paged(q, k_cache, v_cache, block_table, varlen, params.softmax_scale,
                                              causal=kind == "causal",
                                              window=(int(params.window_left), 0) if kind == "window" else None)
    out = memory.empty(q.shape, q.dtype, q.device)
    lse = memory.empty((nheads, total_q), torch.float32, q.device)
    if total_q == 0:
        return out, lse
    bd = block_d(head_dim)
    if interpreting():
        tile = configs.INTERPRETER_TILE
    else:
        tile = configs.default_tile("fwd_paged", bd, varlen.max_seqlen_q, q.element_size(), rows=varlen.max_seqlen_q)
    cu_q = varlen.cu_seqlens_q
    cu_blocks = _cached_map(cu_q, ("blocks", tile.block_m), lambda: _cu_blocks(cu_q, tile.block_m))
    # an upper bound of the programs a head needs: sum over sequences of ceil(len / BLOCK_M)
    grid = (nheads, triton.cdiv(total_q, tile.block_m) + batch)
    use_tma = (PAGED_KV_TMA and page_size >= tile.block_n and _tma_ready(k_cache) and _tma_ready(v_cache))
    if use_tma:
        k_desc, v_desc = _kv_descriptor(k_cache, tile.block_n, bd), _kv_descriptor(v_cache, tile.block_n, bd)
    else:
        k_desc, v_desc = k_cache, v_cache  # unused
    stride_ab, stride_ah = _alibi_strides(alibi)
    # (the paged op returns flash-attn's lse: the kernel moves an anchored one back itself)
    sc = _common_scalars(params, alibi, alibi_anchor.needed(0, 0, params.window_right, True))
    for name in ("dropout_p", "HAS_DROPOUT"):   # (no dropout here: flashtriton.paged refuses it)
        sc.pop(name)
    plans.launch(
        attn_fwd_paged_kernel, grid,
        q, k_cache, v_cache, out, lse, cu_q, varlen.cu_seqlens_k, cu_blocks, block_table,
        alibi if alibi is not None else lse, k_desc, v_desc,
        q.stride(0), q.stride(1),
        k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        v_cache.stride(0), v_cache.stride(1), v_cache.stride(2),
        out.stride(0), out.stride(1),
        lse.stride(0), block_table.stride(0), stride_ab, stride_ah,
        nheads, nheads // nheads_k, batch,
        HEAD_DIM=head_dim, BLOCK_D=bd, BLOCK_M=tile.block_m, BLOCK_N=tile.block_n,
        PAGE_SIZE=page_size, KV_TMA=use_tma,
        PAGE_GATHER=0 if use_tma else page_gather_kind(page_size, tile.block_n, k_cache, v_cache),
        DOT_PRECISION=_dot_precision(q.dtype, varlen.max_seqlen_q, "fwd_paged"),
        QK_LEVELS=qk_levels(q.dtype, bd, varlen.max_seqlen_q),
        num_warps=tile.num_warps, num_stages=tile.num_stages,
        **reg_options("fwd_paged", q.dtype, bd, varlen.max_seqlen_q), **sc)
    return out, lse
