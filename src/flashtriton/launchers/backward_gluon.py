"""Host side of kernels/bwd_gluon.py (the hand-scheduled Gluon dK/dV pass of the backward
for Hopper): validation of its narrow contract, descriptors, grid, launch. Not routed into
the library (session 24, 2026-12-01: offline only, awaiting the GPU A/B,
bench/gpu/s24_gluon_bwd_ab.py).

    prepare_dkdv(q, k, v, dout, lse, delta, softmax_scale, causal=False, *, num_stages=None,
                 vec_ptr=True, overlap=False)
        checks the call (ValueError naming the argument and the rule, before any launch),
        allocates dk / dv, makes the descriptors; returns launch(), which runs the kernel
        (again, into the same dk and dv) and returns (dk, dv). The keywords pick the
        kernel's variants for the A/B (kernels/bwd_gluon.py: NUM_STAGES, VEC_PTR, OVERLAP)
    dkdv_gluon(...)          prepare_dkdv(...)()
    prepare_fused(q, k, v, dout, lse, delta, softmax_scale, causal=False, *, num_stages=None,
                  rotate=True, dropout_p=0.0, keys=None, window=None)
        the FUSED backward (kernels/bwd_gluon_fused.py, session 25): dK / dV and dQ in one
        kernel, dQ reduce-added in fp32 by TMA. NON-DETERMINISTIC dq (the order in which
        key blocks add their partial tiles varies run to run); dk / dv deterministic.
        For deterministic=False only. Validation as prepare_dkdv (ValueError before any
        launch); causal=True: the library's bottom-right mask. Returns launch() -> (dq,
        dk, dv): zeroes the fp32 accumulator, runs the kernel, casts. dropout_p > 0 (session
        26): the backward of the dropout forward whose key table is keys
        (launchers.common._dropout_keys(rng, H, B * Nq, Nk)); check_dropout validates them.
        window=(left, right) (session 28): flash-attn's sliding window (-1 unbounded), the
        kernel's WINDOW variant (not with dropout); forward_gluon.window_args reduces it.
    fused_gluon(...)         prepare_fused(...)()
    delta_of(out, dout)      delta = rowsum(dO * O) (B, H, Nq) fp32 by the library's own
                             preprocess kernel (kernels/bwd.py's bwd_preprocess_kernel, as
                             launchers/backward.py launches it)

Conventions (those of launchers/backward.py's _bwd / _bwd_warp_spec and kernels/bwd_ws.py):
q, dout (B, Nq, H, D); k, v (B, Nk, Hk, D), H % Hk == 0, query head h on KV head
h // (H / Hk); lse (B, H, Nq) fp32, the forward's natural-log logsumexp of the scaled
scores (+inf for a row that sees no key); delta (B, H, Nq) fp32; dk, dv like k, v
(contiguous), dK already multiplied by softmax_scale; GQA's sum over the group inside the
kernel (no scratch). causal=True: the bottom-right mask (query i sees key j iff
j <= i + Nk - Nq).

Host cost: every prepare makes 8 TensorDescriptors and launch() goes through Triton's JIT
binder (no launch plan: launchers/plans.py cannot rebind Gluon descriptors, as
forward_gluon.fwd_into notes), tens of microseconds a call; the A/B times launch() alone.

Gluon kernels have no interpreted form (Triton 3.6.0): nothing here runs under
TRITON_INTERPRET.
"""
from __future__ import annotations

import contextlib
import math
import os

import torch
import triton
from triton.experimental.gluon import language as gl

from .. import memory
from . import plans, policy
from ..kernels.bwd import bwd_preprocess_kernel
from ..kernels.bwd_gluon import DEFAULT_CONFIG, attn_bwd_dkdv_gluon_kernel
from ..kernels.bwd_gluon_fused import (FUSED_CONFIG, FUSED_WIDE_CONFIG, attn_bwd_fused_gluon_kernel, dq_stage_layout,
                                       k_layout, timeline_numel)
from ..kernels.dq_accum import BLOCK as DQ_ACCUM_BLOCK
from ..kernels.dq_accum import cast_kernel, zero_f32_kernel
from .common import LOG2E, block_d
from .forward_gluon import _DTYPES, _desc, check_kv_shapes, rows_view_ok

__all__ = ["check_inputs", "check_dropout", "prepare_dkdv", "dkdv_gluon", "prepare_fused", "fused_gluon",
           "fused_smem_bytes", "fused_block_m", "fused_timeline_numel", "delta_of", "rows_view_ok"]


def _vec_desc(x: torch.Tensor, rows: int):
    """x (B, H, Nq) fp32 as a 1-D (B * H * Nq,) TMA descriptor with a (rows,) box (made
    contiguous first if it is not)."""
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    x = x.contiguous()
    flat = x.view(-1)
    layout = gl.NVMMASharedLayout.get_default_for([rows], gl.float32)
    return x, TensorDescriptor(flat, [flat.numel()], [1], [rows], layout)


def _check_tensor(name, t, dim, what):
    if not isinstance(t, torch.Tensor):
        raise ValueError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
    if t.dim() != dim:
        raise ValueError(f"{name}: expected {dim} dimensions {what}, got shape {tuple(t.shape)}")


