"""The prefill backward's launchers: bwd (launch plans, then _bwd: the delta
preprocess, then bwd.py's dK/dV and dQ kernels, the warp-specialized bwd_ws.py /
bwd_ws_varlen.py, or the split of the two, as launchers/policy.py rules; with
BWD_FUSED_DELTA, bwd.py's dQ kernel computes delta itself and runs first) and the dK/dV
kernel's tile layout (DKDV_QUERY_ROWS, dkdv_key_rows). Tensor layouts: see
launchers/prefill.py."""
from __future__ import annotations

from dataclasses import replace
from functools import partial

import torch
import triton

from .. import alibi_anchor, memory
from . import backward_gluon, backward_gluon_d256, backward_gluon_varlen, dense_varlen, forward, plans
from ..kernels import configs
from ..kernels.bwd import attn_bwd_dkdv_kernel, attn_bwd_dq_kernel, bwd_preprocess_kernel
from ..kernels.bwd_ws import attn_bwd_dkdv_ws_kernel, attn_bwd_dq_ws_kernel
from ..kernels.bwd_ws_varlen import attn_bwd_dkdv_ws_varlen_kernel, attn_bwd_dq_ws_varlen_kernel
from .common import (LOG2E, AttnParams, Varlen, _alibi_strides, _cached_map, _common_scalars, _cu_blocks,
                     _descriptor_ready, _dims4, _dot_precision, _dropout_keys, qk_levels, _effective_window,
                     _ensure_allocator, _flat_rows, _host_descriptor, _tile, _unit_stride_varlen, _ws_varlen_maps,
                     block_d, host_descriptors, interpreting, reg_options, sm_count)
from .policy import BWD_WARP_SPEC_TILES as _BWD_WS_TILES
from .policy import (_bwd_ws_tiles, _warp_spec_forced, gluon_bwd_d256, gluon_bwd_d256_split,
                     gluon_bwd_d256_split_band, gluon_bwd_d256_split_tile, gluon_bwd_fused, gluon_bwd_fused_varlen,
                     gluon_kind, warp_spec_mode, warp_spec_varlen)

def bwd(dout, q, k, v, out, lse, params: AttnParams, alibi=None, rng=None, varlen: Varlen | None = None):
    """Returns (dq, dk, dv) shaped like q, k, v. Bitwise deterministic when
    params.deterministic (flash-attn's deterministic=True, or
    torch.use_deterministic_algorithms); without it, calls that policy.gluon_bwd_fused
    (D = 64 / 128) or policy.gluon_bwd_d256 (D = 256) accept take a fused Gluon kernel, whose
    dq is reduce-added in fp32 in whatever order the key blocks reach L2 (its last bits vary
    run to run; dk and dv stay bitwise).
    A dense call seen before replays its launch plan (launchers/plans.py)."""
    if varlen is not None:
        # a packed batch: the fused Gluon VARLEN route replays a launch plan keyed on its SCHED table as an
        # input (the table holds all the launches read of cu_seqlens); every other varlen route runs as is
        varlen = _unit_stride_varlen(varlen)
        grads = _fused_varlen_route(dout, q, k, v, out, lse, params, alibi, rng, varlen)
        return grads if grads is not None else _bwd(dout, q, k, v, out, lse, params, alibi, rng, varlen)
    # a ragged dense call on the same fused VARLEN route, as B equal sequences (launchers/dense_varlen.py)
    grads = dense_varlen.bwd(dout, q, k, v, out, lse, params, alibi, rng, _fused_varlen_route)
    if grads is not None:
        return grads
    inputs = (dout, q, k, v, out, lse, alibi, rng)
    key = plans.plan_key("bwd", inputs, params)
    return plans.run(key, inputs, lambda: _bwd(dout, q, k, v, out, lse, params, alibi, rng, varlen))


def _fused_varlen_route(dout, q, k, v, out, lse, params: AttnParams, alibi, rng, varlen: Varlen):
    """A packed call's fused Gluon VARLEN backward through its launch plan (dq, dk, dv), or None where
    policy.gluon_bwd_fused_varlen declines it. varlen unit-stride."""
    # (an incoming gradient that TMA cannot read, such as out.sum()'s expanded ones, copied once here, before
    # the plan: the copy is the plan's input, not a step it would have to replay)
    dout = _descriptor_ready(dout)
    table = _fused_varlen_table(dout, q, k, v, lse, params, alibi, varlen)
    if table is None:
        return None
    # (rng: a dropout call's (seed, offset) tensor, which the plan's key-table launch reads; None otherwise)
    inputs = (dout, q, k, v, out, lse, table, rng)
    key = varlen_plan_key(inputs, params, varlen)
    return plans.run(key, inputs, lambda: _bwd(dout, q, k, v, out, lse, params, alibi, rng, varlen, table))


def varlen_plan_key(inputs, params: AttnParams, varlen: Varlen):
    """The fused VARLEN route's plan key: the inputs' signature (the SCHED table among them), params, and the window
    in effect (params through _effective_window over the batch's max_seqlen). Without the last, two calls of the
    same shapes whose max_seqlen puts a window past every sequence in one (a causal call) and not in the other
    would share a plan (session 50's review; tests/test_bwd_gluon_varlen.py::test_regression_varlen_plan_key_
    holds_the_effective_window). The kernel's arguments depend on nothing else of cu_seqlens: the window's
    unbounded side is total_q + total_k (backward_gluon_varlen.varlen_window)."""
    eff = _effective_window(params, varlen.max_seqlen_q, varlen.max_seqlen_k)
    return plans.plan_key("bwd_varlen_gluon", inputs, (params, eff.window_left, eff.window_right))


def _fused_varlen_table(dout, q, k, v, lse, params: AttnParams, alibi, varlen: Varlen):
    """The SCHED table of the fused Gluon VARLEN backward (backward_gluon_varlen.fused_varlen_table) where
    policy.gluon_bwd_fused_varlen routes the packed call, else None."""
    eff = _effective_window(params, varlen.max_seqlen_q, varlen.max_seqlen_k)
    bd = block_d(q.shape[-1])
    if not gluon_bwd_fused_varlen(q, k, v, dout, lse, eff, alibi, bd, varlen):
        return None
    batch = varlen.cu_seqlens_q.numel() - 1
    n_slots = backward_gluon_varlen.varlen_slots(k.shape[0], batch)
    window = _varlen_window(eff, q.shape[0], k.shape[0])
    return backward_gluon_varlen.fused_varlen_table(varlen, eff.window_right == 0 and window is None, n_slots,
                                                    backward_gluon_varlen.VARLEN_ORDER, window)


def _varlen_window(params: AttnParams, total_q: int, total_k: int):
    """The fused VARLEN backward's (win_left, win_right) for a call whose effective window (params through
    _effective_window) is neither none nor the canonical causal one, else None."""
    if gluon_kind(params) != "window":
        return None
    return backward_gluon_varlen.varlen_window((params.window_left, params.window_right), total_q, total_k)


