"""The prefill forward's launchers: fwd (launch plans, then _fwd: fwd.py's kernel, the
warp-specialized fwd_ws.py / fwd_ws_varlen.py, or the Gluon fwd_gluon.py through
launchers/forward_gluon.py, as launchers/policy.py rules), the
dense grid order (FWD_ROWS_FIRST) and dropout_mask, the keep-mask fwd / bwd draw.
Tensor layouts: see launchers/prefill.py."""
from __future__ import annotations

import torch
import triton

from .. import alibi_anchor, memory, one_row
from . import decode, dense_varlen, forward_gluon, plans
from ..kernels import configs
from ..kernels.fwd import attn_fwd_kernel
from ..kernels.fwd_ws import attn_fwd_ws_kernel
from ..kernels.fwd_ws_varlen import attn_fwd_ws_varlen_kernel
from .common import (LOG2E, AttnParams, Varlen, _alibi_strides, _cached_map, _common_scalars, _cu_blocks,
                     _descriptor_ready, _dims4, _dot_precision, _effective_window, _ensure_allocator, _flat_view,
                     _heaviest_first, _host_descriptor, _stamp, _tile, _unit_stride_varlen, _ws_varlen_maps,
                     block_d, host_descriptors, interpreting, qk_levels, reg_options, sm_count)
from .policy import (WARP_SPEC_TILES, gluon_fwd, gluon_fwd_consumers, gluon_fwd_dropout, gluon_fwd_own_tiles,
                     gluon_fwd_o_stage, gluon_fwd_persistent, gluon_fwd_varlen, one_row_decode,
                     gluon_fwd_window, gluon_fwd_window_early_q, gluon_fwd_window_lean_mask, gluon_kind,
                     warp_spec_mode, warp_spec_varlen)

def fwd(q, k, v, params: AttnParams, alibi=None, rng=None, varlen: Varlen | None = None):
    """Returns (out like q, lse fp32). A dense call seen before replays its launch plan
    (launchers/plans.py): the same launches, without the decisions and Triton's binding."""
    if one_row_decode(q, k, params, varlen):
        return _fwd_one_row(q, k, v, params, alibi, varlen)
    # a packed call, or a ragged dense one as B equal sequences (launchers/dense_varlen.py), on the Gluon VARLEN kernel
    routed = (_gluon_varlen_route(q, k, v, params, alibi, rng, varlen) if varlen is not None
              else dense_varlen.fwd(q, k, v, params, alibi, _gluon_varlen_route))
    if routed is not None:
        return routed
    inputs = (q, k, v, alibi, rng)
    key = plans.plan_key("fwd", inputs, params) if varlen is None else None
    return plans.run(key, inputs, lambda: _fwd(q, k, v, params, alibi, rng, varlen))


def _gluon_varlen_route(q, k, v, params: AttnParams, alibi, rng, varlen: Varlen):
    """(out, lse (H, total_q)) of a packed call on the Gluon kernel's VARLEN variant (policy.GLUON_FWD_VARLEN_MIN_N,
    session 49: one block a CTA, through a launch plan of its own, forward_gluon.fwd_varlen), or None where
    policy.gluon_fwd_varlen declines it."""
    vl = _unit_stride_varlen(varlen)
    p = _effective_window(params, vl.max_seqlen_q, vl.max_seqlen_k)
    if not gluon_fwd_varlen(q, k, v, p, alibi, block_d(q.shape[-1]), vl):
        return None
    # (with dropout, session 51: the call's rng state, the packed counter layout; a sliding window (left, 0),
    # session 51: the kernel's WINDOW, the effective window's left side)
    kind = gluon_kind(p)
    return forward_gluon.fwd_varlen(q, k, v, vl, p.softmax_scale, causal=kind == "causal",
                                    dropout_p=p.dropout_p, rng=rng if p.dropout_p > 0 else None,
                                    window=(int(p.window_left), 0) if kind == "window" else None)


def _fwd_one_row(q, k, v, params: AttnParams, alibi=None, varlen: Varlen | None = None):
    """A one-row call (policy.one_row_decode) on the split-KV decode kernel (flashtriton.one_row.run's views); a
    varlen call's splits and tile follow its longest sequence (kvcache_fwd's span), not the packed capacity."""
    if varlen is None:
        return one_row.run(decode.kvcache_fwd, q, k, v, params, alibi)
    return one_row.run(decode.kvcache_fwd, q, k, v, params, alibi, varlen, span=varlen.max_seqlen_k)


