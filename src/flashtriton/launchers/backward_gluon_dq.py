"""Host side of kernels/bwd_gluon_dq.py (the hand-scheduled Gluon dQ kernel for Hopper):
validation of its narrow contract, descriptors, grid, launch. Not routed into the
library (2026-12-01: written and compiled offline; bench/gpu/s25_gluon_dq_ab.py times it
against the library's dQ kernel).

    prepare_dq(q, k, v, dout, lse, delta, softmax_scale, causal=False)
        checks (ValueError naming the argument and the rule, before any launch),
        allocates dq, makes the descriptors; returns launch(), which runs the kernel
        (again, into the same dq) and returns dq
    dq_gluon(...)  the same, launched once: returns dq

q, dout (B, Nq, H, D); k, v (B, Nk, Hk, D), H % Hk == 0; bf16 or fp16, all alike; D in
{64, 128, 256} (256 since session 33: BLOCK_N 32, 3 / 3 stages; the split D = 256 backward's dQ
pass, launchers/backward_gluon_d256 split_dq=True); Nq % 128 == 0, Nk % BLOCK_N == 0 (128 by
default); lse (B, H, Nq) fp32, the forward's natural-log logsumexp of the scaled scores (+inf for a row that sees no key);
delta (B, H, Nq) fp32 = rowsum(dO * O) (the backward's preprocess). causal=True is the
library's bottom-right causal mask (query i sees key j iff j <= i + Nk - Nq; rows that see
no key get dQ = 0). dq comes back (B, Nq, H, D) contiguous in q's dtype, softmax_scale
applied, as the library's dQ kernels store it. Tiles: kernels/bwd_gluon_dq.py
default_config (BLOCK_N 128; K / V ring depths 3 / 2 at D = 128, 2 / 2 causal, 4 / 4 at
D = 64); block_n, num_stages (the K ring, and the V ring unless v_stages) and v_stages
override it; v_early: the kernel's V_EARLY (V_j released once dP_j retired; for a single V
stage, e.g. D = 256 block_n=64, num_stages=2, v_stages=1).

Gluon kernels have no interpreted form (Triton 3.6.0): nothing here runs under
TRITON_INTERPRET (prepare_dq refuses a non-CUDA or non-Hopper device after the checks).
"""
from __future__ import annotations

import contextlib

import torch

from .. import memory
from ..kernels.bwd_gluon_dq import DEFAULT_CONFIG, attn_bwd_dq_gluon_kernel, default_config
from . import plans
from .common import LOG2E
from .forward_gluon import _desc, check_inputs

# the H100 / H200's shared memory a block may use (227 KB), less ~1 KB for the barriers
SMEM_LIMIT = 227 * 1024 - 1024


def smem_bytes(head_dim: int, block_m: int, block_n: int, k_stages: int, v_stages: int, elt: int = 2) -> int:
    """Shared memory of the kernel's buffers: Q and dO (block_m x D each) plus k_stages K
    and v_stages V tiles (block_n x D each)."""
    return elt * head_dim * (2 * block_m + (k_stages + v_stages) * block_n)