def check_inputs(q, k, v, dout, lse, delta, softmax_scale, block_m: int, block_n: int,
                 head_dims=None) -> tuple:
    """The narrow contract of attn_bwd_dkdv_gluon_kernel (and, with head_dims=(256,), of the D = 256
    fused backward: launchers/backward_gluon_d256.py); ValueError naming the argument and the rule.
    Needs no GPU (shapes, dtypes and devices only). Returns (B, Nq, H, D, Nk, Hk)."""
    for name, t in (("q", q), ("k", k), ("v", v), ("dout", dout)):
        _check_tensor(name, t, 4, "(B, N, heads, D)")
        if t.dtype not in _DTYPES:
            raise ValueError(f"{name}: dtype {t.dtype} not supported (float16 or bfloat16)")
    for name, t in (("lse", lse), ("delta", delta)):
        _check_tensor(name, t, 3, "(B, H, Nq)")
        if t.dtype != torch.float32:
            raise ValueError(f"{name}: dtype {t.dtype} not supported (float32)")
    if not (q.dtype == k.dtype == v.dtype == dout.dtype):
        raise ValueError(f"q, k, v, dout: dtypes differ ({q.dtype}, {k.dtype}, {v.dtype}, {dout.dtype})")
    if len({t.device for t in (q, k, v, dout, lse, delta)}) != 1:
        raise ValueError("q, k, v, dout, lse, delta: devices differ "
                         f"({', '.join(str(t.device) for t in (q, k, v, dout, lse, delta))})")
    if dout.shape != q.shape:
        raise ValueError(f"dout: shape {tuple(dout.shape)} differs from q's {tuple(q.shape)}")
    b, nq, h, d, nk, hk = check_kv_shapes(q, k, v, DEFAULT_CONFIG if head_dims is None else head_dims)
    if b == 0:
        raise ValueError("q: batch size 0")
    if nq == 0 or nq % block_m != 0:
        raise ValueError(f"q: sequence length {nq} not a positive multiple of BLOCK_M = {block_m}")
    if nk == 0 or nk % block_n != 0:
        raise ValueError(f"k: sequence length {nk} not a positive multiple of BLOCK_N = {block_n}")
    for name, t in (("lse", lse), ("delta", delta)):
        if tuple(t.shape) != (b, h, nq):
            raise ValueError(f"{name}: shape {tuple(t.shape)}, expected (B, H, Nq) = {(b, h, nq)}")
    if b * hk > 65535:
        raise ValueError(f"k: B * Hk = {b * hk} above 65535, the grid's second dimension (one CTA column a "
                         "batch x KV head)")
    if b * h * nq >= 2 ** 31 or b * max(nq, nk) >= 2 ** 31:
        raise ValueError(f"q: B * H * Nq = {b * h * nq} rows of lse (or B * N) not below 2^31 (int32 TMA "
                         "coordinates and offsets)")
    if not isinstance(softmax_scale, (int, float)) or isinstance(softmax_scale, bool) \
            or not math.isfinite(softmax_scale) or softmax_scale == 0:
        raise ValueError(f"softmax_scale: expected a finite nonzero number, got {softmax_scale!r}")
    return b, nq, h, d, nk, hk


def keys_numel(b: int, nq: int, nk: int, h: int) -> int:
    """Entries of a dense call's dropout key table (launchers.common._dropout_keys with
    rng_rows = B * Nq, rng_stride = Nk): Nk column keys, H * B * Nq row keys, cs_mult."""
    return nk + h * b * nq + 1


def check_dropout(q, k, dropout_p, keys) -> None:
    """The fused kernel's dropout arguments (after check_inputs); ValueError naming the
    argument. dropout_p: a float in [0, 1) (0: no dropout, keys must be None); keys: the
    call's key table, int32, 1-D contiguous, keys_numel(B, Nq, Nk, H) entries (the
    kernel's int32 indices need that below 2^31), on q's device."""
    if isinstance(dropout_p, bool) or not isinstance(dropout_p, (int, float)) or not math.isfinite(dropout_p) \
            or not 0 <= dropout_p < 1:
        raise ValueError(f"dropout_p: expected a number in [0, 1), got {dropout_p!r}")
    if dropout_p == 0:
        if keys is not None:
            raise ValueError("keys: given with dropout_p = 0 (no dropout: pass keys=None)")
        return
    if not isinstance(keys, torch.Tensor):
        raise ValueError(f"keys: dropout_p = {dropout_p} needs the call's key table (a torch.Tensor, "
                         f"launchers.common._dropout_keys), got {type(keys).__name__}")
    b, nq, h, _ = q.shape
    nk = k.shape[1]
    need = keys_numel(b, nq, nk, h)
    if keys.dtype != torch.int32 or keys.dim() != 1 or not keys.is_contiguous():
        raise ValueError(f"keys: expected a contiguous 1-D int32 tensor, got {keys.dtype} of shape "
                         f"{tuple(keys.shape)}{'' if keys.is_contiguous() else ', not contiguous'}")
    if keys.numel() != need:
        raise ValueError(f"keys: {keys.numel()} entries, expected Nk + H * B * Nq + 1 = {need} (the table of "
                         "_dropout_keys(rng, H, B * Nq, Nk))")
    if need > 2 ** 31:
        raise ValueError(f"keys: {need} entries, above the kernel's int32 indices (2^31)")
    if keys.device != q.device:
        raise ValueError(f"keys: on {keys.device}, q on {q.device}")


def _check_device(q, what: str = "dkdv_gluon") -> None:
    if q.device.type != "cuda":
        raise ValueError(f"q: on {q.device}; {what} needs a CUDA (Hopper) device")
    cap = torch.cuda.get_device_capability(q.device)
    if cap[0] != 9:
        raise ValueError(f"{what} needs compute capability 9.x (Hopper), {q.device} has {cap}")


def _tile_args(q, config: dict, causal, num_stages) -> tuple:
    """(D, BLOCK_M, BLOCK_N, num_stages) of a prepare_* call from its kernel's config (the
    head dim's entry; num_stages None: the entry's), after checking causal and num_stages
    (ValueError naming them). The rest of the inputs are check_inputs'."""
    d = q.shape[-1] if isinstance(q, torch.Tensor) and q.dim() == 4 else None
    block_m, block_n, stages = config.get(d, (64, 128, 2))
    num_stages = stages if num_stages is None else num_stages
    if not isinstance(causal, bool):
        raise ValueError(f"causal: expected a bool, got {causal!r}")
    if isinstance(num_stages, bool) or not isinstance(num_stages, int) or num_stages < 1:
        raise ValueError(f"num_stages: expected a positive int or None, got {num_stages!r}")
    return d, block_m, block_n, num_stages