def lse_log2(q, k, v, params: AttnParams, alibi=None, rng=None, varlen: Varlen | None = None):
    """The lse in log2 units (B, H, Nq) or (H, total_q) of a one-row fp32 call (common.qk_levels > 0), for
    launchers/backward.py: fwd.py once more with LSE_LOG2 (the same tile, hence the same m_i and l_i bits as the
    forward's), its output discarded. Why: the natural lse's round trip (* ln 2 here, * log2 e in the backward)
    rounds twice at |lse| ~ 10, which left P's relative error ~3x PyTorch's at sharp scales (bench/NOTES.md,
    session 60). Its cost: the one-row fp32 backward 1.29-1.41x the plain kernels' (H100, session 60)."""
    return _fwd(q, k, v, params, alibi, rng, varlen, lse_log2=True)[1]


def _fwd(q, k, v, params: AttnParams, alibi=None, rng=None, varlen: Varlen | None = None, lse_log2: bool = False):
    varlen = _unit_stride_varlen(varlen)
    is_varlen = varlen is not None
    q, k, v = (_descriptor_ready(t) for t in (q, k, v))
    if is_varlen:
        total_q, nheads, head_dim = q.shape
        nheads_k = k.shape[1]
        batch = varlen.cu_seqlens_q.numel() - 1
        seqlen_q, seqlen_k = varlen.max_seqlen_q, varlen.max_seqlen_k
        lse = memory.empty((nheads, total_q), torch.float32, q.device)
        stride_lb, stride_lh = 0, lse.stride(0)
        rng_rows, rng_stride = total_q, max(seqlen_k, 1)
    else:
        batch, seqlen_q, nheads, head_dim = q.shape
        seqlen_k, nheads_k = k.shape[1], k.shape[2]
        lse = memory.empty((batch, nheads, seqlen_q), torch.float32, q.device)
        stride_lb, stride_lh = lse.stride(0), lse.stride(1)
        rng_rows, rng_stride = batch * seqlen_q, seqlen_k
    params = _effective_window(params, seqlen_q, seqlen_k)
    out = memory.empty(q.shape, q.dtype, q.device)
    if not interpreting():
        _ensure_allocator()
    bd = block_d(head_dim)
    dummy = lse
    stride_ab, stride_ah = _alibi_strides(alibi)

    def launch(tile: configs.Tile):
        if is_varlen:
            cu_q, cu_k = varlen.cu_seqlens_q, varlen.cu_seqlens_k
            cu_blocks = _cached_map(cu_q, ("blocks", tile.block_m), lambda: _cu_blocks(cu_q, tile.block_m))
            slots = triton.cdiv(total_q, tile.block_m) + batch
            grid = (nheads * slots,) if FWD_ROWS_FIRST else (nheads, slots)
            order = dummy
            if use_order:
                order = _cached_map(cu_q, ("order", tile.block_m, slots, _stamp(cu_k)),
                                    lambda: _heaviest_first(varlen, cu_blocks, slots, tile.block_m))
        else:
            cu_blocks = cu_q = cu_k = order = dummy
            if FWD_ROWS_FIRST:
                grid = (batch * nheads * triton.cdiv(seqlen_q, tile.block_m),)
            else:
                grid = (batch * nheads, triton.cdiv(seqlen_q, tile.block_m))
        descs = (dummy,) * 4
        if use_host_desc:
            descs = (_host_descriptor(q, tile.block_m, bd), _host_descriptor(k, tile.block_n, bd),
                     _host_descriptor(v, tile.block_n, bd), _host_descriptor(out, tile.block_m, bd))
        plans.launch(attn_fwd_kernel, grid,
            q, k, v, out, lse, cu_q, cu_k, cu_blocks, order,
            alibi if alibi is not None else dummy, rng if rng is not None else dummy,
            *descs,
            *_dims4(q, is_varlen), *_dims4(k, is_varlen), *_dims4(v, is_varlen), *_dims4(out, is_varlen),
            stride_lb, stride_lh, stride_ab, stride_ah,
            nheads, nheads // nheads_k, batch, seqlen_q, seqlen_k,
            rng_rows=rng_rows, rng_stride=rng_stride, n_bucket=configs.seqlen_bucket(max(seqlen_q, seqlen_k)),
            HEAD_DIM=head_dim, BLOCK_D=bd, BLOCK_M=tile.block_m, BLOCK_N=tile.block_n,
            IS_VARLEN=is_varlen, DOT_PRECISION=_dot_precision(q.dtype, seqlen_q, "fwd"), USE_ORDER=use_order,
            HOST_DESC=use_host_desc, ROWS_FIRST=FWD_ROWS_FIRST, QK_LEVELS=qk_levels(q.dtype, bd, seqlen_q),
            **(dict(LSE_LOG2=True) if lse_log2 else {}),
            num_warps=tile.num_warps, num_stages=tile.num_stages, **reg_options("fwd", q.dtype, bd, seqlen_q),
            **_common_scalars(params, alibi, alibi_anchor.needed(seqlen_q, seqlen_k, params.window_right, is_varlen)),
        )

    # Causal-like varlen only: there block costs differ within and across sequences;
    # non-causal varlen measured 1.05x dense in sequence order (bench/NOTES.md).
    use_order = is_varlen and params.window_right >= 0 and batch > 1
    causal = params.window_right == 0
    # (descriptor shapes must be positive: empty sequences keep the in-kernel path)
    use_host_desc = (not is_varlen and min(seqlen_q, seqlen_k) > 0
                     and host_descriptors("fwd", bd, causal, max(seqlen_q, seqlen_k)))

    if lse_log2:
        # (lse_log2's calls: fwd.py's kernel, the only route of fp32 inputs)
        if qk_levels(q.dtype, bd, seqlen_q) == 0:
            raise ValueError("lse_log2: only for one-row fp32 calls (launchers.common.qk_levels > 0)")
        launch(_tile("fwd", bd, q, params, max(seqlen_q, seqlen_k), varlen, launch, rows=seqlen_q))
        return out, lse
    if is_varlen and warp_spec_varlen(q, params, alibi, bd) and min(total_q, k.shape[0]) > 0:
        _fwd_warp_spec_varlen(q, k, v, out, lse, params, varlen, bd)
        return out, lse
    if gluon_fwd(q, k, v, params, alibi, is_varlen, bd, seqlen_q, seqlen_k):
        # policy.GLUON_FWD_O_STAGE: PERSISTENT O_STAGE, 2 consumers (causal: with the host's longest-first deal)
        o_stage = gluon_fwd_o_stage("causal" if causal else "plain", bd, seqlen_q, seqlen_k, q.dtype)
        persistent = o_stage or gluon_fwd_persistent(causal)
        consumers = 2 if o_stage else gluon_fwd_consumers(bd, causal, persistent)
        forward_gluon.fwd_into(q, k, v, out, lse, params.softmax_scale, causal=causal, persistent=persistent,
                               num_consumers=consumers, scheduled=o_stage and causal,
                               **(dict(o_stage=True) if o_stage else {}),
                               **(dict(own_tiles=True) if gluon_fwd_own_tiles(bd, causal, persistent, consumers,
                                                                              max(seqlen_q, seqlen_k)) else {}))
        return out, lse
    if rng is not None and gluon_fwd_dropout(q, k, v, params, alibi, is_varlen, bd, seqlen_q, seqlen_k):
        kind = gluon_kind(params)                      # the key of policy.gluon_fwd_dropout's table
        g_causal = kind == "causal"
        window = (int(params.window_left), int(params.window_right)) if kind == "window" else None
        forward_gluon.fwd_into(q, k, v, out, lse, params.softmax_scale, causal=g_causal,
                               persistent=window is None and gluon_fwd_persistent(g_causal), window=window,
                               dropout_p=params.dropout_p, rng=rng)
        return out, lse
    if gluon_fwd_window(q, k, v, params, alibi, is_varlen, bd, seqlen_q, seqlen_k):
        # policy.GLUON_FWD_WINDOW_EARLY_Q (D = 128 from 4k since session 31): the PERSISTENT EARLY_Q variant
        early = dict(persistent=True, early_q=True) if gluon_fwd_window_early_q(bd, seqlen_q, seqlen_k) else {}
        # policy.GLUON_FWD_O_STAGE (D = 128 from 4k since session 42): PERSISTENT O_STAGE instead of EARLY_Q, with
        # the host's longest-first deal of the window's blocks since session 43 (schedule.window_schedule)
        if gluon_fwd_o_stage("window", bd, seqlen_q, seqlen_k, q.dtype):
            early = dict(persistent=True, o_stage=True, scheduled=True)
        # policy.GLUON_FWD_WINDOW_LEAN_MASK (the same, with EARLY_Q): the masked tiles' cheaper mask
        lean = dict(lean_mask=True) if gluon_fwd_window_lean_mask(bd, seqlen_q, seqlen_k) else {}
        forward_gluon.fwd_into(q, k, v, out, lse, params.softmax_scale,
                               window=(params.window_left, params.window_right), **early, **lean)
        return out, lse
    if warp_spec_mode(q, params, alibi, is_varlen, bd, seqlen_q, seqlen_k, kv=(k, v)) == "whole":
        _fwd_warp_spec(q, k, v, out, lse, params, bd, rng=rng if params.dropout_p > 0 else None)
        return out, lse
    tile = _tile("fwd", bd, q, params, max(seqlen_q, seqlen_k), varlen, launch, rows=seqlen_q)
    launch(tile)
    return out, lse