def _stages_arg(name: str, value, least: int, why: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ValueError(f"{name}: expected an int >= {least} ({why}), got {value!r}")


def _check_vec(name: str, t, shape) -> None:
    if not isinstance(t, torch.Tensor):
        raise ValueError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
    if t.dtype != torch.float32:
        raise ValueError(f"{name}: dtype {t.dtype} not supported (float32)")
    if tuple(t.shape) != tuple(shape):
        raise ValueError(f"{name}: expected shape (B, H, Nq) = {tuple(shape)}, got {tuple(t.shape)}")


def check_dq_inputs(q, k, v, dout, lse, delta, softmax_scale, causal, block_m: int, block_n: int,
                    k_stages: int, v_stages: int) -> None:
    """The narrow contract of attn_bwd_dq_gluon_kernel; ValueError naming the argument and
    the rule. Needs no GPU (shapes, dtypes and devices only)."""
    # (the forward's check_inputs admits the forward's head dims, which gained 256 in session 32;
    # this kernel has no D = 256 tile: test_rejects_head_dim[256]. Checked first, so that the
    # message names this kernel's head dims, not the forward's: review, session 32)
    if isinstance(q, torch.Tensor) and q.dim() == 4 and q.shape[-1] not in DEFAULT_CONFIG:
        raise ValueError(f"q: head dim {q.shape[-1]} not supported (one of {sorted(DEFAULT_CONFIG)})")
    check_inputs(q, k, v, softmax_scale, block_m, block_n)
    if not isinstance(dout, torch.Tensor):
        raise ValueError(f"dout: expected a torch.Tensor, got {type(dout).__name__}")
    if dout.shape != q.shape:
        raise ValueError(f"dout: shape {tuple(dout.shape)} differs from q's {tuple(q.shape)}")
    if dout.dtype != q.dtype:
        raise ValueError(f"dout: dtype {dout.dtype} differs from q's {q.dtype}")
    b, nq, h, d = q.shape
    _check_vec("lse", lse, (b, h, nq))
    _check_vec("delta", delta, (b, h, nq))
    for name, t in (("dout", dout), ("lse", lse), ("delta", delta)):
        if t.device != q.device:
            raise ValueError(f"{name}: on {t.device}, q on {q.device}")
    if not isinstance(causal, bool):
        raise ValueError(f"causal: expected a bool, got {causal!r}")
    _stages_arg("num_stages", k_stages, 2, "K ring: tile j's dQ reads K_j in tile j + 1's step")
    _stages_arg("v_stages", v_stages, 1, "V ring")
    need = smem_bytes(d, block_m, block_n, k_stages, v_stages, q.element_size())
    if need > SMEM_LIMIT:
        raise ValueError(f"num_stages: {k_stages} K and {v_stages} V stages of {block_n} x {d} tiles need "
                         f"{need // 1024} KB of shared memory with Q and dO, over the {SMEM_LIMIT // 1024} KB a "
                         f"block may use")


def _launch(q, k, v, dout, lse, delta, dq, softmax_scale, causal: bool, block_m: int, block_n: int,
            k_stages: int, v_stages: int, v_early: bool = False, band: int = 0):
    """Descriptors over q, k, v, dout, dq (each viewed as (B * N, heads * D) rows; q, k, v,
    dout copied when their strides do not allow the view) and the launch function."""
    b, nq, h, d = q.shape
    nk, hk = k.shape[1], k.shape[2]
    q, q_desc = _desc(q, block_m // 2)
    k, k_desc = _desc(k, block_n)
    v, v_desc = _desc(v, block_n)
    dout, do_desc = _desc(dout, block_m // 2)
    dq_view, dq_desc = _desc(dq, block_m // 2)
    assert dq_view is dq, "dq must be a (B, Nq, H, D) contiguous buffer"
    lse = lse.contiguous()
    delta = delta.contiguous()
    grid = (nq // block_m * b * h,) if band else (nq // block_m, b * h)
    qk_scale = float(softmax_scale) * LOG2E
    scale = float(softmax_scale)

    def launch():
        with torch.cuda.device(dq.device) if dq.is_cuda else contextlib.nullcontext():   # (CPU: tests' recorder)
            plans.launch(attn_bwd_dq_gluon_kernel, grid,
                q_desc, k_desc, v_desc, do_desc, dq_desc, lse, delta, nq, nk, h, h // hk, qk_scale, scale,
                HEAD_DIM=d, BLOCK_M=block_m, BLOCK_N=block_n, K_STAGES=k_stages, V_STAGES=v_stages,
                CAUSAL=causal, num_warps=4, **(dict(V_EARLY=True) if v_early else {}),
                **(dict(BAND=band) if band else {}))
        return dq
    return launch


def prepare_dq(q, k, v, dout, lse, delta, softmax_scale, causal=False, *, block_n: int | None = None,
               num_stages: int | None = None, v_stages: int | None = None, v_early: bool = False,
               band: int = 0):
    """Checks the call (ValueError before any launch), allocates dq (NaN under
    memory.poison_outputs()), makes the descriptors; returns launch(), which runs the
    kernel into dq and returns it (again on every call: for timing the kernel without the
    host work). block_n / num_stages (the K ring's depth) / v_stages (the V ring's; default
    num_stages when that is given) override kernels.bwd_gluon_dq.default_config (the A/B's
    variants). band > 0: the kernel's BAND launch order (session 35's A/B; B * H a multiple of it).
    Needs a Hopper GPU (sm_90)."""
    d = q.shape[-1] if isinstance(q, torch.Tensor) and q.dim() == 4 else None
    if isinstance(band, bool) or not isinstance(band, int) or band < 0:
        raise ValueError(f"band: expected a non-negative int, got {band!r}")
    if band and isinstance(q, torch.Tensor) and q.dim() == 4 and (q.shape[0] * q.shape[2]) % band:
        raise ValueError(f"band: {band} does not divide B * H = {q.shape[0] * q.shape[2]}")
    try:
        block_m, bn, k_stages, v_stages0 = default_config(d, causal is True)
    except KeyError:
        block_m, bn, k_stages, v_stages0 = 128, 128, 2, 2     # check_dq_inputs rejects the head dim
    if block_n is not None and (isinstance(block_n, bool) or block_n not in (32, 64, 128)):
        raise ValueError(f"block_n: expected 32, 64, 128 or None, got {block_n!r}")
    if not isinstance(v_early, bool):
        raise ValueError(f"v_early: expected a bool, got {v_early!r}")
    block_n = block_n or bn
    if num_stages is not None:
        k_stages, v_stages0 = num_stages, num_stages
    v_stages = v_stages0 if v_stages is None else v_stages
    check_dq_inputs(q, k, v, dout, lse, delta, softmax_scale, causal, block_m, block_n, k_stages, v_stages)
    if q.device.type != "cuda":
        raise ValueError(f"q: on {q.device}; dq_gluon needs a CUDA (Hopper) device")
    cap = torch.cuda.get_device_capability(q.device)
    if cap[0] != 9:
        raise ValueError(f"dq_gluon needs compute capability 9.x (Hopper), {q.device} has {cap}")
    dq = memory.empty(tuple(q.shape), q.dtype, q.device)
    return _launch(q, k, v, dout, lse, delta, dq, softmax_scale, causal, block_m, block_n, k_stages, v_stages,
                   v_early, band)


def dq_gluon(q, k, v, dout, lse, delta, softmax_scale, causal=False, *, block_n: int | None = None,
             num_stages: int | None = None, v_stages: int | None = None, v_early: bool = False):
    """dQ of attention by attn_bwd_dq_gluon_kernel (prepare_dq, launched once): dq
    (B, Nq, H, D) contiguous in q's dtype."""
    return prepare_dq(q, k, v, dout, lse, delta, softmax_scale, causal, block_n=block_n,
                      num_stages=num_stages, v_stages=v_stages, v_early=v_early)()