def prepare_dkdv(q, k, v, dout, lse, delta, softmax_scale, causal: bool = False, *,
                 num_stages: int | None = None, vec_ptr: bool = True, overlap: bool = False):
    """Checks the call (ValueError, before any launch), allocates dk / dv (B, Nk, Hk, D)
    contiguous, makes the descriptors; returns launch(), which runs the kernel into them and
    returns (dk, dv). q / k / v / dout are read in place when forward_gluon.rows_view_ok
    allows the (B * N, heads * D) view (else copied once, here); lse / delta when contiguous
    (else copied). num_stages overrides DEFAULT_CONFIG's (A/B runs). vec_ptr: the kernel's
    VEC_PTR, lse / delta by pointer loads in the consumers (default) instead of 1-D TMA
    loads through the ring (the library's dK/dV kernel gave NaN in 0.1-3% of calls with
    1-D TMA loads of lse / delta, bench/NOTES.md "The dK/dV NaN"; kept for the A/B).
    overlap: the kernel's OVERLAP (non-causal only), each tile's dV / dK wgmmas left in
    flight under the next tile's S^T / dP^T; offline, ptxas serializes the wgmmas at D = 128
    ("insufficient register resources"), so it is meant for D = 64 (A/B)."""
    d, block_m, block_n, num_stages = _tile_args(q, DEFAULT_CONFIG, causal, num_stages)
    for name, flag in (("vec_ptr", vec_ptr), ("overlap", overlap)):
        if not isinstance(flag, bool):
            raise ValueError(f"{name}: expected a bool, got {flag!r}")
    if overlap and causal:
        raise ValueError("overlap=True: not implemented with causal=True")
    if causal and d == 128 and num_stages >= 3:
        # first GPU run (2026-12-01, test_causal_stages_gpu[3]): dk wrong (error 0.94 against
        # PyTorch's 0.011) at 3 stages, causal, D = 128; 1 and 2 stages right. Not routed
        # anywhere (the fused kernel, which supersedes it, refuses the same case): refused
        # rather than debugged
        raise ValueError(f"num_stages: {num_stages} stages with causal=True at D = 128 gave wrong dk on the H200 "
                         "(2026-12-01); use 1 or 2")
    if overlap and num_stages < 2:
        # tile g's stage is released only in tile g + 1, after its wait for tile g + 1's
        # stage: one stage would wait for itself
        raise ValueError(f"num_stages: overlap=True needs at least 2 stages, got {num_stages}")
    check_inputs(q, k, v, dout, lse, delta, softmax_scale, block_m, block_n)
    _check_device(q)
    dk, dv, grid, args, kwargs = _launch_args(q, k, v, dout, lse, delta, float(softmax_scale), causal, block_m,
                                              block_n, num_stages, vec_ptr, overlap)

    def launch():
        with torch.cuda.device(dk.device):
            attn_bwd_dkdv_gluon_kernel[grid](*args, **kwargs)
        return dk, dv
    return launch