# Dense forward grid order. True: one linear grid whose consecutive programs are the query
# blocks of one (batch, head), so the ~132 programs in flight read a few heads' K and V,
# which stay in L2; False: (B * H, query blocks), consecutive programs on different heads
# (each K / V read by programs spread over the whole launch). fwd.py, H200, 2026-11-29,
# bf16, 16k tokens (bench/gpu/s6_ws_ab.py): rows-first / heads-first TFLOP/s 1.00-1.13x at
# N >= 2k (D = 128 and 64, causal and not), 1.00-1.34x at N = 512; one outlier, D = 128
# non-causal N = 1k, 0.74x (280 against 379; that case now runs fwd_ws.py: 405). The varlen
# grid too (a head's block slots consecutive): no measurable effect there (session 7,
# 0.835x dense against 0.83x).
FWD_ROWS_FIRST = True
# fwd_ws.py hands out a head's query blocks heaviest first in masked calls (HEAVY_FIRST),
# as fwd.py does and as bwd_ws.py's dQ kernel does (launchers.backward.WS_HEAVY_FIRST).
# The masked fwd_ws.py runs causal D = 128 / 256 and windowed D = 256 (WARP_SPEC_MASKED_FWD). H200,
# 2026-11-30, graph replays, D = 256 causal, 16k tokens, one tile a program: 2k / 4k level
# (400-405 against 402-409; 456-471 against 467-479), 16k +4-8% (562-578 against 524-544)
# over four runs (bench/gpu/s15_fwd_heavy_first_ab.py, s15_persistent_variants_ab.py).
# With PERSISTENT it also makes the deal block-major (kernels/fwd_ws.py).
WS_HEAVY_FIRST = True
# fwd_ws.py as a persistent kernel (PERSISTENT): about one program an SM (the 128 x 128
# tile takes 230 KB of shared memory, so one fits), each looping over the call's query
# blocks. Which calls, as (BLOCK_D, masked, dropout) - measured, per kind of call:
# D = 128 unmasked, H200, 2026-11-30, graph replays, 16k tokens, each twice
# (bench/gpu/s15_persistent_ab.py): 411-415 / 480 / 513-522 / 511-532 / 555 TFLOP/s at
# N = 512 / 1k / 2k / 4k / 16k against the one-tile-a-program kernel's 298-300 / 401-404 /
# 478-480 / 506 / 482-549 and fwd.py's short tile at 512 / 1k (365 / 410-420); bitwise
# equal (the same tile, the same order of keys). D = 256 unmasked (128 x 64, one stage)
# 407-409 / 546-550 / 567-603 at 512 / 2k / 16k against 372 / 539-545 / 593-602; D = 128
# with dropout (p = 0.1) 466-470 / 460-506 at 2k / 16k against 425-429 / 494-499
# (s15_persistent_variants_ab.py, same method). D = 256 masked, with HEAVY_FIRST's
# block-major deal: causal 2k / 16k 429-432 / 582 against 405-409 / 537-544 one tile a
# program (heaviest first: 400-405 / 577-578). D = 128 causal since session 16, with the
# deal by shape (WS_HEAD_MAJOR_MAX_BLOCKS), where policy.WS_MASKED_PERSISTENT_ONLY sends it
# here: 380 / 436 / 471 / 496 / 500 TFLOP/s at 1k / 2k / 4k / 8k / 16k (head-major up to
# 8k, block-major at 16k) against fwd.py's 338 / 404 / 440 / 457 / 470 (bench/gpu/
# s16_deal_ab.py, graph replays, H200, 2026-11-30).
# D = 64 unmasked since session 22 (fwd_ws.py runs D = 64 only persistent: policy.
# WS_FWD_PERSISTENT_PLAIN_ONLY, with the measurements).
WS_PERSISTENT = {(128, False, False), (256, False, False), (128, False, True), (256, True, False),
                 (128, True, False), (64, False, False)}