def _bwd(dout, q, k, v, out, lse, params: AttnParams, alibi=None, rng=None, varlen: Varlen | None = None,
         table=None):
    """table: the fused Gluon VARLEN route's SCHED (bwd decided the route), else None."""
    varlen = _unit_stride_varlen(varlen)
    is_varlen = varlen is not None
    dout, q, k, v = (_descriptor_ready(t) for t in (dout, q, k, v))
    if is_varlen:
        total_q, nheads, head_dim = q.shape
        total_k, nheads_k = k.shape[0], k.shape[1]
        batch = varlen.cu_seqlens_q.numel() - 1
        seqlen_q, seqlen_k = varlen.max_seqlen_q, varlen.max_seqlen_k
        stride_lb, stride_lh = 0, lse.stride(0)
        rng_rows, rng_stride = total_q, max(seqlen_k, 1)
    else:
        batch, seqlen_q, nheads, head_dim = q.shape
        seqlen_k, nheads_k = k.shape[1], k.shape[2]
        total_q, total_k = batch * seqlen_q, batch * seqlen_k
        stride_lb, stride_lh = lse.stride(0), lse.stride(1)
        rng_rows, rng_stride = total_q, seqlen_k
    if qk_levels(q.dtype, block_d(head_dim), seqlen_q):
        # One-row fp32: the kernels read the lse in log2 units at QK_LEVELS > 0 (bwd.py's _dkdv_tile and dQ
        # kernel), recomputed by the forward (forward.lse_log2), laid out as the saved one
        lse = forward.lse_log2(q, k, v, params, alibi, rng, varlen)
        stride_lb, stride_lh = (0, lse.stride(0)) if is_varlen else (lse.stride(0), lse.stride(1))
    params = _effective_window(params, seqlen_q, seqlen_k)
    group = nheads // nheads_k
    bd = block_d(head_dim)
    if not interpreting():
        _ensure_allocator()
    dq = memory.empty(q.shape, q.dtype, q.device)
    dk = memory.empty(k.shape, k.dtype, k.device)
    dv = memory.empty(v.shape, v.dtype, v.device)
    delta = memory.empty(lse.shape, torch.float32, q.device)
    stride_ab, stride_ah = _alibi_strides(alibi)
    dummy = lse
    alibi_arg = alibi if alibi is not None else dummy
    rng_arg = _dropout_keys(rng, nheads, rng_rows, rng_stride) if params.dropout_p > 0 else dummy
    cu_q = varlen.cu_seqlens_q if is_varlen else dummy
    cu_k = varlen.cu_seqlens_k if is_varlen else dummy
    # (the preprocess reads rows without cu_seqlens, IS_VARLEN=False: its unused pointer is the dummy, so that a
    # plan of the fused VARLEN route can place every argument)
    scalars = _common_scalars(params, alibi, alibi_anchor.needed(seqlen_q, seqlen_k, params.window_right, is_varlen))
    common = dict(rng_rows=rng_rows, rng_stride=rng_stride,
                  n_bucket=configs.seqlen_bucket(max(seqlen_q, seqlen_k)),
                  HEAD_DIM=head_dim, BLOCK_D=bd, IS_VARLEN=is_varlen,
                  DOT_PRECISION=_dot_precision(q.dtype, seqlen_q), **scalars)   # (both kernels: kernel None)

    def preprocess(dq_accum=None):
        """delta; dq_accum (the fused route's fp32 accumulator, dense calls): zeroed by the
        same launch (bwd_preprocess_kernel's DQ_ACCUM, backward_gluon._run_fused)."""
        pre_block = 64
        # delta is one value per query row: a varlen batch is one packed run of total_q rows
        # here, so no program is spent on padding up to max_seqlen_q.
        pre_batch, pre_rows = (1, total_q) if is_varlen else (batch, seqlen_q)
        plans.launch(bwd_preprocess_kernel, (pre_batch * nheads, triton.cdiv(pre_rows, pre_block)),
            out, dout, delta, dummy, *_dims4(out, is_varlen), *_dims4(dout, is_varlen),
            stride_lb, stride_lh, nheads, pre_rows,
            HEAD_DIM=head_dim, BLOCK_D=bd, BLOCK_M=pre_block, IS_VARLEN=False,
            **(dict(DQ_ACCUM=dq_accum) if dq_accum is not None else {}))

    if table is not None:
        # (a packed batch: the fused Gluon kernel's VARLEN variant, plain or the canonical causal mask; the
        # preprocess runs first, inside fused_varlen_into)
        window = _varlen_window(params, total_q, total_k)
        # (with dropout, session 51: the key table rng_arg, rng_rows = total_q and rng_stride = max_seqlen_k, the
        # packed forwards' layout)
        backward_gluon_varlen.fused_varlen_into(q, k, v, dout, lse, delta, params.softmax_scale,
                                                params.window_right == 0 and window is None, dq, dk, dv, varlen,
                                                table, preprocess=preprocess, window=window,
                                                dropout_p=params.dropout_p,
                                                keys=rng_arg if params.dropout_p > 0 else None)
        return dq, dk, dv

    if gluon_bwd_fused(q, k, v, dout, lse, params, alibi, is_varlen, bd, seqlen_q, seqlen_k):
        # (the preprocess runs inside fused_into, first: with
        # backward_gluon.FUSED_DQ_ZERO_IN_PREPROCESS it zeroes the dq accumulator as well)
        # (with dropout only for policy.GLUON_BWD_FUSED_DROPOUT's head dims: the key table rng_arg, whose
        # rng_rows = total_q = B * Nq and rng_stride = Nk are the dense layout the kernel reads)
        # (a window other than the canonical causal one: the kernel's WINDOW variant, routed by
        # policy.GLUON_BWD_FUSED_MIN_N["window"])
        windowed = params.window_left >= 0 or params.window_right > 0
        backward_gluon.fused_into(q, k, v, dout, lse, delta, params.softmax_scale, params.window_right == 0,
                                  dq, dk, dv, dropout_p=params.dropout_p,
                                  keys=rng_arg if params.dropout_p > 0 else None,
                                  window=(params.window_left, params.window_right) if windowed else None,
                                  preprocess=preprocess)
        return dq, dk, dv

    if gluon_bwd_d256(q, k, v, dout, lse, params, alibi, is_varlen, bd, seqlen_q, seqlen_k):
        # (D = 256: the fused Gluon kernel of kernels/bwd_gluon_d256.py, plain or canonical causal;
        # the preprocess writes delta first, inside bwd_into)
        # (split_dq: policy.GLUON_BWD_D256_SPLIT_DQ, the dQ kernel's tiles GLUON_BWD_D256_SPLIT_DQ_TILE and
        # launch order GLUON_BWD_D256_SPLIT_DQ_BAND;
        # deterministic=True calls reach here only on the split path)
        split = gluon_bwd_d256_split(params, seqlen_q)
        backward_gluon_d256.bwd_into(q, k, v, dout, lse, delta, params.softmax_scale, params.window_right == 0,
                                     dq, dk, dv, preprocess=preprocess,
                                     **(dict(split_dq=True, dq_tile=gluon_bwd_d256_split_tile(params),
                                             dq_band=gluon_bwd_d256_split_band(params, batch * nheads))
                                        if split else {}))
        return dq, dk, dv

    if (is_varlen and warp_spec_varlen(q, params, alibi, bd, "bwd") and min(total_q, total_k) > 0
            and head_dim == bd and q.stride(1) == bd and dout.stride(1) == bd
            and _varlen_ws_loop_ok(bd, nheads // nheads_k, seqlen_q)):
        preprocess()
        _bwd_warp_spec_varlen(q, k, v, dout, lse, delta, dq, dk, dv, params, varlen, bd)
        return dq, dk, dv

    def program_map(cu, total, block, heads, seqlen, rows_first=False):
        """(cu_blocks, grid) of a kernel whose programs each own `block` rows of one head:
        dense calls a (B * heads, blocks) grid, or with rows_first (the kernels' ROWS_FIRST)
        one of B * heads * blocks, a head's blocks consecutive; varlen calls (heads, blocks
        of all sequences + B), programs mapped to (sequence, block) through cu_blocks (no
        padding programs)."""
        if not is_varlen:
            if rows_first:
                return dummy, (batch * heads * triton.cdiv(seqlen, block),)
            return dummy, (batch * heads, triton.cdiv(seqlen, block))
        cu_blocks = _cached_map(cu, ("blocks", block), lambda: _cu_blocks(cu, block))
        return cu_blocks, (heads, triton.cdiv(total, block) + batch)

    # (a window edge of either side, causal included: bwd.py's masked loops run; BWD_MASKED_ONE_LOOP)
    masked = params.window_left >= 0 or params.window_right >= 0

    def launch_dkdv(tile: configs.Tile, resume: bool = False, bulk_n: int = 0):
        rows_first = bwd_rows_first(bd, is_varlen, resume, seqlen_q, seqlen_k)
        cu_blocks, grid = program_map(cu_k, total_k, tile.block_n, nheads_k, seqlen_k, rows_first)
        descs = (dummy,) * 6
        use_host_desc = dense_desc and host_descriptors("dkdv", bd, params.window_right == 0, n)
        if use_host_desc:
            bm, bn = tile.block_m, tile.block_n
            descs = (_host_descriptor(q, bm, bd), _host_descriptor(k, bn, bd), _host_descriptor(v, bn, bd),
                     _host_descriptor(dout, bm, bd), _host_descriptor(dk, bn, bd), _host_descriptor(dv, bn, bd))
        plans.launch(attn_bwd_dkdv_kernel, grid,
            q, k, v, dout, lse, delta, dk, dv, cu_q, cu_k, cu_blocks, alibi_arg, rng_arg, *descs,
            *_dims4(q, is_varlen), *_dims4(k, is_varlen), *_dims4(v, is_varlen), *_dims4(dout, is_varlen),
            *_dims4(dk, is_varlen), *_dims4(dv, is_varlen),
            stride_lb, stride_lh, stride_ab, stride_ah,
            nheads_k, group, batch, seqlen_q, seqlen_k, params.softmax_scale,
            BLOCK_M=tile.block_m, BLOCK_N=tile.block_n, HOST_DESC=use_host_desc, RESUME=resume,
            KEY_ROWS=dkdv_key_rows(bd, q.dtype, resume, tile.block_m), QK_LEVELS=qk_levels(q.dtype, bd, seqlen_q),
            num_warps=tile.num_warps, num_stages=tile.num_stages, **common,
            **reg_options("dkdv", q.dtype, bd, seqlen_q),
            **(dict(BULK_N=bulk_n) if bulk_n and bulk_n != tile.block_n else {}),
            **(dict(ONE_LOOP=True) if bwd_one_loop("dkdv", bd, masked, resume, seqlen_q, seqlen_k) else {}),
            **(dict(ROWS_FIRST=True) if rows_first else {}))

    def launch_dq(tile: configs.Tile, resume: bool = False, bulk_m: int = 0, fused: bool = False):
        rows_first = bwd_rows_first(bd, is_varlen, resume, seqlen_q, seqlen_k)
        cu_blocks, grid = program_map(cu_q, total_q, tile.block_m, nheads, seqlen_q, rows_first)
        descs = (dummy,) * 5
        use_host_desc = dense_desc and host_descriptors("dq", bd, params.window_right == 0, n)
        if use_host_desc:
            bm, bn = tile.block_m, tile.block_n
            descs = (_host_descriptor(q, bm, bd), _host_descriptor(k, bn, bd), _host_descriptor(v, bn, bd),
                     _host_descriptor(dout, bm, bd), _host_descriptor(dq, bm, bd))
        plans.launch(attn_bwd_dq_kernel, grid,
            q, k, v, dout, lse, delta, dq, out if fused else None, cu_q, cu_k, cu_blocks, alibi_arg, rng_arg, *descs,
            *_dims4(q, is_varlen), *_dims4(k, is_varlen), *_dims4(v, is_varlen), *_dims4(dout, is_varlen),
            *_dims4(dq, is_varlen),
            stride_lb, stride_lh, stride_ab, stride_ah,
            nheads, group, batch, seqlen_q, seqlen_k, params.softmax_scale,
            BLOCK_M=tile.block_m, BLOCK_N=tile.block_n, HOST_DESC=use_host_desc, RESUME=resume,
            QK_LEVELS=qk_levels(q.dtype, bd, seqlen_q),
            num_warps=tile.num_warps, num_stages=tile.num_stages, **common, **reg_options("dq", q.dtype, bd, seqlen_q),
            **(dict(BULK_M=bulk_m) if bulk_m and bulk_m != tile.block_m else {}),
            **(dict(ONE_LOOP=True) if bwd_one_loop("dq", bd, masked, resume, seqlen_q, seqlen_k) else {}),
            **(dict(FUSED_DELTA=True) if fused else {}),
            **(dict(ROWS_FIRST=True) if rows_first else {}))

    # (descriptor shapes must be positive: empty sequences keep the in-kernel path)
    dense_desc = not is_varlen and min(seqlen_q, seqlen_k) > 0
    n = max(seqlen_q, seqlen_k)
    mode = (warp_spec_mode(q, params, alibi, is_varlen, bd, seqlen_q, seqlen_k, kernel="bwd", dout=dout,
                           bwd_persistent=lambda masked: _ws_persistent_call(q, k, v, dout, bd, params, masked))
            if lse.is_contiguous() else None)
    # bwd.py alone: its dQ kernel may compute delta itself (BWD_FUSED_DELTA), and then runs first
    fused = mode is None and bd in BWD_FUSED_DELTA and out.stride() == dout.stride()
    ws_keys = rng_arg if params.dropout_p > 0 else None       # bwd_ws.py's key table (or none)
    if not fused:
        preprocess()
    if mode == "whole":
        _bwd_warp_spec(q, k, v, dout, lse, delta, dq, dk, dv, params, bd, ws_keys, rng_rows)
    elif mode == "split":
        # the warp-specialized kernels do the fully visible tiles and leave partial gradients
        # in dq, dk, dv (softmax_scale not applied; dropout's 1 / (1 - p) applied); bwd.py's
        # kernels resume from them with the masked rest, on the same BLOCK_M / BLOCK_N (two
        # launches more: as the forward's split path)
        dkdv_tile, dq_tile, bulk_n, bulk_m = _resume_tiles(bd)     # (checked before any launch)
        _bwd_warp_spec(q, k, v, dout, lse, delta, dq, dk, dv, params, bd, ws_keys, rng_rows, partial=True)
        launch_dkdv(dkdv_tile, resume=True, bulk_n=bulk_n)
        launch_dq(dq_tile, resume=True, bulk_m=bulk_m)
    elif fused:
        launch_dq(_tile("dq", bd, q, params, n, varlen, partial(launch_dq, fused=True), rows=seqlen_q),
                  fused=True)
        launch_dkdv(_tile("dkdv", bd, q, params, n, varlen, launch_dkdv, rows=seqlen_q))
    else:
        launch_dkdv(_tile("dkdv", bd, q, params, n, varlen, launch_dkdv, rows=seqlen_q))
        launch_dq(_tile("dq", bd, q, params, n, varlen, launch_dq, rows=seqlen_q))
    return dq, dk, dv


# BLOCK_D at which bwd.py's backward (the calls the warp-specialized kernels do not take)
# folds the delta preprocess into its dQ kernel (FUSED_DELTA: delta from the dQ program's
# own dO tile and one O tile, written for the dK/dV kernel, which then runs after dQ;
# only where out and dout have the same strides). Why: the preprocess reads O and dO
# whole, ~35 us a backward on the H200 at every length of the grid (16k tokens x hidden
# 2048), 4-6% of a causal backward at N = 512-1k (s20/call7 profile); fused, O is read
# once and dO not again. H200, 2026-11-30 (bench/gpu/s21_fused_delta_ab.py, s21/call1;
# backward us, two rounds, preprocess -> fused; gradients bitwise equal): D = 128 causal
# 512 644 / 641 -> 639 / 633, D = 64 causal 1k 960 / 950 -> 934 / 927, 2k 1488 / 1541 ->
# 1502 / 1513, D = 256 512 1050 / 1053 -> 1033 / 1036, causal 1k 1156 / 1155 -> 1133 /
# 1137, 4k 4978 / 4988 -> 4974 / 4986, window (1024, 0) at 16k 1295 / 1293 -> 1273 / 1269.
# 5-25 us a backward, less than the preprocess's 35 us (predicted 25-35).
# (The autotuner's cache does not tell the fused dQ kernel from the other: one tile.)
BWD_FUSED_DELTA: set = {64, 128, 256}


# bwd.py's dense dK/dV and dQ grids, rows first (the kernels' ROWS_FIRST): BLOCK_D -> the
# longest max(Nq, Nk) at which both launch as one 1-D grid whose consecutive programs are
# the blocks of one (batch, head), instead of (B * H, blocks), whose consecutive programs
# are the same block of different heads. The forward's FWD_ROWS_FIRST, never applied to the
# backward until session 28. Why (offline, 2026-12-01): at D = 256, N = 512, 16k tokens,
# H = 8 (B * H = 256 heads), the dK/dV kernel's short tile (64, 32, 4, 2) gives 4096
# programs, two an SM (103 KB of shared memory, 255 registers, 128 threads: sm_90a,
# bench/d256_bwd_compile.py), so the 264 in flight are ~1 a head, and each reads its
# head's whole Q and dO (512 x 256 x 2 x 2 B = 512 KB); the next program of that head comes
# 256 programs later, after ~134 MB of other heads' Q / dO went through the 50 MB L2: every
# read misses. 4096 x 512 KB = 2.1 GB of DRAM reads in the 738 us the kernel took (s23
# profile): ~2.9 TB/s, plus K, V, dK, dV ~0.4 GB: ~3.3 TB/s, 0.77x the card's copy rate.
# Rows first, the 16 programs of a head run side by side and read its Q / dO once (~134
# MB). Likewise dQ (128, 32, 8, 3): 1024 programs, K / V 512 KB each, 289 us: ~2.6 TB/s.
# At 1k (B = 16): dK/dV 4096 programs x 1 MB, ~2 of a head in flight: ~1.8 TB/s; at 2k the
# (128, 64, 8, 1) tile's 2048 programs ~1.1 TB/s (not memory-bound there).
# Measured (session 28, H200, bf16, kernel-only graphs, two rounds, bench/gpu/
# s28_d256_bwd_ab.py, s28/call5; bench/NOTES.md): backward TFLOP/s plain 2-D -> rows
# first 166 -> 202 at 512, 200 -> 249 at 1k, 231 -> 264 at 2k, 271 -> 281 at 4k; causal
# 107 -> 123, 152 -> 169, 212 -> 223, 261 -> 268. Each program computes exactly what it
# did on the 2-D grid (gradients bitwise equal: tests/test_bwd_rows_first.py). Dense calls
# only (varlen grids map sequences through cu_blocks), never the split path's resumed
# launches.
BWD_ROWS_FIRST: dict = {256: 4096}


def bwd_rows_first(bd: int, is_varlen: bool, resume: bool, seqlen_q: int, seqlen_k: int) -> bool:
    """Whether bwd.py's dK/dV and dQ launches of this call take the rows-first grid
    (BWD_ROWS_FIRST): dense, not resumed, both lengths positive and max(Nq, Nk) within the
    BLOCK_D's entry."""
    return (not is_varlen and not resume and min(seqlen_q, seqlen_k) > 0
            and max(seqlen_q, seqlen_k) <= BWD_ROWS_FIRST.get(bd, 0))


# The split path's resumed tiles (bwd.py, RESUME). A resumed dK/dV tile keeps the bulk's
# BLOCK_M and may split its key block (BLOCK_N a divisor of the bulk's); a resumed dQ tile
# keeps BLOCK_N and may split the query block. RESUME_TILES: explicit tiles per BLOCK_D,
# (dK/dV tile, dQ tile) (the tuner's and the tests' knob). Absent there, a BLOCK_D in
# RESUME_HALVED halves the bulk's split side (4 warps, 2 stages), the others keep the
# bulk's tiles with 8 warps (dQ: 3 stages), as does the interpreter.
# Why halved: the resumed launches are ~9% of a causal D = 128 backward at 16k (profile,
# s19/call4-7: 387 + 230 of 6752 us) for ~3% of its tiles; on the bulk's tiles a program
# does one or two diagonal tiles at one program an SM (8 warps, 64 x 128 / 128 x 64; the
# dK/dV one spilled 2332 bytes a thread, bench/resume_compile.py), its loads and latency
# not hidden. Halved, with query rows (RESUME_QUERY_ROWS), 3 of the 4 quarter tiles are
# done (the fourth lies above the diagonal), several programs an SM. H200, 2026-11-30
# (bench/gpu/s20_resume_tiles_ab.py, s20/call1; causal backward TFLOP/s, two rounds,
# bulk tiles -> halved with query rows): D = 128 2k 262 / 262 -> 283 / 287, 4k 336 / 335
# -> 331 / 351, 8k 354 / 337 -> 355 / 355, 16k 404 / 401 -> 408 / 384; D = 64 8k
# 311 / 311 -> 320 / 318, 16k 301 / 342 -> 354 / 328. Halved in key rows was in between;
# a 64 x 32 dK/dV tile slower. Window (1024, 0) at 16k: the split still loses to bwd.py
# (1.55 against 1.29 ms), so the policy keeps bwd.py there. The grid (s20/call2) then
# had D = 128 causal 2k-8k at 280 / 346 / 358 (was 261 / 339 / 354) but D = 64 2k / 4k
# at 218 / 262 (was 232 / 269), but those two take bwd.py, not the split: noise. D = 64
# again (s20_split_short_ab.py, call 3; the split forced, bulk -> halved): 8k 309 / 265 ->
# 320 / 320, 16k 336 / 328 -> 348 / 339, 4k 265 / 264 -> 286 / 279 (key rows: 314 / 316,
# 348 / 349, 283 / 275).
RESUME_TILES: dict = {}
RESUME_HALVED: set = {64, 128}
# BLOCK_D at which the resumed launches run their tiles in one loop, masked throughout
# (bwd.py's ONE_LOOP) instead of up to four loops of one or two iterations each. Why:
# at causal D = 128, N = 1k the resumed launches took 424 of a backward's 860 us for ~18%
# of its work (s20/call7 profile): each tile waits out its loads, which one loop lets the
# pipeliner overlap. H200, 2026-11-30 (bench/gpu/s21_one_loop_ab.py, s21/call1; causal
# backward TFLOP/s, two rounds, four loops -> one loop): D = 128 1k 198 / 199 -> 206 / 207,
# 2k 287 / 285 -> 290 / 294, 4k 346 / 351 -> 340 / 347, 16k 409 / 408 -> 409 / 411; D = 64
# 4k 289 / 286 -> 294 / 294, 8k 321 / 323 -> 328 / 328. Profile at D = 128 1k: resumed
# dK/dV 283 -> 259 us, dQ 137 -> 125 (-8.5%; predicted -30-50%: missed). Not bitwise the
# four loops' on sm_90 (one compiled body for masked and unmasked tiles: the compiler's
# instruction choices around the mask differ from the unmasked loops'), but within the
# reference check; bitwise under the interpreter.
RESUME_ONE_LOOP: set = {64, 128}


# bwd.py's own dK/dV and dQ launches (not the split path's resumed ones) of masked calls
# (causal or any window edge): (kernel "dkdv" or "dq", BLOCK_D) -> the longest max(Nq, Nk)
# at which each program runs its tiles in one loop, the mask applied to every tile (the
# kernels' ONE_LOOP without RESUME), instead of a masked loop, a fully visible loop and a
# masked loop. Why (offline, session 29, sm_90a, bench/d256_causal_bwd_compile.py): at
# D = 256, N = 512 / 1k, 16k tokens, H = 8, a causal dK/dV program on the short tile (64,
# 32, 4, 2) does 1 masked tile, then 0-15 fully visible ones (4.5 on average at 512: 72
# tiles a head against 128 non-causal), so its masked tile is a loop of one iteration whose
# Q / dO loads nothing overlaps, and the next loop's pipeline starts cold; a dQ program
# ((128, 32, 8, 3), one an SM) does 4i fully visible key tiles then 4 masked ones: two
# pipeline fills a program. One loop: one fill, and one compiled loop body instead of three
# (dK/dV SASS 7943 -> 4375 instructions, spill 1596 -> 832 bytes a thread; dQ 11191 -> 10007,
# no spill). The price: the mask on every tile, dK/dV's loop body 620 -> 687 instructions
# (+11%), dQ's 255 -> 337 (+32%; its fully visible tiles may lose more than the fill saves
# from 1k, hence a key per kernel). Bitwise the three loops' under the interpreter; on sm_90
# the compiled body differs (as RESUME_ONE_LOOP's did: within the reference check).
# Measured (H200, 2026-12-01, bf16, causal, 16k tokens, H = 8, kernel-only graph replays,
# two rounds; bench/gpu/s29_d256_causal_bwd_ab.py, s29/call2), backward us three loops ->
# dK/dV one loop / dQ one loop / both (FA2 in the same run): 512 698 / 699 -> 650 / 689 /
# 639 (607), 1k 1006 / 1007 -> 954 / 1002 / 949 (952), 2k (both) 1553 / 1563 -> 1618 / 1614
# (1637). Profile at 512: dK/dV 469 -> 422 us, dQ 236 -> 229. Predicted -10 to -25 us at
# 512: -59 us. Taken to 1k for both kernels.
BWD_MASKED_ONE_LOOP: dict = {("dkdv", 256): 1024, ("dq", 256): 1024}


def bwd_one_loop(kernel: str, bd: int, masked: bool, resume: bool, seqlen_q: int, seqlen_k: int) -> bool:
    """ONE_LOOP of a bwd.py launch of `kernel` ("dkdv" or "dq"): resumed launches (the split
    path) as RESUME_ONE_LOOP rules; bwd.py's own launches of masked calls (causal or a window
    edge) where max(Nq, Nk) is within the (kernel, BLOCK_D) entry of BWD_MASKED_ONE_LOOP."""
    if resume:
        return bd in RESUME_ONE_LOOP
    return masked and max(seqlen_q, seqlen_k) <= BWD_MASKED_ONE_LOOP.get((kernel, bd), 0)


def _resume_tiles(bd: int):
    """(dK/dV tile, dQ tile, the bulk's dK/dV BLOCK_N, the bulk's dQ BLOCK_M) of the split
    path's resumed launches (RESUME_TILES, checked against the bulk's tiles)."""
    ws_dkdv, ws_dq = _bwd_ws_tiles(bd)
    if interpreting():
        default = (ws_dkdv, ws_dq)
    elif bd in RESUME_HALVED:
        default = (replace(ws_dkdv, block_n=ws_dkdv.block_n // 2, num_warps=4, num_stages=2),
                   replace(ws_dq, block_m=ws_dq.block_m // 2, num_warps=4, num_stages=2))
    else:
        default = (replace(ws_dkdv, num_warps=8), replace(ws_dq, num_warps=8, num_stages=3))
    dkdv, dq = RESUME_TILES.get(bd, default)
    if dkdv.block_m != ws_dkdv.block_m or ws_dkdv.block_n % dkdv.block_n:
        raise ValueError(f"RESUME_TILES[{bd}]: the dK/dV tile {dkdv} must keep BLOCK_M {ws_dkdv.block_m} and "
                         f"divide BLOCK_N {ws_dkdv.block_n}")
    if dq.block_n != ws_dq.block_n or ws_dq.block_m % dq.block_m:
        raise ValueError(f"RESUME_TILES[{bd}]: the dQ tile {dq} must keep BLOCK_N {ws_dq.block_n} and "
                         f"divide BLOCK_M {ws_dq.block_m}")
    return dkdv, dq, ws_dkdv.block_n, ws_dq.block_m


# BLOCK_D at which bwd.py's dK/dV kernel computes its tiles as query rows x key columns
# (KEY_ROWS=False: S = Q K^T and dP = dO V^T read K and V from shared memory, where the
# key-rows layout holds them in registers as A operands, one copy per warpgroup). H200,
# 2026-11-30 (bench/gpu/s11_dkdv_ab.py, backward ms, key rows -> query rows): D = 256
# N = 8k 10.47 -> 9.67 (with the (128, 64, 8, 1) tile), causal 6.20 -> 4.70; D = 128
# window (1024, 0) 1.404 -> 1.297, causal 2k 1.371 -> 1.348 (same (64, 64, 4, 2) tile).
# D = 64: masked calls' (64, 64, 4, 3) tile, +4-10% (configs "dkdv_masked"); its unmasked
# tile has 32 query rows (a wgmma needs 64), so those keep key rows (dkdv_key_rows). The
# split path's resumed dK/dV: RESUME_QUERY_ROWS below (on the bulk's tiles, query rows
# measured level at D = 64 and slower at D = 128: bench/gpu/s14_resume_rows_ab.py).
DKDV_QUERY_ROWS: set = {64, 128, 256}
# BLOCK_D at which the split path's resumed dK/dV tiles take the query-rows layout too
# (only where DKDV_QUERY_ROWS has it as well; elsewhere they keep key rows). Offline
# sm_90a, causal D = 128: the resumed 64 x 128 key-rows tile spills 3148 bytes, a 64 x 64
# query-rows one 328 (s14's "slower at D = 128" was the 64 x 128 query-rows tile, 4740
# bytes); timed with RESUME_HALVED above.
RESUME_QUERY_ROWS: set = {64, 128}


def dkdv_key_rows(bd: int, dtype: torch.dtype, resume: bool, block_m: int) -> bool:
    """KEY_ROWS of bwd.py's dK/dV kernel for this call (see DKDV_QUERY_ROWS). The split
    path's resumed tiles (resume) keep key rows unless bd is in RESUME_QUERY_ROWS.
    float32's FMA tiles keep the layout they were sized in; so do tiles of fewer than 64
    query rows (a tuner candidate), whose S = Q K^T would not be a warpgroup wgmma (M <
    64) - except under the interpreter, where speed does not matter and the tests use
    32-row tiles."""
    if (resume and bd not in RESUME_QUERY_ROWS) or dtype == torch.float32 or bd not in DKDV_QUERY_ROWS:
        return True
    return block_m < 64 and not interpreting()


# bwd_ws.py's dQ kernel hands out a head's query blocks heaviest first under a right mask
# (HEAVY_FIRST; its dK/dV kernel already runs the heavy key blocks first, and fwd.py /
# bwd.py order theirs so). H200, 2026-11-30, causal split backward as graph replays, 16k
# tokens, 4 passes (bench/gpu/s14_heavy_first_ab.py; prediction +1-3%): D = 128 N = 16k
# 415 -> 429 TFLOP/s (+3.4%), 4k 316 -> 320 (+1.1%); D = 64 16k 333 -> 340, 8k 285 -> 287;
# results bitwise equal. (fwd_ws.py's masked forward: launchers.forward.WS_HEAVY_FIRST.)
WS_HEAVY_FIRST = True


# bwd_ws.py's kernels as persistent kernels (PERSISTENT): about one program an SM, each
# looping over the call's tiles (dK/dV: key blocks, dQ: query blocks) in snake rounds,
# every descriptor made once over the (B * N, H-span) views (kernels/bwd_ws.py's doc).
# Which launches, as (kernel, BLOCK_D, masked, dropout): kernel "dkdv" or "dq", masked the
# split path's PARTIAL launch (causal, right windows, ragged counts), dropout a launch
# with dropout (the whole call's, or the split's since session 21). H200, bf16, 16k
# tokens, backward TFLOP/s one tile a program -> persistent, bitwise equal
# (bench/gpu/s17_bwd_persistent_ab.py, 2026-11-30, bench/NOTES.md "Session 17"): D = 128
# non-causal 244 -> 337 / 334 -> 389 / 380 -> 422 / 428 -> 433 / 458 -> 444 at N = 512 /
# 1k / 2k / 4k / 16k, causal (split) 311 -> 335 at 4k, 262 at 2k (bwd.py 249); D = 64
# non-causal 159 -> 310 / 229 -> 345 / 291 -> 367 / 331 -> 376 / 365 -> 390, causal 220 ->
# 267 at 4k, 333 -> 340 at 16k; dropout p = 0.1 (D = 128, N = 4k) forward+backward 1.217x
# -> 1.177x the p = 0 time. Masked with dropout at D = 128 (the split path's,
# policy.BWD_SPLIT_DROPOUT_MAX_N; s21_split_dropout_ab.py, causal p = 0.1 backward, one
# tile a program -> persistent): 1k 168 -> 172, 2k 222 -> 246, 4k 270 -> 303 TFLOP/s.
WS_PERSISTENT: set = {(kernel, bd, masked, False) for kernel in ("dkdv", "dq") for bd in (64, 128)
                      for masked in (False, True)} | {(kernel, 128, masked, True) for kernel in ("dkdv", "dq")
                                                      for masked in (False, True)}
# The longest max(Nq, Nk) at which a kind of WS_PERSISTENT runs persistent. D = 128: from
# 16k the persistent launch is 3% slower, and there, with three processes sharing the GPU
# (time-sliced), every persistent call gave NaN gradients (100 of 100; one process alone:
# bitwise right; N = 2k and causal 4k under the same load: 0 of ~1400 each), so a fault
# that grows with a launch's duration (the persistent forward's rare multi-process fault,
# README limitations, may be the same). Not measured between 4k and 16k.
WS_PERSISTENT_MAX_N = {(kernel, 128, masked, dropout): 4096 for kernel in ("dkdv", "dq")
                       for masked in (False, True) for dropout in (False, True)}
# A persistent launch runs min(tiles, SMs) programs (and only with more tiles than SMs);
# WS_PERSISTENT_PROGRAMS, when set, is the count instead (the tests lower it).
WS_PERSISTENT_PROGRAMS = None
# The persistent masked deal (with a right mask and no left edge): head-major snake rounds
# up to this many blocks a head, block-major beyond (every (batch, head)'s heaviest block
# first: dK/dV's first key block, dQ's last query block under WS_HEAVY_FIRST). The
# forward's measured rule (launchers.forward.WS_HEAD_MAJOR_MAX_BLOCKS), not measured here.
WS_HEAD_MAJOR_MAX_BLOCKS = 32
# Buffers for the loads a persistent tile makes once, before its loop (dK/dV: k and v; dQ:
# q and dO): the persistent loop's num_stages (TILE_STAGES). 2: the producer loads the
# next tile's while the consumers finish this one; 1: shared memory as one tile a program.
# sm_90a compile (bench/bwd_ws_compile.py, 2026-11-30), bytes of shared memory with 2 / 1:
# D = 128 dK/dV 230984 / 165432, dQ 232040 / 165464 (the limit: 232448); D = 64 150088 /
# 117304 and 150120 / 116312. With dropout, 2 overflows at D = 128 (dK/dV 232632, dQ
# 233688 bytes). Measured (H200, session 17): 2 is wrong at D = 128, so _tile_stages
# takes 1 from BLOCK_D 128; D = 64 with 2 is right and 1-4% faster than with 1.
WS_PERSISTENT_TILE_STAGES = 2


# The longest dK/dV loop, in query rows (GQA group * Nq), whose 1-D loads (lse, delta,
# dropout's row keys) bwd_ws.py makes through descriptors, per BLOCK_D; beyond, pointer
# loads (VEC_PTR). H200, triton 3.6.0, 2026-11-30 (bench/gpu/s18_long_stress.py, one
# process, D = 128, B * N = 16k, H = 16): with descriptors one tile a program gave NaN
# dk / dv in 68 of 1942 calls at 8k and 102 of 3454 at 16k (whole 128-key blocks), and
# 4 of 3484 with the descriptors made on the host; pointer loads 0 of 3254 and 0 of 2203.
# Clean with descriptors: 4000 (one tile a program, 3456 calls), 2k / 4k persistent
# (~20000 calls), and D = 64 persistent to 16k (2383). Pointer loads cost ~8% (16k: 429
# against 460 TFLOP/s); the 8k / 16k backward ran on bwd.py before (policy's old cap).
WS_DKDV_DESC_MAX_ROWS = {128: 4096}
# BLOCK_D at which every ONE-TILE-A-PROGRAM dK/dV launch (not persistent) reads its loop's
# 1-D vectors by pointers, whatever the loop's length. Bug fix (H200, triton 3.6.0,
# 2026-12-01, bench/gpu/s29_bwd_ws_onetile_probe.py, s29/call3): at D = 64 with
# descriptors, forced one tile a program (16k tokens, H = 32, deterministic), dk / dv had
# NaN in 15 / 22 / 19 / 24 / 19 of 200 calls at N = 1k / 2k / 3k / 4k / 8k; with pointer
# loads 0 of 200 each, and bitwise the persistent launch's (which was clean: 0 of 66 each;
# 3.71 against 3.99 ms a call at 2k, no slower elsewhere). The default route reaches this
# launch where the persistent one does not apply: no more tiles than SMs (clean in the
# probe: 0 of 200 at five such shapes), or tensors the persistent kernels cannot read as
# flat rows (Nq / Nk not tile multiples, strided views) at any size. Session 29's call 1
# failure of test_persistent_backward_repeatable_gpu[64-2048-False] (its one-tile
# reference) was this; regression test test_one_tile_dkdv_d64_pointer_loads(_gpu).
WS_DKDV_ONE_TILE_VEC_PTR: set = {64}
# None: as WS_DKDV_DESC_MAX_ROWS rules; True / False forces (bench/gpu/s18_long_stress.py)
WS_DKDV_VEC_PTR = None
# A dK/dV launch with pointer loads is one tile a program (the form the H200 ran); True
# lets it be persistent as WS_PERSISTENT rules (experiment: bench/gpu/s19_split_persistent_ab.py)
WS_VEC_PTR_PERSISTENT = False
# Which pointer loads (the kernel's VEC_PTR): 1 in the iteration after its first dot, 2
# one iteration ahead (68 bytes of spill at D = 128 one tile a program, offline sm_90a).
# H200, triton 3.6.0, 2026-11-30 (bench/gpu/s19_vec_ptr_ab.py, D = 128, B * N = 16k,
# H = 16, backward TFLOP/s, two rounds each): unmasked 2 wins, 8k 417 / 423 -> 434 / 435,
# 16k 422 / 428 -> 431 / 441, 4k (forced) 402 / 404 -> 417 / 420; causal 2 loses, 8k
# 350 / 351 -> 342 / 344, 16k 402 / 395 -> 389 / 387. Bitwise equal; stressed clean
# (s18_long_stress.py, 40 s a case: 0 NaN in 2249 calls at 16k, 3063 at 8k with dropout
# 0.1, 3796 causal at 16k). None: 2 without a causal / window mask, else 1; 1 / 2 force.
WS_DKDV_VEC_PTR_KIND = None


# Head dims at which the dK/dV kernel does not compile with VEC_PTR = 1, so masked loops take 2
# (slower under a mask at D = 128, bitwise the same). Compiler workaround (Triton 3.6.0, sm_90a,
# 2026-12-01): at D = 64 one tile a program, VEC_PTR = 1 fails in the NVGPUWarpSpecialization pass
# ("PassManager::run failed") with or without a mask, partial, dropout; VEC_PTR = 2 compiles except
# with dropout (policy.BWD_WS_NO_DROPOUT keeps D = 64 dropout off bwd_ws.py). Found by session 30's
# GPU suite: session 29's one-tile pointer loads (WS_DKDV_ONE_TILE_VEC_PTR) had made every ragged
# or masked one-tile D = 64 launch VEC_PTR = 1; offline reproduction bench/bwd_ws_compile.py.
# Regression tests: test_one_tile_dkdv_d64_pointer_loads (masked case), test_dkdv_ws_vector_pointer_loads
# (D = 64 cases), test_dkdv_vec_ptr_kind_rule, test_ws_dkdv_compile_guards.
WS_DKDV_VEC_PTR1_FAILS: set = {64}
# Head dims at which the dK/dV kernel with dropout and pointer loads (any VEC_PTR) does not compile
# (the same failure, 2026-12-01): a compiler fact, kept apart from the routing table that keeps
# such calls off bwd_ws.py (policy.BWD_WS_NO_DROPOUT) so that the guard in _bwd_warp_spec still
# raises if that table changes.
WS_DKDV_PTR_DROPOUT_FAILS: set = {64}


def _dkdv_vec_ptr_kind(params: AttnParams, bd: int) -> int:
    """The kernel's VEC_PTR value for a dK/dV launch with pointer loads (see above)."""
    if WS_DKDV_VEC_PTR_KIND is not None:
        return WS_DKDV_VEC_PTR_KIND
    masked = params.window_left >= 0 or params.window_right >= 0
    return 1 if masked and bd not in WS_DKDV_VEC_PTR1_FAILS else 2


def _dkdv_vec_ptr(bd: int, group: int, seqlen_q: int) -> bool:
    """Whether the dK/dV launch reads its loop's 1-D vectors by pointers (VEC_PTR)."""
    if WS_DKDV_VEC_PTR is not None:
        return WS_DKDV_VEC_PTR
    return group * seqlen_q > WS_DKDV_DESC_MAX_ROWS.get(bd, float("inf"))


def _dkdv_flat(flat: bool, vec_ptr: bool) -> bool:
    """Whether a dK/dV launch may be persistent (flat): with pointer loads (VEC_PTR) it is
    one tile a program, the form the H200 ran (session 18, 8k / 16k stresses); the
    persistent one with pointer loads (GQA: group x Nq > WS_DKDV_DESC_MAX_ROWS within
    WS_PERSISTENT_MAX_N) has not, unless WS_VEC_PTR_PERSISTENT. One rule for the launch
    (_bwd_warp_spec) and the policy's persistence question (_ws_persistent_call)."""
    return flat and (not vec_ptr or WS_VEC_PTR_PERSISTENT)


def _varlen_ws_loop_ok(bd: int, group: int, max_seqlen_q: int) -> bool:
    """Whether a varlen backward may take bwd_ws_varlen.py, whose dK/dV loop reads lse /
    delta through 1-D descriptors (no VEC_PTR there): only for loops of at most
    WS_DKDV_DESC_MAX_ROWS query rows (group x max_seqlen_q), where bwd_ws.py's were clean,
    or forced (FLASHTRITON_WARP_SPEC=1). Beyond, bwd.py."""
    return _warp_spec_forced() or group * max_seqlen_q <= WS_DKDV_DESC_MAX_ROWS.get(bd, float("inf"))


def _tile_stages(bd: int, dropout: bool) -> int:
    """TILE_STAGES of a persistent bwd_ws.py launch: WS_PERSISTENT_TILE_STAGES, but 1 at
    BLOCK_D 128 and up. Workaround (H200, triton 3.6.0, 2026-11-30): with 2 the D = 128
    kernels compile (230984 / 232040 bytes of shared memory) but give wrong gradients in
    every call, one process alone: row 0 of ~50 query blocks of dq NaN, ~57 rows of dk / dv
    off, at N = 2k, 16k and causal 4k (bench/gpu/s17_bwd_persistent_ab.py diag); 1 is
    bitwise equal to one tile a program there, and D = 64 is right with 2. (With dropout,
    2 would overflow shared memory at D = 128 anyway: 232632 / 233688 bytes.)"""
    return 1 if bd >= 128 else WS_PERSISTENT_TILE_STAGES


def _ws_programs(device, kernel: str, n_tiles: int, bd: int, masked: bool, dropout: bool, flat: bool,
                 n: int = 0):
    """(grid size, PERSISTENT) of a bwd_ws.py launch (kernel "dkdv" or "dq") over n_tiles
    tiles: persistent for the kinds in WS_PERSISTENT with more tiles than programs, when
    every tensor passes _flat_rows (flat) and n = max(Nq, Nk) is within the kind's
    WS_PERSISTENT_MAX_N."""
    kind = (kernel, bd, masked, dropout)
    if kind not in WS_PERSISTENT or not flat or n > WS_PERSISTENT_MAX_N.get(kind, n):
        return n_tiles, False
    programs = WS_PERSISTENT_PROGRAMS or sm_count(device)
    if programs >= n_tiles:
        return n_tiles, False
    return programs, True


def _ws_flat(tensors, bd: int, seqlen_q: int, seqlen_k: int) -> bool:
    """Whether the persistent bwd_ws.py kernels can read these (B, N, H, D) tensors through
    their (B * N, H-span) descriptors: every one _flat_rows, and Nq / Nk multiples of the
    dQ / dK/dV tiles. A ragged last block's rows would run into the next batch's rows,
    which TMA does not clip (session 17's GPU run of the (2, 96, 160) causal test: dq
    differed from one tile a program; regression test test_persistent_backward_ragged_rule)."""
    kv_tile, dq_tile = _bwd_ws_tiles(bd)
    return (seqlen_q % dq_tile.block_m == 0 and seqlen_q % kv_tile.block_m == 0
            and seqlen_k % kv_tile.block_n == 0 and seqlen_k % dq_tile.block_n == 0
            and all(_flat_rows(t, bd) for t in tensors))


def _ws_persistent_call(q, k, v, dout, bd: int, params: AttnParams, masked: bool) -> bool:
    """Whether a bwd_ws.py backward of these tensors (the whole call, or with masked the
    split path's PARTIAL launch) would run its dK/dV launch persistent (_ws_programs; the
    gradients bwd_ws.py writes are allocated flat, like q, k, v). Only dK/dV decides: with
    Nq != Nk or GQA the dQ launch may fall on the other side of the SM count (a speed
    question only). The policy's short-sequence rules
    (policy.warp_spec_mode) take bwd_ws.py only then: there the gain is persistence's."""
    if bd not in _BWD_WS_TILES:
        return False
    batch, seqlen_q = q.shape[:2]
    seqlen_k, nheads_k = k.shape[1], k.shape[2]
    flat = _dkdv_flat(_ws_flat((q, k, v, dout), bd, seqlen_q, seqlen_k),
                      _dkdv_vec_ptr(bd, q.shape[2] // nheads_k, seqlen_q))
    n_tiles = batch * nheads_k * triton.cdiv(seqlen_k, _bwd_ws_tiles(bd)[0].block_n)
    return _ws_programs(q.device, "dkdv", n_tiles, bd, masked, params.dropout_p > 0, flat,
                        max(seqlen_q, seqlen_k))[1]


def _deal_block_major(kernel: str, params: AttnParams, n_blocks: int) -> bool:
    """Whether a persistent bwd_ws.py launch deals block-major (BLOCK_MAJOR): a right mask
    without a left edge (a head's blocks heaviest first: dK/dV always, dQ under
    WS_HEAVY_FIRST) and more than WS_HEAD_MAJOR_MAX_BLOCKS blocks a head."""
    heavy_first = kernel == "dkdv" or WS_HEAVY_FIRST
    return (params.window_right >= 0 and params.window_left < 0 and heavy_first
            and n_blocks > WS_HEAD_MAJOR_MAX_BLOCKS)


def _bwd_warp_spec(q, k, v, dout, lse, delta, dq, dk, dv, params: AttnParams, bd: int, keys=None, rng_rows=0,
                   partial: bool = False):
    """keys: the dropout key table (_dropout_keys) when params.dropout_p > 0. partial:
    only the fully visible tiles (causal, right window, ragged counts), the partial
    gradients (softmax_scale not applied) left in dq, dk, dv for bwd.py's RESUME. Each
    kernel persistent or not as _ws_programs rules."""
    batch, seqlen_q, nheads, head_dim = q.shape
    seqlen_k, nheads_k = k.shape[1], k.shape[2]
    lse_stride = seqlen_q
    if seqlen_q % 128:
        # The kernels read lse and delta through 1-D descriptors, whose box must start on
        # 16 bytes (Triton checks it): each head's rows get padded to a multiple of 128.
        lse_stride = triton.cdiv(seqlen_q, 128) * 128
        padded = memory.empty((2, batch, nheads, lse_stride), torch.float32, q.device)
        plans.unreplayable()
        padded[0, ..., :seqlen_q].copy_(lse)
        padded[1, ..., :seqlen_q].copy_(delta)
        lse, delta = padded[0], padded[1]
    tile, dq_tile = _bwd_ws_tiles(bd)
    # keys_total: the rk / ck part of the table (its descriptors' extent); cs_mult follows it
    keys_arg, keys_total = (keys, keys.numel() - 1) if keys is not None else (lse, 0)
    # the persistent kernels read every tensor as (B * N, H-span) rows
    flat = _ws_flat((q, k, v, dout, dq, dk, dv), bd, seqlen_q, seqlen_k)
    n_kblocks = triton.cdiv(seqlen_k, tile.block_n)
    vec_ptr = _dkdv_vec_ptr(bd, nheads // nheads_k, seqlen_q)
    programs, persistent = _ws_programs(q.device, "dkdv", batch * nheads_k * n_kblocks, bd, partial,
                                        keys is not None, _dkdv_flat(flat, vec_ptr), max(seqlen_q, seqlen_k))
    if not persistent and bd in WS_DKDV_ONE_TILE_VEC_PTR and WS_DKDV_VEC_PTR is None:
        vec_ptr = True                       # (the one-tile D = 64 launch's NaN: see the table)
    vec_kind = _dkdv_vec_ptr_kind(params, bd) if vec_ptr else 0
    if vec_kind and bd in WS_DKDV_PTR_DROPOUT_FAILS and keys is not None:
        raise NotImplementedError(f"bwd_ws.py's dK/dV with dropout at BLOCK_D {bd} (pointer loads with "
                                  "dropout do not compile in Triton 3.6; policy.BWD_WS_NO_DROPOUT routes it to bwd.py)")
    if vec_kind == 1 and bd in WS_DKDV_VEC_PTR1_FAILS:
        raise NotImplementedError(f"bwd_ws.py's dK/dV with VEC_PTR = 1 at BLOCK_D {bd} (does not compile in Triton 3.6)")
    plans.launch(attn_bwd_dkdv_ws_kernel, (programs,),
        q, k, v, dout, lse, delta, dk, dv, keys_arg,
        *_dims4(q, False), *_dims4(k, False), *_dims4(v, False), *_dims4(dout, False),
        *_dims4(dk, False), *_dims4(dv, False),
        lse.numel(), lse_stride, batch, nheads, nheads_k, nheads // nheads_k, seqlen_q, seqlen_k,
        params.softmax_scale, params.softmax_scale * LOG2E, params.dropout_p, keys_total, rng_rows,
        params.window_left, params.window_right,
        HEAD_DIM=head_dim, BLOCK_D=bd, BLOCK_M=tile.block_m, BLOCK_N=tile.block_n, HAS_DROPOUT=keys is not None,
        PARTIAL=partial, HAS_RIGHT=params.window_right >= 0, HAS_LEFT=params.window_left >= 0,
        PERSISTENT=persistent, BLOCK_MAJOR=persistent and _deal_block_major("dkdv", params, n_kblocks),
        TILE_STAGES=_tile_stages(bd, keys is not None) if persistent else 2,
        VEC_PTR=vec_kind,
        num_warps=tile.num_warps, num_stages=tile.num_stages,
    )
    tile = dq_tile
    n_qblocks = triton.cdiv(seqlen_q, tile.block_m)
    programs, persistent = _ws_programs(q.device, "dq", batch * nheads * n_qblocks, bd, partial,
                                        keys is not None, flat, max(seqlen_q, seqlen_k))
    plans.launch(attn_bwd_dq_ws_kernel, (programs,),
        q, k, v, dout, lse, delta, dq, keys_arg,
        *_dims4(q, False), *_dims4(k, False), *_dims4(v, False), *_dims4(dout, False), *_dims4(dq, False),
        lse.numel(), lse_stride, batch, nheads, nheads // nheads_k, seqlen_q, seqlen_k,
        params.softmax_scale, params.softmax_scale * LOG2E, params.dropout_p, keys_total, rng_rows,
        params.window_left, params.window_right,
        HEAD_DIM=head_dim, BLOCK_D=bd, BLOCK_M=tile.block_m, BLOCK_N=tile.block_n, HAS_DROPOUT=keys is not None,
        PARTIAL=partial, HAS_RIGHT=params.window_right >= 0, HAS_LEFT=params.window_left >= 0,
        HEAVY_FIRST=params.window_right >= 0 and WS_HEAVY_FIRST,
        PERSISTENT=persistent, BLOCK_MAJOR=persistent and _deal_block_major("dq", params, n_qblocks),
        TILE_STAGES=_tile_stages(bd, keys is not None) if persistent else 2,
        num_warps=tile.num_warps, num_stages=tile.num_stages,
    )


def _bwd_warp_spec_varlen(q, k, v, dout, lse, delta, dq, dk, dv, params: AttnParams, varlen: Varlen, bd: int):
    """kernels/bwd_ws_varlen.py over a packed batch: lse and delta (H, total_q) are first
    copied into buffers padded per sequence to whole dQ blocks (+inf / 0 in the padding)."""
    total_q, nheads, head_dim = q.shape
    total_k, nheads_k = k.shape[0], k.shape[1]
    cu_q, cu_k = varlen.cu_seqlens_q, varlen.cu_seqlens_k
    batch = cu_q.numel() - 1
    kv_tile, dq_tile = _bwd_ws_tiles(bd)
    pad = dq_tile.block_m                      # the dK/dV kernel's BLOCK_M divides it
    n_qslots = triton.cdiv(total_q, pad) + batch
    q_slots, gather = _cached_map(cu_q, ("ws_slots", pad, n_qslots),
                                  lambda: _ws_varlen_maps(cu_q, pad, n_qslots, total_q))
    n_kslots = triton.cdiv(total_k, kv_tile.block_n) + batch
    k_slots, _ = _cached_map(cu_k, ("ws_slots", kv_tile.block_n, n_kslots),
                             lambda: _ws_varlen_maps(cu_k, kv_tile.block_n, n_kslots, total_k))
    cu_qblocks = _cached_map(cu_q, ("blocks", pad), lambda: _cu_blocks(cu_q, pad))
    padded = memory.empty((2, nheads, n_qslots * pad), torch.float32, q.device)
    padded[0].fill_(float("inf"))
    padded[1].zero_()
    padded[0].index_copy_(1, gather, lse)
    padded[1].index_copy_(1, gather, delta)
    lse_p, delta_p = padded[0], padded[1]
    group = nheads // nheads_k
    qk_scale = params.softmax_scale * LOG2E
    plans.launch(attn_bwd_dkdv_ws_varlen_kernel, (nheads_k * n_kslots,),
        q, k, v, dout, lse_p, delta_p, dk, dv, cu_q, cu_k, cu_qblocks, k_slots,
        q.stride(0), k.stride(0), k.stride(1), v.stride(0), v.stride(1), dout.stride(0),
        dk.stride(0), dk.stride(1), dv.stride(0), dv.stride(1),
        n_kslots, nheads, group, lse_p.numel(), n_qslots * pad, params.softmax_scale, qk_scale,
        HEAD_DIM=head_dim, BLOCK_D=bd, BLOCK_M=kv_tile.block_m, BLOCK_N=kv_tile.block_n, PAD_BLOCK=pad,
        num_warps=kv_tile.num_warps, num_stages=kv_tile.num_stages,
    )
    plans.launch(attn_bwd_dq_ws_varlen_kernel, (nheads * n_qslots,),
        q, k, v, dout, lse_p, delta_p, dq, cu_q, cu_k, q_slots,
        q.stride(0), q.stride(1), k.stride(0), k.stride(1), v.stride(0), v.stride(1), dout.stride(0), dout.stride(1),
        dq.stride(0), dq.stride(1),
        n_qslots, group, lse_p.numel(), n_qslots * pad, params.softmax_scale, qk_scale,
        HEAD_DIM=head_dim, BLOCK_D=bd, BLOCK_M=dq_tile.block_m, BLOCK_N=dq_tile.block_n,
        num_warps=dq_tile.num_warps, num_stages=dq_tile.num_stages,
    )
