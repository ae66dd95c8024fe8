"""Host side of kernels/bwd_gluon_d256.py (the fused Gluon backward at head dim 256: dK / dV and
dQ in one kernel, dQ reduce-added in fp32 by TMA; written by a session-32 helper): validation of its
narrow contract, descriptors, grid, launch. Routed since session 32 (after bench/gpu/
s32_gluon_bwd_d256_ab.py, s32/callC / callF): launchers/backward.py calls bwd_into where
policy.gluon_bwd_d256 accepts the call (deterministic=False, plain and causal from 512:
policy.GLUON_BWD_D256_MIN_N).

    prepare(q, k, v, dout, lse, delta, softmax_scale, causal=False, *, rotate=True, num_stages=None,
            dq_atomic=False)
        checks the call (ValueError naming the argument and the rule, before any launch),
        allocates dq / dk / dv and the fp32 accumulator dq_accum, makes the descriptors; returns
        launch(), which zeroes dq_accum, runs the kernel, casts dq_accum into dq and returns
        (dq, dk, dv) (again into the same buffers on every call).
    attention_bwd_d256(...)   prepare(...)()
    bwd_into(q, k, v, dout, lse, delta, softmax_scale, causal, dq, dk, dv, preprocess=None, dq_atomic=False)
        the form a route would call (backward_gluon.fused_into's): into the caller's dq / dk / dv,
        the zero, kernel and cast through plans.launch (a launch plan can record and replay them),
        preprocess (the caller's delta preprocess, launchers/backward.py's closure) run first.
        Validates as prepare does (the route has its own rule; this costs a few us of host time).

Conventions (launchers/backward_gluon.py's): q, dout (B, Nq, H, D = 256); k, v (B, Nk, Hk, 256),
H % Hk == 0 (GQA: query head h on KV head h // (H / Hk), dK / dV summed over the group in the
kernel); lse (B, H, Nq) fp32, the forward's natural-log logsumexp of the scaled scores (+inf for a
row that sees no key); delta (B, H, Nq) fp32 = rowsum(dO * O) (backward_gluon.delta_of, or the
library's preprocess); dk / dv like k / v (contiguous), dK already multiplied by softmax_scale.
causal=True: the bottom-right mask (query i sees key j iff j <= i + Nk - Nq). Nq and Nk multiples
of 64 (BLOCK_M = BLOCK_N = 64; other lengths: ValueError, the Triton route takes them).
NON-DETERMINISTIC dq (fp32 partial tiles reduce-added in whatever order the key blocks reach L2);
dk / dv deterministic. For deterministic=False only.

split_dq=True (session 33, issue 4; prepare / attention_bwd_d256 / bwd_into; not routed:
policy.GLUON_BWD_D256_SPLIT_DQ is empty): FlashAttention-2's split. The kernel runs with DKDV_ONLY
(dK / dV only: no dQ wgmmas, no staging, no reduce; two P^T / dS^T buffers), then the Gluon dQ
kernel (kernels/bwd_gluon_dq.py at D = 256: 128 query rows a CTA, two consumer warpgroups of 64
rows, 32-key K / V tiles through 3 / 3 stages) writes dq in q's dtype directly: no dq_accum, no
zero, no cast, no atomics. DETERMINISTIC (every output written once by one CTA in a fixed order):
it could serve deterministic=True calls too (today bwd_ws.py / bwd.py at D = 256). dk / dv are
bitwise the fused kernel's (the same arithmetic and order in WG_0 / WG_1). Extra rule: Nq a
multiple of 128 (the dQ kernel's BLOCK_M; ValueError otherwise). dq_tile: (BLOCK_N, K_STAGES,
V_STAGES, V_EARLY) of the dQ kernel, None for its default_config (the A/B's alternatives).

Gluon kernels have no interpreted form (Triton 3.6.0): nothing here launches under
TRITON_INTERPRET; _launch_args (no launch) works on CPU tensors (tests, and
bench/d256_bwd_gluon_compile.py's JIT rows through a stub driver).
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch
import triton
from triton.experimental.gluon import language as gl

from .. import memory
from . import plans
from ..kernels.bwd_gluon_d256 import D256_CONFIG, attn_bwd_d256_gluon_kernel
from ..kernels.bwd_gluon_dq import default_config as dq_default_config
from ..kernels.bwd_gluon_fused import dq_stage_layout
from ..kernels.dq_accum import BLOCK as DQ_ACCUM_BLOCK
from ..kernels.dq_accum import cast_kernel, zero_f32_kernel
from .backward_gluon import _check_device
from .backward_gluon import check_inputs as check_bwd_inputs
from .common import LOG2E
from .forward_gluon import _DTYPES, _desc

__all__ = ["check_inputs", "smem_bytes", "prepare", "attention_bwd_d256", "bwd_into", "HEAD_DIM", "SMEM_LIMIT"]

HEAD_DIM = 256
# shared memory of a block on the H100 / H200 (227 KB; cudaDevAttrMaxSharedMemoryPerBlockOptin)
SMEM_LIMIT = 232448


def smem_bytes(num_stages: int, block_m: int = 64, block_n: int = 64, d: int = HEAD_DIM) -> int:
    """Shared memory of the kernel: K and V (BLOCK_N x D 16-bit each), the ring (NUM_STAGES x Q and
    dO, BLOCK_M x D 16-bit), P^T and dS^T (BLOCK_N x BLOCK_M 16-bit each), the dq staging
    (BLOCK_M x 64 fp32), plus 1 KB (barriers, layout-conversion scratch; the offline compile
    reports 229,752 B at 2 stages: this gives 230,400; DQ_ATOMIC's second P^T / dS^T
    buffer takes the staging's 16 KB: the same)."""
    return 2 * block_n * d * 2 + num_stages * 2 * block_m * d * 2 + 2 * block_n * block_m * 2 + block_m * 64 * 4 \
        + 1024


def check_inputs(q, k, v, dout, lse, delta, softmax_scale, causal, rotate, num_stages, dq_atomic=False,
                 split_dq=False, dq_tile=None, dq_band=0) -> tuple:
    """The kernel's narrow contract; ValueError naming the argument and the rule. Needs no GPU
    (shapes, dtypes, devices and flags only). Returns (B, Nq, H, Nk, Hk, num_stages)."""
    block_m, block_n, stages = D256_CONFIG
    # (tensors, dtypes, devices, shapes, the tile multiples, the grid and int32 bounds, the scale:
    # the D = 64 / 128 Gluon backward's contract, at head dim 256)
    b, nq, h, d, nk, hk = check_bwd_inputs(q, k, v, dout, lse, delta, softmax_scale, block_m, block_n,
                                           head_dims=(HEAD_DIM,))
    if not isinstance(causal, bool):
        raise ValueError(f"causal: expected a bool, got {causal!r}")
    if not isinstance(rotate, bool):
        raise ValueError(f"rotate: expected a bool, got {rotate!r}")
    num_stages = stages if num_stages is None else num_stages
    if isinstance(num_stages, bool) or not isinstance(num_stages, int) or num_stages < 1:
        raise ValueError(f"num_stages: expected a positive int or None, got {num_stages!r}")
    need = smem_bytes(num_stages)
    if need > SMEM_LIMIT:
        raise ValueError(f"num_stages: {num_stages} stages need {need / 1024:.0f} KB of shared memory at D = 256, "
                         "above the 227 KB of a block")
    if not isinstance(dq_atomic, bool):
        raise ValueError(f"dq_atomic: expected a bool, got {dq_atomic!r}")
    if dq_atomic and b * nq * h * d >= 2 ** 31:
        raise ValueError(f"dq_atomic: B * Nq * H * D = {b * nq * h * d} elements of dq_accum not below 2^31 (the "
                         "red.global.add path's int32 offsets); use dq_atomic=False")
    if not isinstance(split_dq, bool):
        raise ValueError(f"split_dq: expected a bool, got {split_dq!r}")
    if split_dq and dq_atomic:
        raise ValueError("dq_atomic: the split path (split_dq=True) computes dq in its own kernel; not both")
    if dq_tile is not None and not split_dq:
        raise ValueError("dq_tile: only with split_dq=True")
    if isinstance(dq_band, bool) or not isinstance(dq_band, int) or dq_band < 0:
        raise ValueError(f"dq_band: expected a non-negative int, got {dq_band!r}")
    if dq_band and not split_dq:
        raise ValueError("dq_band: only with split_dq=True")
    if dq_band and (b * h) % dq_band:
        raise ValueError(f"dq_band: {dq_band} does not divide B * H = {b * h} (the dQ kernel's BAND order)")
    if split_dq:
        from .backward_gluon_dq import check_dq_inputs
        dq_bm, dq_bn, dq_ks, dq_vs, dq_ve = _dq_tile(causal, dq_tile)
        if nq % dq_bm != 0:
            raise ValueError(f"q: sequence length {nq} not a multiple of {dq_bm} (split_dq: the dQ kernel's query "
                             "block)")
        check_dq_inputs(q, k, v, dout, lse, delta, softmax_scale, causal, dq_bm, dq_bn, dq_ks, dq_vs)
    if rotate and not causal and (nk // block_n - 1) * (nq // block_m) >= 2 ** 31:
        # ROTATE's start tile (program_id(0) * n_m) // num_programs(0) is int32 in the kernel
        raise ValueError(f"rotate: (Nk / {block_n} - 1) * (Nq / {block_m}) = {(nk // block_n - 1) * (nq // block_m)} "
                         "not below 2^31 (the kernel's int32 start tile); use rotate=False")
    return b, nq, h, nk, hk, num_stages


def _dq_tile(causal: bool, dq_tile=None) -> tuple:
    """(BLOCK_M, BLOCK_N, K_STAGES, V_STAGES, V_EARLY) of the split path's dQ kernel at D = 256:
    kernels/bwd_gluon_dq.default_config's, or dq_tile = (BLOCK_N, K_STAGES, V_STAGES, V_EARLY)."""
    bm, bn, ks, vs = dq_default_config(HEAD_DIM, causal)
    if dq_tile is None:
        return bm, bn, ks, vs, False
    if not (isinstance(dq_tile, tuple) and len(dq_tile) == 4 and dq_tile[0] in (32, 64)
            and all(isinstance(x, int) and not isinstance(x, bool) for x in dq_tile[:3])
            and isinstance(dq_tile[3], bool)):
        raise ValueError(f"dq_tile: expected (BLOCK_N in (32, 64), K_STAGES, V_STAGES, V_EARLY: bool), got {dq_tile!r}")
    return (bm, *dq_tile)


@dataclass
class LaunchArgs:
    """One launch, outputs allocated (or the caller's), no check and no launch: dq / dk / dv,
    the fp32 accumulator dq_accum (B, Nq, H, D), the grid, the kernel's args and kwargs (args
    hold the possibly copied tensors behind the descriptors, so they live as long as this)."""
    dq: torch.Tensor
    dk: torch.Tensor
    dv: torch.Tensor
    dq_accum: torch.Tensor
    grid: tuple
    args: tuple
    kwargs: dict
    dq_launch: object = None   # split_dq: the dQ kernel's launch (backward_gluon_dq._launch), after this kernel


def _layout_desc(x: torch.Tensor, rows: int, cols: int):
    """A descriptor over the contiguous x (B, N, heads, D) as the (B * N, heads * D) matrix, box
    (rows, cols), the 16-bit default layout of that box (dK / dV: (64, 128), 128-byte swizzle,
    the layout of K / V's (64, 256) tiles they leave through)."""
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    b, n, heads, d = x.shape
    layout = gl.NVMMASharedLayout.get_default_for([rows, cols], _DTYPES[x.dtype])
    return TensorDescriptor(x, [b * n, heads * d], [heads * d, 1], [rows, cols], layout)


def _launch_args(q, k, v, dout, lse, delta, scale: float, causal: bool, rotate: bool, num_stages: int,
                 outs=None, dq_atomic: bool = False, split_dq: bool = False, dq_tile=None,
                 dq_band: int = 0) -> LaunchArgs:
    """LaunchArgs of one launch (tests and bench/d256_bwd_gluon_compile.py's JIT rows call it on CPU
    tensors). outs: (dq, dk, dv) to write into (contiguous, shaped like q, k, v), else allocated.
    dq_atomic: the kernel's DQ_ATOMIC (dQ by red.global.add.v2.f32 from the registers into
    dq_accum, the kernel's DQ argument; the dq_desc is then unread)."""
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    b, nq, h, d = q.shape
    nk, hk = k.shape[1], k.shape[2]
    block_m, block_n, _ = D256_CONFIG
    if outs is None:
        dq = memory.empty((b, nq, h, d), q.dtype, q.device)              # NaN under memory.poison_outputs()
        dk = memory.empty((b, nk, hk, d), k.dtype, k.device)
        dv = memory.empty((b, nk, hk, d), v.dtype, v.device)
    else:
        dq, dk, dv = outs
    dq_launch = None
    if split_dq:
        # the dQ kernel's launch (its descriptors over the caller's q / k / v / dout / dq), made first,
        # from the original tensors; dq_accum is only a (64, 64) stand-in behind the unread dq_desc
        from .backward_gluon_dq import _launch as dq_launch_of
        dq_bm, dq_bn, dq_ks, dq_vs, dq_ve = _dq_tile(causal, dq_tile)
        dq_launch = dq_launch_of(q, k, v, dout, lse, delta, dq, scale, causal, dq_bm, dq_bn, dq_ks, dq_vs,
                                 v_early=dq_ve, band=dq_band)
        dq_accum = memory.empty((block_m, 64), torch.float32, q.device)
    else:
        # zeroed by every launch; through memory so that a launch plan knows it
        dq_accum = memory.empty((b, nq, h, d), torch.float32, q.device)
    q, q_desc = _desc(q, block_m)                                        # box (64, 256)
    dout, do_desc = _desc(dout, block_m)
    k, k_desc = _desc(k, block_n)                                        # box (64, 256)
    v, v_desc = _desc(v, block_n)
    dk_desc = _layout_desc(dk, block_n, d // 2)                          # box (64, 128): a WG's D-half
    dv_desc = _layout_desc(dv, block_n, d // 2)
    # dq_accum (B * Nq, H * D) fp32, box (64, 64) at a 64-byte swizzle (the kernel's staging; the
    # compiled kernel's TMA box is (64, 16): 4 messages a reduce), over dq_accum itself (a plan
    # rebinds descriptors whose base is an input or an allocation of the call)
    dq_desc = TensorDescriptor(dq_accum, [dq_accum.shape[0] if split_dq else b * nq, 64 if split_dq else h * d],
                               [64 if split_dq else h * d, 1], [block_m, 64], dq_stage_layout(block_m))
    lse = lse.contiguous()
    delta = delta.contiguous()
    grid = (nk // block_n, b * hk)
    args = (q_desc, do_desc, k_desc, v_desc, dk_desc, dv_desc, dq_desc, dq_accum, lse, delta,
            nq, nk, h, hk, h // hk, scale, scale * LOG2E)
    kwargs = dict(HEAD_DIM=d, BLOCK_M=block_m, BLOCK_N=block_n, NUM_STAGES=num_stages, CAUSAL=causal,
                  ROTATE=rotate and not causal, DQ_ATOMIC=dq_atomic, num_warps=4)
    if split_dq:
        kwargs["DKDV_ONLY"] = True           # (absent otherwise: the routed launch's kwargs as before)
    return LaunchArgs(dq, dk, dv, dq_accum, grid, args, kwargs, dq_launch)


def _run(la: LaunchArgs, preprocess=None) -> None:
    """One backward: preprocess (if any; the caller's delta), zero dq_accum, the kernel (dk, dv;
    dq_accum += dS K, dS carrying softmax_scale), dq = dq_accum cast to q's dtype. All three
    through plans.launch (kernels/dq_accum.py's zero and cast: replayable, as the fused route)."""
    with torch.cuda.device(la.dk.device) if la.dk.is_cuda else contextlib.nullcontext():
        if preprocess is not None:
            preprocess(None)
        if la.dq_launch is not None:
            # split_dq: dK / dV (DKDV_ONLY), then the dQ kernel writes dq itself (no zero, no cast)
            plans.launch(attn_bwd_d256_gluon_kernel, la.grid, *la.args, **la.kwargs)
            la.dq_launch()
            return
        n = la.dq_accum.numel()
        small = (triton.cdiv(n, DQ_ACCUM_BLOCK),)
        plans.launch(zero_f32_kernel, small, la.dq_accum, n, BLOCK=DQ_ACCUM_BLOCK, num_warps=4)
        plans.launch(attn_bwd_d256_gluon_kernel, la.grid, *la.args, **la.kwargs)
        plans.launch(cast_kernel, small, la.dq_accum, la.dq, n, BLOCK=DQ_ACCUM_BLOCK, num_warps=4)


def prepare(q, k, v, dout, lse, delta, softmax_scale, causal: bool = False, *, rotate: bool = True,
            num_stages: int | None = None, dq_atomic: bool = False, split_dq: bool = False, dq_tile=None,
            dq_band: int = 0):
    """Checks the call (ValueError, before any launch), allocates dq (like q), dk / dv (like k, v,
    contiguous) and dq_accum (B, Nq, H, 256) fp32, makes the descriptors; returns launch(), which
    on every call zeroes dq_accum, runs the kernel and casts dq_accum into dq, returning (dq, dk,
    dv). Repeated launches give the same dk / dv bitwise and dq up to fp32 summation order.
    rotate: the kernel's ROTATE (non-causal; rotate=False for an A/B). num_stages: the Q / dO ring
    depth (2, D256_CONFIG's, by default; 1 fits too; 3 does not: ValueError). dq_atomic: the kernel's
    DQ_ATOMIC, the design note's V2 for the A/B (dQ added from the registers by red.global.add.v2.f32
    in 128-column chunks, P^T / dS^T double-buffered, no staging); the same values up to fp32
    summation order. split_dq / dq_tile: the split path (module doc): dk / dv bitwise the fused
    kernel's, dq from the dQ kernel (deterministic). dq_band: the dQ kernel's BAND launch order
    (kernels/bwd_gluon_dq.py; 0: its (Nq / 128, B * H) grid; a band divides B * H); dq bitwise the same."""
    _, _, _, _, _, num_stages = check_inputs(q, k, v, dout, lse, delta, softmax_scale, causal, rotate, num_stages,
                                             dq_atomic, split_dq, dq_tile, dq_band)
    _check_device(q, "bwd_gluon_d256")
    la = _launch_args(q, k, v, dout, lse, delta, float(softmax_scale), causal, rotate, num_stages,
                      dq_atomic=dq_atomic, split_dq=split_dq, dq_tile=dq_tile, dq_band=dq_band)

    def launch():
        _run(la)
        return la.dq, la.dk, la.dv
    return launch


def attention_bwd_d256(q, k, v, dout, lse, delta, softmax_scale, causal: bool = False, *, rotate: bool = True,
                       num_stages: int | None = None, dq_atomic: bool = False, split_dq: bool = False,
                       dq_tile=None, dq_band: int = 0):
    """(dq, dk, dv) of attention by attn_bwd_d256_gluon_kernel: prepare(...)(). Non-deterministic dq
    (split_dq=True: deterministic)."""
    return prepare(q, k, v, dout, lse, delta, softmax_scale, causal, rotate=rotate, num_stages=num_stages,
                   dq_atomic=dq_atomic, split_dq=split_dq, dq_tile=dq_tile, dq_band=dq_band)()


def bwd_into(q, k, v, dout, lse, delta, softmax_scale, causal: bool, dq, dk, dv, preprocess=None,
             dq_atomic: bool = False, split_dq: bool = False, dq_tile=None, dq_band: int = 0) -> None:
    """The route's form (backward_gluon.fused_into's): the kernel at D256_CONFIG, ROTATE on (off
    under causal), into dq, dk, dv (contiguous, shaped like q, k, v). preprocess: None (delta
    written by the caller before), or the caller's delta preprocess as a function of one argument
    (called with None, first). Validates as prepare (ValueError before any launch). dq_atomic: as
    prepare's (V2; for the A/B). split_dq / dq_tile: the split path (module doc; delta -> dK / dV
    kernel (DKDV_ONLY) -> dQ kernel into dq; deterministic). dq_band: as prepare's."""
    check_inputs(q, k, v, dout, lse, delta, softmax_scale, causal, True, None, dq_atomic, split_dq, dq_tile,
                 dq_band)
    for name, t, like_name, like in (("dq", dq, "q", q), ("dk", dk, "k", k), ("dv", dv, "v", v)):
        if not isinstance(t, torch.Tensor) or t.shape != like.shape or t.dtype != like.dtype \
                or t.device != like.device or not t.is_contiguous():
            raise ValueError(f"{name}: expected a contiguous tensor of {like_name}'s shape, dtype and device")
    if preprocess is not None and not delta.is_contiguous():
        # (the kernel's arguments hold delta.contiguous(), made before the preprocess runs)
        raise ValueError(f"delta: strides {delta.stride()}, not contiguous (preprocess= writes it after the "
                         "launch arguments are made)")
    _check_device(q, "bwd_gluon_d256")
    la = _launch_args(q, k, v, dout, lse, delta, float(softmax_scale), causal, True, D256_CONFIG[2],
                      outs=(dq, dk, dv), dq_atomic=dq_atomic, split_dq=split_dq, dq_tile=dq_tile,
                      dq_band=dq_band)
    _run(la, preprocess)