# Sliding windows (a left edge) too, dealt head-major: D = 256 (1024, 0) 4k / 16k 504 / 495
# and 444 / 441 band TFLOP/s against 452 / 452 and 419 / 413 one tile a program (s16_deal_ab.py).
WS_PERSISTENT_WINDOWS = True
# The persistent masked deal (with WS_HEAVY_FIRST): head-major snake rounds while a head has
# at most this many query blocks (a round of ~132 tiles then spans several heads, and the
# snake pairs one head's heavy blocks with another's light ones), block-major beyond (a
# round inside one head would hold only its heavy or only its light blocks). Session 15,
# H200, graph replays, 16k tokens: D = 256 causal 2k (16 blocks) head-major 454-457 against
# block-major 429-432 TFLOP/s, 16k (128 blocks) 354 against 582; D = 128 causal 4k (32
# blocks) head-major 468-469 against block-major 433-436. Session 16 (s16_deal_ab.py, same
# method): D = 256 causal 2k / 4k / 8k head-major 479 / 524 / 412 against block-major 446 /
# 507 / 528; D = 128 causal 1k / 2k / 4k 384 / 438 / 471 against 341 / 392 / 420, 8k 493 /
# 499 against 476 / 481, 16k 381 against 497. So per BLOCK_D: D = 128 at 8k (64 blocks)
# gained 4% head-major where D = 256 at 8k lost 22%. Sliding windows (a left edge: the
# blocks cost about the same) always deal head-major.
WS_HEAD_MAJOR_MAX_BLOCKS = {128: 64, 256: 32}
# A persistent launch runs one program an SM (one fits); WS_PERSISTENT_PROGRAMS, when set,
# is the count instead (the tests lower it to loop over small shapes).
WS_PERSISTENT_PROGRAMS = None