def _launch_args(q, k, v, dout, lse, delta, scale: float, causal: bool, block_m: int, block_n: int,
                 num_stages: int, vec_ptr: bool, overlap: bool = False):
    """(dk, dv, grid, args, kwargs) of one launch, dk / dv allocated, no check and no
    launch (bench/gluon_bwd_compile.py --jit binds them through Triton's JIT path with a
    stub driver). args holds the (possibly copied) tensors behind the descriptors, so they
    live as long as the launch function."""
    b, nq, h, d = q.shape
    nk, hk = k.shape[1], k.shape[2]
    dk = memory.empty((b, nk, hk, d), k.dtype, k.device)             # NaN under memory.poison_outputs()
    dv = memory.empty((b, nk, hk, d), v.dtype, v.device)
    q, q_desc = _desc(q, block_m)
    dout, do_desc = _desc(dout, block_m)
    k, k_desc = _desc(k, block_n // 2)
    v, v_desc = _desc(v, block_n // 2)
    dk_view, dk_desc = _desc(dk, block_n // 2)
    dv_view, dv_desc = _desc(dv, block_n // 2)
    assert dk_view is dk and dv_view is dv, "dk / dv must be contiguous buffers"
    lse, lse_desc = _vec_desc(lse, block_m)
    delta, delta_desc = _vec_desc(delta, block_m)
    grid = (nk // block_n, b * hk)
    args = (q_desc, do_desc, k_desc, v_desc, dk_desc, dv_desc, lse_desc, delta_desc, lse, delta,
            nq, nk, h, hk, h // hk, scale, scale * LOG2E)
    kwargs = dict(HEAD_DIM=d, BLOCK_M=block_m, BLOCK_N=block_n, NUM_STAGES=num_stages, CAUSAL=causal,
                  VEC_PTR=vec_ptr, OVERLAP=overlap, num_warps=4)
    return dk, dv, grid, args, kwargs


def dkdv_gluon(q, k, v, dout, lse, delta, softmax_scale, causal: bool = False, *, num_stages: int | None = None,
               vec_ptr: bool = True, overlap: bool = False):
    """(dk, dv) of attention by attn_bwd_dkdv_gluon_kernel: prepare_dkdv(...)()."""
    return prepare_dkdv(q, k, v, dout, lse, delta, softmax_scale, causal, num_stages=num_stages, vec_ptr=vec_ptr,
                        overlap=overlap)()


def _layout_desc(x: torch.Tensor, rows: int, layout):
    """forward_gluon._desc with an explicit shared layout: x (B, N, heads, D) as the rows of
    a (B * N, heads * D) matrix (copied when forward_gluon.rows_view_ok fails), box (rows, D)."""
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    from .forward_gluon import _rows_view

    x, shape, strides = _rows_view(x)
    return x, TensorDescriptor(x, shape, strides, [rows, x.shape[-1]], layout)


def fused_smem_bytes(d: int, num_stages: int, block_m: int = 64, block_n: int = 128) -> int:
    """Shared memory of the fused kernel: K and V (BLOCK_N x D 16-bit each), the ring
    (NUM_STAGES x Q and dO, BLOCK_M x D 16-bit), the dS^T double buffer (2 x 2 halves x
    BLOCK_N / 2 x BLOCK_M 16-bit), the dq staging (2 WGs x BLOCK_M x D / 2 fp32), plus 1 KB
    (barriers, layout-conversion scratch; the offline compile reports 193 KB at D = 128 with
    2 stages, 225 KB with 3: ptxas then spills 40 bytes, 145 KB at D = 64 with 4)."""
    return (2 * block_n * d * 2 + num_stages * 2 * block_m * d * 2 + 4 * (block_n // 2) * block_m * 2
            + 2 * block_m * (d // 2) * 4 + 1024)


def fused_block_m(d: int, causal: bool, windowed: bool, dropout: bool, seqlen_q: int) -> bool:
    """Whether the library's fused route (fused_into) takes the WIDE tile (BLOCK_M = 128,
    kernels/bwd_gluon_fused.FUSED_WIDE_CONFIG): the head dim listed in
    policy.GLUON_BWD_FUSED_WIDE under the call's kind ("causal" / "plain"; never a window or
    dropout: not compiled or measured), and Nq a multiple of 128 (else the 64-row tile,
    which needs only 64). Since session 30 the table lists D = 64 for both kinds."""
    return policy.gluon_bwd_wide(d, causal, windowed, dropout, seqlen_q)


def fused_defer(d: int, causal: bool, windowed: bool, dropout: bool, wide: bool) -> bool:
    """Whether the library's fused route (fused_into) runs the kernel's DEFER_DQ (session 31:
    a tile's dQ one ring tile later, kernels/bwd_gluon_fused.py): the head dim listed in
    policy.GLUON_BWD_FUSED_DEFER["plain"], a non-causal call without window, dropout or the
    WIDE tile (the kernel compiles DEFER_DQ for the plain 64-row tile only). Empty table (the
    default): never."""
    if causal or windowed or dropout or wide:
        return False
    return d in policy.GLUON_BWD_FUSED_DEFER.get("plain", frozenset())


def fused_split_m(d: int, causal: bool, wide: bool) -> bool:
    """Whether the library's fused route (fused_into) runs the kernel's DQ_SPLIT_M (session 31:
    each WG's dQ a 64-row half of the WIDE tile over the whole D, kernels/bwd_gluon_fused.py):
    the WIDE tile (fused_block_m: no window, no dropout) and the head dim listed in
    policy.GLUON_BWD_FUSED_DQ_SPLIT_M under the call's kind ("causal" / "plain"); since session 31
    D = 64, both kinds."""
    if not wide:
        return False
    return d in policy.GLUON_BWD_FUSED_DQ_SPLIT_M.get("causal" if causal else "plain", frozenset())


def prepare_fused(q, k, v, dout, lse, delta, softmax_scale, causal: bool = False, *, num_stages: int | None = None,
                  rotate: bool = True, dropout_p: float = 0.0, keys: torch.Tensor | None = None, window=None,
                  wide: bool = False, defer_dq: bool = False, dq_split_m: bool = False, band: int = 0,
                  timeline: torch.Tensor | None = None, timeline_flags: int = 15):
    """The fused backward pass (kernels/bwd_gluon_fused.py's attn_bwd_fused_gluon_kernel):
    dq, dk, dv of attention in one kernel plus a cast. Checks the call (ValueError, before
    any launch: prepare_dkdv's contract), allocates dq (like q), dk / dv (like k, v,
    contiguous) and the fp32 accumulator dq_accum (B, Nq, H, D), makes the descriptors;
    returns launch(), which on every call zeroes dq_accum, runs the kernel (dk, dv written;
    dq_accum += softmax_scale * dS K by TMA reduce-add) and casts dq_accum into dq (a torch
    copy_: the scale is applied in the kernel), returning (dq, dk, dv). Repeated launches
    give the same dk / dv bitwise and dq up to fp32 summation order.

    NON-DETERMINISTIC: dq is the fp32 sum of Nk / 128 partial tiles per query tile added in
    whatever order the key blocks reach L2, so it may differ between runs in its last bits
    (dk / dv do not). For deterministic=False only.

    lse / delta as prepare_dkdv (the forward's natural-log lse, delta = rowsum(dO * O), e.g.
    delta_of). causal=True: the bottom-right mask (query i sees key j iff j <= i + Nk - Nq);
    query rows that see no key get dq = 0 (their tiles are never loaded, or add P = 0).
    num_stages: the Q / dO ring depth (FUSED_CONFIG's by default: 2 at D = 128, 4 at
    D = 64); ValueError where fused_smem_bytes exceeds 227 KB (D = 128: 4 stages; 3 fit,
    225 KB, but ptxas spills 40 bytes there; causal 392 and window 428: refused). rotate: the
    kernel's ROTATE (each key block starts its walk over the query tiles at a different
    tile, so the resident CTAs reduce into different rows of dq_accum; rotate=False for
    the A/B; no effect with causal=True). dq_accum is allocated here once and zeroed by
    every launch (its descriptor is made once).

    dropout_p > 0 (kernels/bwd_gluon_fused.py's DROPOUT, session 26): the backward of a
    dropout forward; keys its key table (launchers.common._dropout_keys(rng, H, B * Nq, Nk),
    the one the library's backward builds from the forward's rng state), delta = rowsum(dO
    * O) of the dropped output O. The kernel regenerates the library's mask from the table
    (kernels.common.dropout_keep_keys) and applies bwd_ws.py's dropout backward. Validated
    by check_dropout (ValueError before any launch).

    window: None or (left, right), flash-attn's sliding window (query i sees key j iff
    i + Nk - Nq - left <= j <= i + Nk - Nq + right, -1 unbounded; with causal=True the
    right edge is 0), reduced by forward_gluon.window_args ((-1, -1): the plain kernel,
    (-1, 0): CAUSAL, else WINDOW: only the band's query tiles are visited). WINDOW does
    not take dropout (ValueError) and ignores rotate. Rows that see no key get dq = 0.

    wide=True (the library's route at D = 64 since session 30; bench/gpu/s30_fused_bwd_d64_ab.py): the WIDE
    tile, FUSED_WIDE_CONFIG's (D = 64 only: BLOCK_M = 128 query rows a ring tile, 2 stages,
    the dq_accum descriptor at a 128-byte swizzle); Nq a multiple of 128; no dropout, no
    window (ValueError: not compiled or measured).

    defer_dq=True (a helper's, measured level in session 30, not routed; bench/gpu/s31_fused_bwd_d128_ab.py): the
    kernel's DEFER_DQ, each tile's dQ wgmmas and reduce one ring tile later (the two WGs no
    longer wait for each other's dS^T of the same tile, so they can run up to half a tile
    apart); the same values (dk / dv bitwise, dq up to fp32 summation order). Non-causal,
    no window, no dropout, not wide, FUSED_CONFIG's stage count (ValueError: causal spills
    registers offline, the others are not compiled).

    dq_split_m=True (the library's route at D = 64 since session 31, bench/gpu/s31_fused_bwd_dqm_ab.py): the
    kernel's DQ_SPLIT_M, with wide=True only (ValueError otherwise): each consumer WG computes
    and reduce-adds dQ for its 64 of the tile's 128 query rows over the whole D (m64n64k16
    wgmma steps) instead of all 128 rows for its D-half (m64n32k16); the dq_accum descriptor's
    box (64, D), 64-byte swizzle. The same values (dk / dv bitwise, dq up to fp32 summation
    order), causal or not.

    band > 0 (session 36, an A/B): the causal kernel's BAND launch order (kernels/bwd_gluon_fused.
    _fused_pids: every KV head's heaviest key block first across bands of `band` batch x KV
    heads); causal (no window) only, band dividing B * Hk. The same values (dk / dv bitwise, dq
    up to fp32 summation order).

    timeline (session 43 probe; bench/gpu/s43_bwd_timeline_probe.py): None, or an int64 CUDA tensor of at least
    fused_timeline_numel(...) elements (contiguous, zeroed by the caller) that the kernel's TIMELINE variant
    fills with %globaltimer stamps (kernels/bwd_gluon_fused.py, "TIMELINE": per-CTA rows, then per ring tile
    records), passed as the kernel's KEYS (unused without dropout); timeline_flags: TIMELINE's flags (1 the
    CTA-boundary stamps, 2 the per-tile stamps, 4 the dS^T hand-over wait, 8 the other waits; default all).
    Not with dropout or defer_dq (ValueError). The same values as without (dk / dv bitwise)."""
    if isinstance(band, bool) or not isinstance(band, int) or band < 0:
        raise ValueError(f"band: expected a non-negative int, got {band!r}")
    if timeline is not None:
        if isinstance(timeline_flags, bool) or not isinstance(timeline_flags, int) or not 1 <= timeline_flags <= 15:
            raise ValueError(f"timeline_flags: expected an int in 1..15, got {timeline_flags!r}")
        if not isinstance(timeline, torch.Tensor) or timeline.dtype != torch.int64 or not timeline.is_contiguous():
            raise ValueError("timeline: expected a contiguous int64 tensor")
        if dropout_p > 0 or defer_dq:
            raise ValueError("timeline: not with dropout (the buffer is passed as the key table's argument) or "
                             "defer_dq (its tile body is not stamped)")
    if not isinstance(dq_split_m, bool):
        raise ValueError(f"dq_split_m: expected a bool, got {dq_split_m!r}")
    if dq_split_m and wide is not True:
        raise ValueError("dq_split_m: the WIDE tile only (wide=True; the 64-row tile has no 64-row halves to split)")
    if not isinstance(defer_dq, bool):
        raise ValueError(f"defer_dq: expected a bool, got {defer_dq!r}")
    if defer_dq:
        if causal or window is not None:
            raise ValueError("defer_dq: the plain kernel only (causal / window: DEFER_DQ spills registers there "
                             "offline or is not compiled)")
        if dropout_p > 0:
            raise ValueError("defer_dq: takes no dropout (not compiled or measured)")
        if wide:
            raise ValueError("defer_dq: not with the WIDE tile (not compiled or measured)")
    if not isinstance(wide, bool):
        raise ValueError(f"wide: expected a bool, got {wide!r}")
    if wide:
        if q.dim() != 4 or q.shape[-1] not in FUSED_WIDE_CONFIG:
            raise ValueError(f"wide: the WIDE tile is compiled for head dims {sorted(FUSED_WIDE_CONFIG)} only, "
                             f"got q of shape {tuple(q.shape)}")
        if dropout_p > 0:
            raise ValueError("wide: the WIDE tile takes no dropout (not compiled or measured)")
    d, block_m, block_n, num_stages = _tile_args(q, FUSED_WIDE_CONFIG if wide else FUSED_CONFIG, causal, num_stages)
    if not isinstance(rotate, bool):
        raise ValueError(f"rotate: expected a bool, got {rotate!r}")
    check_inputs(q, k, v, dout, lse, delta, softmax_scale, block_m, block_n)
    check_dropout(q, k, dropout_p, keys)
    causal, win = _fused_window(window, causal, q.shape[1], k.shape[1])
    if wide and win is not None:
        raise ValueError("wide: the WIDE tile takes no sliding window (not compiled or measured)")
    if win is not None:
        rotate = False                                   # (the kernel ignores it under WINDOW)
        if dropout_p > 0:
            raise ValueError("window: the fused kernel's WINDOW variant takes no dropout (not compiled or measured)")
    if band and (not causal or win is not None):
        raise ValueError("band: the causal kernel only (key blocks of a plain or windowed call do equal work)")
    if band and (k.shape[0] * k.shape[2]) % band:
        raise ValueError(f"band: {band} does not divide B * Hk = {k.shape[0] * k.shape[2]}")
    need = fused_smem_bytes(d, num_stages, block_m, block_n)
    if need > 227 * 1024:
        raise ValueError(f"num_stages: {num_stages} stages need {need / 1024:.0f} KB of shared memory at D = {d}, "
                         "above the 227 KB of a block")
    if wide and num_stages >= 3:
        # (session 30, offline) 3 stages fit (225 KB) but spill 260 bytes, inside the tile loops
        raise ValueError(f"num_stages: {num_stages} stages with wide=True spill registers (offline compile); use 2")
    if causal and d == 128 and num_stages >= 3:
        # (review, session 24) it fits (225 KB) but ptxas spills 392 bytes a thread there:
        # an A/B would time a spilling kernel
        raise ValueError(f"num_stages: {num_stages} stages with causal=True at D = 128 spill registers "
                         "(offline compile, 2026-12-01); use 2")
    if win is not None and d == 128 and num_stages >= 3:
        # (session 28) WINDOW likewise: 428 spill bytes, 41 local accesses a tile in the loops
        raise ValueError(f"num_stages: {num_stages} stages with a window at D = 128 spill registers "
                         "(offline compile, 2026-12-01); use 2")
    if defer_dq and q.dim() == 4 and num_stages != FUSED_CONFIG[d][2]:
        raise ValueError(f"num_stages: defer_dq=True is compiled with FUSED_CONFIG's {FUSED_CONFIG[d][2]} stages at "
                         f"D = {d} only, got {num_stages}")
    if rotate and not causal:
        # (review, session 24) ROTATE's start tile (program_id(0) * n_m) // num_programs(0)
        # is int32 in the kernel: refuse the sizes where it would wrap
        n_m, n_kblocks = q.shape[1] // block_m, k.shape[1] // block_n
        if (n_kblocks - 1) * n_m >= 2 ** 31:
            raise ValueError(f"rotate: (Nk / {block_n} - 1) * (Nq / {block_m}) = {(n_kblocks - 1) * n_m} not below "
                             "2^31 (the kernel's int32 start tile); use rotate=False")
    _check_device(q, "fused_gluon")
    if timeline is not None:
        need = fused_timeline_numel(q.shape[0], q.shape[1], q.shape[2], k.shape[1], k.shape[2], block_m, block_n)
        if timeline.numel() < need or timeline.device != q.device:
            raise ValueError(f"timeline: needs at least {need} int64 elements on {q.device}, got {timeline.numel()} "
                             f"on {timeline.device}")
    dq, dk, dv, dq_accum, grid, args, kwargs = _fused_launch_args(q, k, v, dout, lse, delta, float(softmax_scale),
                                                                  block_m, block_n, num_stages, rotate, causal,
                                                                  dropout_p=float(dropout_p), keys=keys, win=win,
                                                                  defer=defer_dq, split_m=dq_split_m, band=band,
                                                                  timeline=timeline, timeline_flags=timeline_flags)

    def launch():
        _run_fused(dq, dk, dv, dq_accum, grid, args, kwargs)
        return dq, dk, dv
    return launch


def _run_fused(dq, dk, dv, dq_accum, grid, args, kwargs, replayable: bool = False, preprocess=None) -> None:
    """One fused backward: zero dq_accum, the kernel (dk, dv; dq_accum += scale * dS K),
    dq = dq_accum cast to q's dtype (the scale is applied in the kernel). replayable: the
    zero and the cast are Triton launches through plans.launch (kernels/dq_accum.py), so a
    launch plan can record and replay all three (the library's route since session 26,
    FUSED_REPLAYABLE: replays checked on the H200); else torch's zero_ / copy_ (session
    25's form).
    preprocess (session 29): None, or the call's delta preprocess as a function of one
    argument (launchers/backward.py's closure: preprocess(dq_accum) launches
    bwd_preprocess_kernel, with DQ_ACCUM=dq_accum when that is not None), run first. With
    replayable and FUSED_DQ_ZERO_IN_PREPROCESS it zeroes dq_accum too (3 launches: the
    preprocess, the kernel, the cast); otherwise preprocess(None), then as before (4: the
    preprocess, the zero, the kernel, the cast: the launches of before session 29, in their
    order). FUSED_DQ_CAST_REVERSE: the cast's REVERSE (replayable only)."""
    # (CPU tensors: the interpreted zero and cast of tests/test_bwd_gluon.py, the Gluon
    # kernel stubbed there)
    with torch.cuda.device(dk.device) if dk.is_cuda else contextlib.nullcontext():
        if not replayable:
            if preprocess is not None:
                preprocess(None)
            dq_accum.zero_()
            plans.launch(attn_bwd_fused_gluon_kernel, grid, *args, **kwargs)
            dq.copy_(dq_accum)
            return
        n = dq_accum.numel()
        small = (triton.cdiv(n, DQ_ACCUM_BLOCK),)
        if preprocess is not None and FUSED_DQ_ZERO_IN_PREPROCESS:
            preprocess(dq_accum)
        else:
            if preprocess is not None:
                preprocess(None)
            plans.launch(zero_f32_kernel, small, dq_accum, n, BLOCK=DQ_ACCUM_BLOCK, num_warps=4)
        plans.launch(attn_bwd_fused_gluon_kernel, grid, *args, **kwargs)
        plans.launch(cast_kernel, small, dq_accum, dq, n, BLOCK=DQ_ACCUM_BLOCK, num_warps=4,
                     **(dict(REVERSE=True) if FUSED_DQ_CAST_REVERSE else {}))


def _fused_window(window, causal: bool, seqlen_q: int, seqlen_k: int) -> tuple:
    """(causal, win) of a fused launch from the caller's causal and window (None or (left,
    right)): win = (win_left, win_right) for the WINDOW variant (an unbounded side as
    Nq + Nk), else None with causal telling the plain kernel from CAUSAL
    (forward_gluon.window_args' reduction; ValueError naming `window`)."""
    from .forward_gluon import window_args

    causal, windowed, wl, wr = window_args(window, causal, seqlen_q, seqlen_k)
    return causal, ((wl, wr) if windowed else None)


def fused_timeline_numel(b: int, nq: int, h: int, nk: int, hk: int, block_m: int, block_n: int = 128) -> int:
    """int64 elements of the TIMELINE buffer of a fused launch (kernels/bwd_gluon_fused.timeline_numel): the grid's
    Nk / block_n * B * Hk CTAs, at most (H / Hk) * Nq / block_m ring tiles each."""
    return timeline_numel(nk // block_n * b * hk, (h // hk) * (nq // block_m))


def _fused_launch_args(q, k, v, dout, lse, delta, scale: float, block_m: int, block_n: int, num_stages: int,
                       rotate: bool, causal: bool = False, outs=None, dropout_p: float = 0.0, keys=None, win=None,
                       defer: bool = False, split_m: bool = False, band: int = 0, timeline=None,
                       timeline_flags: int = 15):
    """(dq, dk, dv, dq_accum, grid, args, kwargs) of one fused launch, outputs allocated, no
    check and no launch (bench/gluon_bwd_compile.py --fused --jit binds them with a stub
    driver). K / dK use kernels/bwd_gluon_fused.k_layout (the dQ wgmma reads column halves
    of K; dK leaves through K's buffer), dq_accum dq_stage_layout(BLOCK_M) (fp32, 64-byte
    swizzle; 128-byte for the WIDE tile, BLOCK_M = 128; boxes (BLOCK_M, D / 2)). outs: (dq, dk, dv) to write into (contiguous, shaped like q,
    k, v), else allocated here. dropout_p > 0: DROPOUT with keys (the table),
    rng_rows = B * Nq and dropout_p as the kernel's arguments; else the three are None (Triton
    binds None as a constexpr: no kernel parameters, the kernel of before DROPOUT). win:
    (win_left, win_right) >= 0 (_fused_window) for WINDOW, else None (both None constexprs,
    the kernel of before WINDOW). defer: DEFER_DQ=True (session 31; absent otherwise: the
    binder's key and the kernel of before). split_m: DQ_SPLIT_M=True (session 31, the WIDE tile;
    absent otherwise), dq_accum's box (BLOCK_M / 2, D) at dq_stage_layout(BLOCK_M, True). band > 0:
    BAND=band (session 36, causal; absent otherwise) on a (Nk / BLOCK_N * B * Hk,) grid. timeline: the TIMELINE
    probe's int64 buffer (session 43), passed as KEYS (no dropout), TIMELINE=timeline_flags (absent otherwise)."""
    b, nq, h, d = q.shape
    nk, hk = k.shape[1], k.shape[2]
    if outs is None:
        dq = memory.empty((b, nq, h, d), q.dtype, q.device)              # NaN under memory.poison_outputs()
        dk = memory.empty((b, nk, hk, d), k.dtype, k.device)
        dv = memory.empty((b, nk, hk, d), v.dtype, v.device)
    else:
        dq, dk, dv = outs
    # zeroed by every launch; allocated through memory so that a launch plan knows it (a
    # slot of the plan, allocated again by each replay)
    dq_accum = memory.empty((b, nq, h, d), torch.float32, q.device)
    klay = k_layout(d)
    q, q_desc = _desc(q, block_m)
    dout, do_desc = _desc(dout, block_m)
    k, k_desc = _layout_desc(k, block_n // 2, klay)
    v, v_desc = _desc(v, block_n // 2)
    dk_view, dk_desc = _layout_desc(dk, block_n // 2, klay)
    dv_view, dv_desc = _desc(dv, block_n // 2)
    assert dk_view is dk and dv_view is dv, "dk / dv must be contiguous buffers"
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    # over dq_accum itself (a descriptor reads only its base's address), not a view of it:
    # a plan rebinds descriptors whose base is an input or an allocation of the call
    if split_m:
        dq_desc = TensorDescriptor(dq_accum, [b * nq, h * d], [h * d, 1], [block_m // 2, d],
                                   dq_stage_layout(block_m, True))
    else:
        dq_desc = TensorDescriptor(dq_accum, [b * nq, h * d], [h * d, 1], [block_m, d // 2], dq_stage_layout(block_m))
    lse = lse.contiguous()
    delta = delta.contiguous()
    grid = (nk // block_n * b * hk,) if band else (nk // block_n, b * hk)
    drop = dropout_p > 0
    args = (q_desc, do_desc, k_desc, v_desc, dk_desc, dv_desc, dq_desc, lse, delta,
            nq, nk, h, hk, h // hk, scale, scale * LOG2E,
            keys if drop else timeline, b * nq if drop else None, float(dropout_p) if drop else None,
            *(win if win is not None else (None, None)))
    kwargs = dict(HEAD_DIM=d, BLOCK_M=block_m, BLOCK_N=block_n, NUM_STAGES=num_stages, CAUSAL=causal, ROTATE=rotate,
                  DROPOUT=drop, num_warps=4)
    if win is not None:
        kwargs["WINDOW"] = True          # (absent otherwise: the binder's key of before WINDOW)
    if defer:
        kwargs["DEFER_DQ"] = True        # (likewise)
    if split_m:
        kwargs["DQ_SPLIT_M"] = True      # (likewise)
    if band:
        kwargs["BAND"] = band            # (likewise)
    if timeline is not None:
        assert not drop and not defer, "timeline: not with dropout or defer"
        kwargs["TIMELINE"] = timeline_flags   # (likewise; the buffer rides in KEYS' place)
    return dq, dk, dv, dq_accum, grid, args, kwargs


# Whether launch plans may replay the fused backward (its zero, kernel and cast all go
# through plans.launch, its descriptors' bases are inputs or allocations of the call:
# tests/test_bwd_gluon.py::test_fused_launches_replayable checks the plan on CPU tensors).
# Session 26 (H200, bench/gpu/s26_fused_replay_check.py, s26/call1): replayed gradients
# against fresh launches, 3 calls a case, dk / dv bitwise, dq within fp32 summation order;
# eager backward at causal 1k (B = 16, H = 16) 1115 -> 562 us a call (host-bound before),
# plain 4k and causal 2k level (1371 / 1382, 870 / 885 us).
FUSED_REPLAYABLE = True


def _fused_dq_flags(raw) -> tuple:
    """(zero in the preprocess, reverse cast) from FLASHTRITON_FUSED_DQ's value: None / "" /
    "0" neither; a comma-separated list of "pre" and "rev" (ValueError naming the variable
    otherwise)."""
    words = set() if raw in (None, "", "0") else {w.strip() for w in raw.split(",")}
    bad = words - {"pre", "rev"}
    if bad:
        raise ValueError(f"FLASHTRITON_FUSED_DQ: {raw!r}; expected a comma-separated list of 'pre' (zero dq_accum "
                         "in the delta preprocess) and 'rev' (the cast in reverse block order), or 0")
    return "pre" in words, "rev" in words


# Session 29 (written offline, measured on the H200 the same day: bench/gpu/s29_fused_dq_accum_ab.py):
# the launches around the fused kernel (the H200 profile of session 28 at 16k tokens, H = 16,
# D = 128: cast 52, preprocess 38, zero 30 us: 10-14% of the backward at N = 1k).
#   FUSED_DQ_ZERO_IN_PREPROCESS: the delta preprocess zeroes dq_accum (bwd_preprocess_kernel's
#     DQ_ACCUM) and zero_f32_kernel's launch goes: one pass over memory ordered with the reads
#     of O / dO instead of a launch of its own (its launch gap and tail).
#   FUSED_DQ_CAST_REVERSE: cast_kernel's REVERSE (the L2-resident end of dq_accum first).
# Both exact (delta, dq, dk, dv the same values; dq up to the kernel's own summation order).
# Measured level (H200, 2026-12-01, s29/call2: 16 shapes, two rounds, within +-3% either
# way; the preprocess grew 38 -> 70 us for the 31 us zero launch removed): off, kept as
# tested options; FLASHTRITON_FUSED_DQ=pre,rev sets both at import. Plans key
# on the call, not on these: after changing them, plans.clear() (the A/B does).
FUSED_DQ_ZERO_IN_PREPROCESS, FUSED_DQ_CAST_REVERSE = _fused_dq_flags(os.environ.get("FLASHTRITON_FUSED_DQ"))


def fused_into(q, k, v, dout, lse, delta, softmax_scale, causal: bool, dq, dk, dv, dropout_p: float = 0.0,
               keys=None, window=None, preprocess=None) -> None:
    """The library's route (launchers.backward, where policy.gluon_bwd_fused accepts the
    call: deterministic=False): the fused backward at FUSED_CONFIG's tile (FUSED_WIDE_CONFIG's
    where fused_block_m says so: policy.GLUON_BWD_FUSED_WIDE, D = 64 since session 30), ROTATE on (off
    under causal), into dq, dk, dv (contiguous, shaped like q, k, v). delta from the
    library's preprocess. Replayable by a launch plan only when FUSED_REPLAYABLE. dropout_p > 0:
    keys the call's table (launchers.backward's rng_arg); routed only where
    policy.GLUON_BWD_FUSED_DROPOUT allows it. window: (left, right) of a windowed call
    (policy.gluon_kind "window", routed by GLUON_BWD_FUSED_MIN_N["window"]): the WINDOW
    variant (_fused_window), ROTATE off; None: plain / CAUSAL by causal, as before.
    preprocess: None (delta written by the caller before), or the caller's delta preprocess
    as _run_fused takes it (launchers/backward.py's fused route, session 29: run here,
    first, so that it may zero dq_accum as well: FUSED_DQ_ZERO_IN_PREPROCESS). The causal kernel
    (no window, no dropout) takes BAND where policy.fused_band gives one (GLUON_BWD_FUSED_BAND by head dim)."""
    if preprocess is not None and not delta.is_contiguous():
        # (the kernel's arguments hold delta.contiguous(), made before the preprocess runs)
        raise ValueError(f"delta: strides {delta.stride()}, not contiguous (preprocess= writes it after the "
                         "launch arguments are made)")
    if not FUSED_REPLAYABLE:
        plans.unreplayable()
    win = None
    if window is not None:
        causal, win = _fused_window(window, causal, q.shape[1], k.shape[1])
    # the WIDE tile where policy.GLUON_BWD_FUSED_WIDE lists the call (empty: never)
    wide = fused_block_m(q.shape[-1], causal, win is not None, dropout_p > 0, q.shape[1])
    block_m, block_n, stages = (FUSED_WIDE_CONFIG if wide else FUSED_CONFIG)[q.shape[-1]]
    # DEFER_DQ where policy.GLUON_BWD_FUSED_DEFER lists the call (empty: never)
    defer = fused_defer(q.shape[-1], causal, win is not None, dropout_p > 0, wide)
    # DQ_SPLIT_M where policy.GLUON_BWD_FUSED_DQ_SPLIT_M lists the call (empty: never)
    split_m = fused_split_m(q.shape[-1], causal, wide)
    # BAND where policy.GLUON_BWD_FUSED_BAND lists the head dim (empty: never); causal, no dropout
    band = policy.fused_band(q.shape[-1], k.shape[1] // block_n, k.shape[0] * k.shape[2]) \
        if causal and win is None and dropout_p == 0 else 0
    dq, dk, dv, dq_accum, grid, args, kwargs = _fused_launch_args(
        q, k, v, dout, lse, delta, float(softmax_scale), block_m, block_n, stages, not causal and win is None, causal,
        outs=(dq, dk, dv), dropout_p=float(dropout_p), keys=keys if dropout_p > 0 else None, win=win, defer=defer,
        split_m=split_m, band=band)
    _run_fused(dq, dk, dv, dq_accum, grid, args, kwargs, replayable=FUSED_REPLAYABLE, preprocess=preprocess)


def fused_gluon(q, k, v, dout, lse, delta, softmax_scale, causal: bool = False, *, num_stages: int | None = None,
                rotate: bool = True, dropout_p: float = 0.0, keys: torch.Tensor | None = None, window=None,
                wide: bool = False, defer_dq: bool = False, dq_split_m: bool = False, band: int = 0):
    """(dq, dk, dv) of attention by the fused kernel: prepare_fused(...)(). Non-deterministic dq."""
    return prepare_fused(q, k, v, dout, lse, delta, softmax_scale, causal, num_stages=num_stages, rotate=rotate,
                         dropout_p=dropout_p, keys=keys, window=window, wide=wide, defer_dq=defer_dq,
                         dq_split_m=dq_split_m, band=band)()


def delta_of(out: torch.Tensor, dout: torch.Tensor) -> torch.Tensor:
    """delta = rowsum(dO * O) in fp32, (B, H, Nq) contiguous, by the library's preprocess
    kernel (kernels/bwd.py's bwd_preprocess_kernel, launched as launchers/backward.py's
    _bwd does for a dense call). out, dout (B, Nq, H, D) on a GPU."""
    for name, t in (("out", out), ("dout", dout)):
        _check_tensor(name, t, 4, "(B, N, heads, D)")
    if out.shape != dout.shape:
        raise ValueError(f"out, dout: shapes differ ({tuple(out.shape)}, {tuple(dout.shape)})")
    out, dout = (t if t.stride(3) == 1 else t.contiguous() for t in (out, dout))   # (the kernel's unit-D rows)
    b, nq, h, d = out.shape
    delta = torch.empty((b, h, nq), dtype=torch.float32, device=out.device)
    block_m = 64
    with torch.cuda.device(out.device):
        bwd_preprocess_kernel[(b * h, triton.cdiv(nq, block_m))](
            out, dout, delta, delta, out.stride(0), out.stride(1), out.stride(2),
            dout.stride(0), dout.stride(1), dout.stride(2), delta.stride(0), delta.stride(1), h, nq,
            HEAD_DIM=d, BLOCK_D=block_d(d), BLOCK_M=block_m, IS_VARLEN=False)
    return delta