def _ws_programs(q, n_tiles: int, bd: int, masked: bool, dropout: bool, left_window: bool = False, flat=True):
    """(grid size, PERSISTENT) of a fwd_ws.py launch over n_tiles query blocks. flat:
    whether q, k, v and out all have a common._flat_view (the persistent kernel needs it)."""
    if (bd, masked, dropout) not in WS_PERSISTENT or (left_window and not WS_PERSISTENT_WINDOWS) or not flat:
        return n_tiles, False
    programs = WS_PERSISTENT_PROGRAMS or sm_count(q.device)
    if programs >= n_tiles:
        return n_tiles, False
    return programs, True


def _deal_block_major(masked: bool, left_window: bool, n_blocks: int, bd: int) -> bool:
    """Whether a persistent masked fwd_ws.py launch deals block-major (BLOCK_MAJOR) rather
    than head-major: causal-like bands under WS_HEAVY_FIRST with more query blocks a head
    than WS_HEAD_MAJOR_MAX_BLOCKS[bd]."""
    return masked and WS_HEAVY_FIRST and not left_window and n_blocks > WS_HEAD_MAJOR_MAX_BLOCKS.get(bd, 32)


def _fwd_warp_spec(q, k, v, out, lse, params: AttnParams, bd: int, rng=None):
    """kernels/fwd_ws.py over a whole call: unmasked, or causal / windowed
    (warp_spec_masked_fwd). rng: the call's (seed, offset) when params.dropout_p > 0 (only
    unmasked calls: warp_spec_masked_fwd takes no dropout)."""
    batch, seqlen_q, nheads, head_dim = q.shape
    seqlen_k, nheads_k = k.shape[1], k.shape[2]
    tile = WARP_SPEC_TILES[bd] if not interpreting() else configs.INTERPRETER_TILE
    qk_scale = params.softmax_scale * LOG2E
    masked = params.window_right >= 0
    # the query rows, for the mask and the dropout row keys (a few us of launch; made per
    # call, so that a CUDA-graph capture owns it)
    rows = masked or rng is not None
    iota = memory.arange_i32(seqlen_q, q.device) if rows else None
    n_blocks = triton.cdiv(seqlen_q, tile.block_m)
    block_major = _deal_block_major(masked, params.window_left >= 0, n_blocks, bd)
    views = [_flat_view(t, bd) for t in (q, k, v, out)]
    flat = all(x is not None for x in views)
    programs, persistent = _ws_programs(q, batch * nheads * n_blocks, bd, masked,
                                        rng is not None, masked and params.window_left >= 0, flat)
    plans.launch(attn_fwd_ws_kernel, (programs,),
        q, k, v, out, lse, iota if rows else lse, rng if rng is not None else lse,
        *_dims4(q, False), *_dims4(k, False), *_dims4(v, False), *_dims4(out, False),
        lse.numel(),
        *(x for view in views for x in (view if flat else (0, 0, 0))),
        batch, nheads, nheads // nheads_k, seqlen_q, seqlen_k, qk_scale, params.window_left, params.window_right,
        params.dropout_p, batch * seqlen_q, seqlen_k,
        HEAD_DIM=head_dim, BLOCK_D=bd, BLOCK_M=tile.block_m, BLOCK_N=tile.block_n, NEG_SCALE=qk_scale < 0,
        MASKED=masked, HAS_LEFT=masked and params.window_left >= 0, HAS_DROPOUT=rng is not None,
        HEAVY_FIRST=masked and WS_HEAVY_FIRST, PERSISTENT=persistent, BLOCK_MAJOR=persistent and block_major,
        num_warps=tile.num_warps, num_stages=tile.num_stages,
    )


def _fwd_warp_spec_varlen(q, k, v, out, lse, params: AttnParams, varlen: Varlen, bd: int):
    """kernels/fwd_ws_varlen.py over a packed batch; lse (H, total_q) is gathered from
    the kernel's per-slot buffer."""
    total_q, nheads, head_dim = q.shape
    nheads_k = k.shape[1]
    batch = varlen.cu_seqlens_q.numel() - 1
    tile = WARP_SPEC_TILES[bd] if not interpreting() else configs.INTERPRETER_TILE
    bm = tile.block_m
    n_slots = triton.cdiv(total_q, bm) + batch
    cu_q, cu_k = varlen.cu_seqlens_q, varlen.cu_seqlens_k
    slots, gather = _cached_map(cu_q, ("ws_slots", bm, n_slots), lambda: _ws_varlen_maps(cu_q, bm, n_slots, total_q))
    lse_pad = memory.empty((nheads, n_slots * bm), torch.float32, q.device)
    qk_scale = params.softmax_scale * LOG2E
    plans.launch(attn_fwd_ws_varlen_kernel, (nheads * n_slots,),
        q, k, v, out, lse_pad, cu_q, cu_k, slots,
        q.stride(0), q.stride(1), k.stride(0), k.stride(1), v.stride(0), v.stride(1), out.stride(0), out.stride(1),
        n_slots, lse_pad.numel(), nheads // nheads_k, qk_scale,
        HEAD_DIM=head_dim, BLOCK_D=bd, BLOCK_M=bm, BLOCK_N=tile.block_n, NEG_SCALE=qk_scale < 0,
        num_warps=tile.num_warps, num_stages=tile.num_stages,
    )
    torch.index_select(lse_pad, 1, gather, out=lse)


def dropout_mask(q, k, params: AttnParams, rng, varlen: Varlen | None = None) -> torch.Tensor:
    """The keep-mask (B, H, Nq, Nk) bool that fwd / bwd draw for this rng state."""
    varlen = _unit_stride_varlen(varlen)
    from ..kernels.dropout_mask import dropout_mask_kernel
    if varlen is None:
        batch, seqlen_q, nheads, _ = q.shape
        seqlen_k = k.shape[1]
        rng_rows, rng_stride = batch * seqlen_q, seqlen_k
    else:
        batch, nheads = varlen.cu_seqlens_q.numel() - 1, q.shape[1]
        seqlen_q, seqlen_k = varlen.max_seqlen_q, varlen.max_seqlen_k
        rng_rows, rng_stride = q.shape[0], max(seqlen_k, 1)
    mask = torch.zeros((batch, nheads, seqlen_q, seqlen_k), dtype=torch.int8, device=q.device)
    blk = 32
    grid = (batch * nheads, triton.cdiv(seqlen_q, blk), triton.cdiv(seqlen_k, blk))
    plans.launch(dropout_mask_kernel, grid, mask, varlen.cu_seqlens_q if varlen is not None else mask, rng,
                              mask.stride(0), mask.stride(1), mask.stride(2), nheads, seqlen_q, seqlen_k,
                              rng_rows, rng_stride, params.dropout_p,
                              BLOCK_M=blk, BLOCK_N=blk, IS_VARLEN=varlen is not None)
    return mask.bool()
