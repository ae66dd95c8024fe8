"""Layer 2: host launchers of the prefill kernels: allocation, strides, grid, tiles.

Inputs arrive validated (flashtriton.validate): dtypes, shapes, head dims and the
unit inner stride are already checked. What is left here is what only the launch
needs: tensor-descriptor alignment, the varlen program map and the tile choice.

Dense tensors are (B, N, H, D); variable-length ones are (total, H, D) with int32
cumulative offsets cu_seqlens (B + 1,). The lse is (B, H, Nq) fp32 for dense inputs
and (H, total_q) for variable-length ones, as in flash-attn.
"""
from __future__ import annotations

import functools
import os
from dataclasses import dataclass, replace
from typing import NamedTuple, Optional

import torch
import triton

from .. import memory
from . import plans
from ..kernels import configs
from ..kernels.bwd import attn_bwd_dkdv_kernel, attn_bwd_dq_kernel, bwd_preprocess_kernel
from ..kernels.bwd_ws import attn_bwd_dkdv_ws_kernel, attn_bwd_dq_ws_kernel
from ..kernels.bwd_ws_varlen import attn_bwd_dkdv_ws_varlen_kernel, attn_bwd_dq_ws_varlen_kernel
from ..kernels.fwd import attn_fwd_kernel
from ..kernels.fwd_ws import attn_fwd_ws_kernel
from ..kernels.fwd_ws_varlen import attn_fwd_ws_varlen_kernel
from . import tuning

LOG2E = 1.4426950408889634


@dataclass(frozen=True)
class AttnParams:
    """Scalar semantics of one attention call (already canonical: causal is right = 0)."""
    softmax_scale: float
    window_left: int = -1
    window_right: int = -1
    softcap: float = 0.0
    dropout_p: float = 0.0


class Varlen(NamedTuple):
    cu_seqlens_q: torch.Tensor
    cu_seqlens_k: torch.Tensor
    max_seqlen_q: int
    max_seqlen_k: int


def interpreting() -> bool:
    return bool(triton.knobs.runtime.interpret)


if interpreting():
    from ..kernels import interpreter_fixes
    interpreter_fixes.apply()


def _alloc_descriptor_scratch(size: int, alignment: int, stream: Optional[int]):
    return torch.empty(size, dtype=torch.int8, device="cuda")


def _ensure_allocator():
    """Descriptors made inside a kernel need a scratch buffer from triton's allocator.
    It is a context variable, unset on autograd's backward thread: set it per launch."""
    from triton.runtime import _allocation
    if isinstance(_allocation._allocator.get(), _allocation.NullAllocator):
        triton.set_allocator(_alloc_descriptor_scratch)


HOST_DESC_KERNELS = ("fwd", "dkdv", "dq")
# Eager forwards under this many FLOPs (~0.25 ms of GPU time) keep the in-kernel
# descriptors: the four host-made ones cost ~45 us of host time a call on the H200
# machine's CPU, and there the call is already host-bound (2026-11-29, D = 128, eager
# TFLOP/s without / with: N = 512 235 / 146, causal N = 1k 212 / 181; from 1e11 FLOPs,
# N = 1k 323 / 367, causal N = 2k 302 / 334). CUDA-graph capture pays no host time.
HOST_DESC_MIN_EAGER_FLOPS = 1e11


def host_desc_default(kernel: str, block_d: int, causal: bool, seqlen: int, fwd_flops: float = float("inf"),
                      device: torch.device | None = None) -> bool:
    """Where host-made descriptors measured faster (H200, 2026-11-29, bf16, 16k tokens,
    bench/gpu/s5_bwd_ab.py and next_host_desc.sh; bench/NOTES.md "Session 5"):
    - forward: everywhere (D = 128 graph replays +27% / +5% / +8% at N = 512 / 1k / 2k,
      causal +32% / +23% / +12%, level from 4k; window (1024, 0) at 16k: +17%);
    - dQ at D = 128 up to N = 4k (+3-8%; -4% at 16k);
    - dK/dV at D = 64, causal (+4-11%); everywhere else both lost up to 22% (dQ at D = 64:
      170 registers against 128 with the descriptors as kernel parameters)."""
    if kernel == "fwd":
        return fwd_host_desc_pays(fwd_flops, device)
    if kernel == "dq":
        return block_d == 128 and seqlen <= 4096
    return block_d == 64 and causal


def fwd_host_desc_pays(flops: float, device: torch.device | None) -> bool:
    """The forward's host-made descriptors pay for their host time (see above)."""
    if flops >= HOST_DESC_MIN_EAGER_FLOPS:
        return True
    return device is not None and device.type == "cuda" and torch.cuda.is_current_stream_capturing()


def host_descriptors(kernel: str, block_d: int, causal: bool, seqlen: int, fwd_flops: float = float("inf"),
                     device: torch.device | None = None) -> bool:
    """Whether the dense `kernel` (one of HOST_DESC_KERNELS) takes host-made TMA
    descriptors of the whole (B, N, H, D) tensors instead of making 4-6 per program in
    the kernel (kernels/common.tile_load). FLASHTRITON_HOST_DESCRIPTORS: "auto" (default:
    host_desc_default), "1" (all), "0" (none), or a comma-separated list of kernels.
    Eagerly, each descriptor costs host time (~10 us on the H200 machine's CPU)."""
    flag = os.environ.get("FLASHTRITON_HOST_DESCRIPTORS", "auto")
    if flag == "auto":
        return host_desc_default(kernel, block_d, causal, seqlen, fwd_flops, device)
    if flag in ("0", "1"):
        return flag == "1"
    chosen = tuple(x.strip() for x in flag.split(","))
    if not chosen or any(x not in HOST_DESC_KERNELS for x in chosen):
        raise ValueError(f"FLASHTRITON_HOST_DESCRIPTORS: must be auto, 0, 1 or a comma-separated subset of "
                         f"{HOST_DESC_KERNELS}, got {flag!r}")
    return kernel in chosen


def _host_descriptor(t: torch.Tensor, rows: int, cols: int):
    """Descriptor of a (B, N, H, D) tensor with a [1, rows, 1, cols] box. Strides of
    size-1 dims are never used, but TMA still checks them (16-byte multiples): they get
    the stride a contiguous layout would give them (a multiple of the inner one)."""
    from triton.tools.tensor_descriptor import TensorDescriptor
    shape, strides = list(t.shape), list(t.stride())
    for i in range(len(shape) - 2, -1, -1):
        if shape[i] == 1:
            strides[i] = strides[i + 1] * shape[i + 1]
    return TensorDescriptor(t, shape, strides, [1, rows, 1, cols])


def _descriptor_ready(t: torch.Tensor) -> torch.Tensor:
    """TMA needs a unit inner stride, a 16-byte aligned base and 16-byte multiples for
    the outer strides. Views that break this (rare: odd offsets into a larger buffer,
    or an incoming gradient dout with a strided last dim) are copied once."""
    esize = t.element_size()
    ok = t.stride(-1) == 1 and t.data_ptr() % 16 == 0 and all((s * esize) % 16 == 0 and s > 0
                                        for s, n in zip(t.stride()[:-1], t.shape[:-1]) if n > 1)
    if ok:
        return t
    plans.unreplayable()
    # clone, not contiguous(): a contiguous view at a misaligned base is its own
    # contiguous() (tests/test_ops.py::test_regression_misaligned_contiguous_input)
    return t.clone(memory_format=torch.contiguous_format)


def block_d(head_dim: int) -> int:
    return max(16, triton.next_power_of_2(head_dim))


def _dot_precision(dtype: torch.dtype) -> str:
    # fp32 inputs compute in true fp32 unless the user opts into tf32 (see README)
    if dtype == torch.float32 and os.environ.get("FLASHTRITON_ALLOW_TF32", "0") != "1":
        return "ieee"
    return "tf32"


def _dims4(t: torch.Tensor, varlen: bool):
    """(stride_b, stride_n, stride_h) with stride_b = 0 for (total, H, D) layouts."""
    if varlen:
        return 0, t.stride(0), t.stride(1)
    return t.stride(0), t.stride(1), t.stride(2)


def _unit_stride_varlen(varlen: Varlen | None) -> Varlen | None:
    """The kernels read cu_seqlens[b] as CU + b: a strided view is copied first."""
    if varlen is None:
        return None
    return varlen._replace(cu_seqlens_q=varlen.cu_seqlens_q.contiguous(),
                           cu_seqlens_k=varlen.cu_seqlens_k.contiguous())


def _effective_window(params: AttnParams, seqlen_q: int, seqlen_k: int) -> AttnParams:
    """A window edge that reaches past every sequence is no edge: -1. Same result, the
    cheaper unmasked path, and the kernels' int32 index arithmetic (index + window)
    cannot overflow on huge windows such as 2**31 - 1."""
    left = -1 if params.window_left >= seqlen_k - 1 else params.window_left
    right = -1 if params.window_right >= seqlen_q - 1 else params.window_right
    if left == params.window_left and right == params.window_right:
        return params        # (dataclasses.replace costs ~6 us on the H200 machine's CPU)
    return replace(params, window_left=left, window_right=right)


def _stamp(t: torch.Tensor):
    """Identity of a tensor's current contents: its version counter (bumped by every
    in-place write) and data pointer."""
    return t._version, t.data_ptr()


def _cached_map(cu: torch.Tensor, key: tuple, make):
    """A program map derived from cu_seqlens, remembered on the tensor itself.

    Measured 2026-11-29 on the H200: the ~20 small torch ops that build the varlen
    maps cost ~0.3-0.5 ms of host time per call, and the GPU idles through it (a
    16k-token causal varlen forward: 1.26 ms with them, 0.57 ms with the cache). A
    model passes the same cu_seqlens to every layer, so they are built once per
    tensor contents (key includes _stamp of every tensor the map reads).

    Never cached while a CUDA graph is being captured: the ops are only recorded
    then, so the tensor would hold garbage for any call outside the graph."""
    if cu.is_cuda and torch.cuda.is_current_stream_capturing():
        return make()
    maps = getattr(cu, "_flashtriton_maps", None)
    if maps is None or maps[0] != _stamp(cu):
        maps = (_stamp(cu), {})
        try:
            cu._flashtriton_maps = maps
        except (AttributeError, RuntimeError):  # a tensor that refuses attributes: no cache
            return make()
    if key not in maps[1]:
        maps[1][key] = make()
    return maps[1][key]


def _cu_blocks(cu_seqlens: torch.Tensor, block: int) -> torch.Tensor:
    """Cumulative count of `block`-row blocks per sequence (B + 1,), on the device: the
    varlen program map, computed without a host sync."""
    lens = cu_seqlens[1:] - cu_seqlens[:-1]
    n = (lens + block - 1) // block
    return torch.cat([n.new_zeros(1), torch.cumsum(n, 0)]).to(torch.int32)


def _heaviest_first(varlen: Varlen, cu_blocks: torch.Tensor, n_programs: int, block_m: int) -> torch.Tensor:
    """Varlen causal forward: the dispatch order of the query-block programs, by their
    number of visible keys, most first (longest-processing-time first), on the device
    and without a host sync.

    The grid's blocks start in order. With programs in sequence order, the heavy
    last blocks of a long sequence late in the batch started last and ran alone at
    the end: measured 2026-11-29 on the H200, a causal varlen forward of 16k tokens
    (8 sequences, 293..3774) ran at 0.80x the TFLOP/s of the dense kernel, whose grid
    already starts every head's heaviest block first. Slot g runs program order[g];
    the kernel maps a program to (sequence, block) as before, including its own
    heaviest-first reversal inside a sequence, which the work estimate mirrors."""
    dev = cu_blocks.device
    g = torch.arange(n_programs, device=dev, dtype=torch.int32)
    seq = torch.searchsorted(cu_blocks[1:], g, right=True)             # == batch: a spare program
    batch = cu_blocks.numel() - 1
    valid = seq < batch
    s = seq.clamp(max=batch - 1)
    nq = (varlen.cu_seqlens_q[1:] - varlen.cu_seqlens_q[:-1])[s]
    nk = (varlen.cu_seqlens_k[1:] - varlen.cu_seqlens_k[:-1])[s]
    first, count = cu_blocks[s], cu_blocks[s + 1] - cu_blocks[s]
    block = count - 1 - (g - first)                                    # the kernel's reversal
    visible = ((block + 1) * block_m + nk - nq).clamp(min=0)
    work = torch.where(valid, torch.minimum(visible, nk), torch.full_like(nk, -1))
    return torch.sort(work, descending=True, stable=True).indices.to(torch.int32)


def _dropout_keys(rng: torch.Tensor, nheads: int, rng_rows: int, rng_stride: int) -> torch.Tensor:
    """The backward's per-call dropout key table (kernels/dropout_keys.py): rng_stride column keys,
    then nheads * rng_rows row keys, then the group multipliers' seed word; O(N) int32,
    hashed on the device from the rng state (no host sync)."""
    from ..kernels.dropout_keys import dropout_keys_kernel
    total = rng_stride + nheads * rng_rows
    keys = memory.empty((total + 1,), torch.int32, rng.device)     # + the group multipliers' seed word
    block = 1024
    plans.launch(dropout_keys_kernel, (triton.cdiv(total + 1, block),), keys, rng, rng_stride, rng_rows, total,
                 rng_stride, BLOCK=block, num_warps=4)
    return keys


def _common_scalars(params: AttnParams, alibi):
    scale = params.softmax_scale
    softcap = params.softcap
    return dict(
        qk_scale=scale * LOG2E,
        softcap_scale=(2.0 * LOG2E * scale / softcap) if softcap > 0 else 0.0,
        softcap_out=softcap * LOG2E,
        window_left=params.window_left, window_right=params.window_right,
        dropout_p=params.dropout_p,
        HAS_LEFT=params.window_left >= 0, HAS_RIGHT=params.window_right >= 0,
        HAS_ALIBI=alibi is not None, HAS_SOFTCAP=softcap > 0, HAS_DROPOUT=params.dropout_p > 0,
    )


def _alibi_strides(alibi):
    if alibi is None:
        return 0, 0
    return (alibi.stride(0), alibi.stride(1)) if alibi.dim() == 2 else (0, alibi.stride(0))


def _tile(kernel: str, bd: int, q: torch.Tensor, params: AttnParams, n: int, varlen, run) -> configs.Tile:
    if interpreting():
        return configs.INTERPRETER_TILE
    if configs.autotune_enabled() and varlen is None:
        key = (q.dtype, params.window_left >= 0, params.window_right >= 0, params.softcap > 0,
               params.dropout_p > 0, configs.seqlen_bucket(n))
        return tuning.pick(kernel, key, bd, q.element_size(), run)
    band = None
    if params.window_left >= 0 and params.window_right >= 0:
        band = params.window_left + params.window_right + 1
    masked = params.window_left >= 0 or params.window_right >= 0
    return configs.default_tile(kernel, bd, n, q.element_size(), window_band=band, masked=masked)


def fwd(q, k, v, params: AttnParams, alibi=None, rng=None, varlen: Varlen | None = None):
    """Returns (out like q, lse fp32). A dense call seen before replays its launch plan
    (launchers/plans.py): the same launches, without the decisions and Triton's binding."""
    inputs = (q, k, v, alibi, rng)
    key = plans.plan_key("fwd", inputs, params) if varlen is None else None
    return plans.run(key, inputs, lambda: _fwd(q, k, v, params, alibi, rng, varlen))


def _fwd(q, k, v, params: AttnParams, alibi=None, rng=None, varlen: Varlen | None = None):
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
            IS_VARLEN=is_varlen, DOT_PRECISION=_dot_precision(q.dtype), USE_ORDER=use_order,
            HOST_DESC=use_host_desc, ROWS_FIRST=FWD_ROWS_FIRST,
            num_warps=tile.num_warps, num_stages=tile.num_stages,
            **_common_scalars(params, alibi),
        )

    # Causal-like varlen only: there block costs differ within and across sequences;
    # non-causal varlen measured 1.05x dense in sequence order (bench/NOTES.md).
    use_order = is_varlen and params.window_right >= 0 and batch > 1
    causal = params.window_right == 0
    keys = seqlen_k                                  # keys a query sees, on average (roughly)
    if params.window_left >= 0 and params.window_right >= 0:
        keys = min(seqlen_k, params.window_left + params.window_right + 1)
    elif params.window_left >= 0 or params.window_right >= 0:
        keys = seqlen_k / 2
    flops = 4.0 * batch * nheads * seqlen_q * keys * head_dim
    # (descriptor shapes must be positive: empty sequences keep the in-kernel path)
    use_host_desc = (not is_varlen and min(seqlen_q, seqlen_k) > 0
                     and host_descriptors("fwd", bd, causal, max(seqlen_q, seqlen_k), flops, q.device))

    if is_varlen and warp_spec_varlen(q, params, alibi, bd) and min(total_q, k.shape[0]) > 0:
        _fwd_warp_spec_varlen(q, k, v, out, lse, params, varlen, bd)
        return out, lse
    if warp_spec_mode(q, params, alibi, is_varlen, bd, seqlen_q, seqlen_k) == "whole":
        _fwd_warp_spec(q, k, v, out, lse, params, bd, rng=rng if params.dropout_p > 0 else None)
        return out, lse
    tile = _tile("fwd", bd, q, params, max(seqlen_q, seqlen_k), varlen, launch)
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


# The warp-specialized forward (kernels/fwd_ws.py): its tile per BLOCK_D. num_warps=4 is
# what Triton's Hopper pass turns into one producer and two consumer warpgroups (12
# warps); 2 stages (3 overflow shared memory at 128 x 128: 257 KB). D = 64 is not here:
# there it lost to fwd.py at N >= 2k (327-383 against 354-405 TFLOP/s, H200, 2026-11-29,
# bench/gpu/s6_ws_ab.py; 128 x 64 tiles gave wrong results under the specialization).
# D = 256: 128 x 128 needs 263 KB of shared memory; 128 x 64 with one stage fits (197 KB,
# 12 warps, no spills) and is right: 486 / 550 / 585 / 613 TFLOP/s at N = 1k / 2k / 4k /
# 16k against 353 / 383 / 401 / 406 for fwd.py and 308-326 for FA2's CUDA kernel
# (bench/gpu/s8_d256_fwd_ab.py, H200, 2026-11-29); 128 x 32 with 2 stages 402-490, with
# 3 stages NaN.
WARP_SPEC_TILES = {128: configs.Tile(128, 128, 4, 2), 256: configs.Tile(128, 64, 4, 1)}


def warp_spec_mode(q, params: AttnParams, alibi, is_varlen: bool, bd: int, seqlen_q: int, seqlen_k: int,
                   kernel: str = "fwd", dout=None):
    """How the forward (kernel="fwd") or the backward ("bwd") uses the warp-specialized
    kernels: "whole" (warp_spec_plain: they do the whole call), "split" (backward only,
    warp_spec_split: bwd_ws.py does the fully visible tiles and bwd.py the masked rest),
    or None; under warp_spec_applies' switch. "split" is taken for causal (or
    right-window, or ragged) calls with min(Nq, Nk) >= BWD_SPLIT_MIN_N[BLOCK_D] and no
    left window, or always with FLASHTRITON_WARP_SPEC=1; the backward's "whole" from
    min(Nq, Nk) >= BWD_WHOLE_MIN_N (where BLOCK_D has an entry), or always with the flag.
    (H200, 2026-11-29, bf16 D = 128, 16k tokens, bench/gpu/s6_ws_ab.py: causal backward
    alone ~306 / 293 TFLOP/s at 4k, 365 / 320 at 8k, 415 / 309 at 16k, but 225 / 250 at
    2k; window (1024, 0) 1.67 ms against 1.38. The forward's split, removed in session 7,
    measured 73 / 139 to 393 / 417 at N = 512 to 4k and level from 8k.)
    The backward kernels read q and dO as (Nq, H * D) with the head a column offset, so
    they also need head_dim == BLOCK_D and heads contiguous in a row of q and dout."""
    if not warp_spec_applies(q, params, alibi, is_varlen, bd, seqlen_q, seqlen_k, split_ok=kernel == "bwd",
                             kernel=kernel):
        return None
    if kernel == "bwd" and not (q.shape[-1] == bd and q.stride(-2) == bd and dout.stride(-2) == bd):
        return None
    forced = _warp_spec_forced()
    if kernel == "fwd" and warp_spec_masked_fwd(q.dtype, params, alibi, is_varlen, bd, seqlen_q, seqlen_k):
        return "whole"
    if warp_spec_plain(q.dtype, params, alibi, is_varlen, bd, seqlen_q, seqlen_k, kernel):
        if kernel == "fwd" or forced or min(seqlen_q, seqlen_k) >= BWD_WHOLE_MIN_N.get(bd, 0):
            return "whole"
        return None
    if kernel == "fwd":
        return None
    if forced:
        return "split"
    if params.window_left < 0 and min(seqlen_q, seqlen_k) >= BWD_SPLIT_MIN_N.get(bd, float("inf")):
        return "split"
    return None


# The shortest sequences at which the backward's split path pays, per BLOCK_D (see
# warp_spec_mode). D = 64 (H200, 2026-11-29, prefill-d64.md, 16k tokens): causal
# backward 221 / 284 / 334 TFLOP/s at 4k / 8k / 16k with the split, 242 / 267 / 280
# with bwd.py.
BWD_SPLIT_MIN_N = {128: 4096, 64: 8192}
# The shortest sequences at which the whole-call backward pays, where not from the start:
# D = 64 non-causal at N = 512 / 1k 159 / 230 TFLOP/s against 187 / 240 with bwd.py
# (from 2k: 294 / 337 / 364 / 372 against 273 / 303 / 326 / 325; same runs as above).
BWD_WHOLE_MIN_N = {64: 2048}


def warp_spec_split(dtype, params: AttnParams, alibi, is_varlen: bool, bd: int, seqlen_q: int, seqlen_k: int,
                    kernel: str = "fwd") -> bool:
    """The calls the backward's split path computes: warp_spec_plain's, but causal,
    windows and any Nq / Nk allowed (the masked tiles run in bwd.py); no dropout there."""
    return (not is_varlen and alibi is None and params.softcap == 0 and params.dropout_p == 0
            and bd in _ws_tiles(kernel) and dtype in (torch.bfloat16, torch.float16)
            and seqlen_q > 0 and seqlen_k > 0)


def _ws_tiles(kernel: str) -> dict:
    """The warp-specialized tiles of the forward ("fwd": BLOCK_D -> tile) or of the
    backward ("bwd": BLOCK_D -> (dK/dV tile, dQ tile))."""
    return WARP_SPEC_TILES if kernel == "fwd" else BWD_WARP_SPEC_TILES


def warp_spec_applies(q, params: AttnParams, alibi, is_varlen: bool, bd: int, seqlen_q: int, seqlen_k: int,
                      split_ok: bool = False, kernel: str = "fwd") -> bool:
    """Whether the forward takes the warp-specialized kernel. FLASHTRITON_WARP_SPEC:
    "auto" (default): the calls warp_spec_plain accepts (with split_ok, also those
    warp_spec_split accepts), on a Hopper GPU (compute capability 9); "0": never; "1": as
    auto, and also under the Triton interpreter (where the specialization itself is
    ignored: the tests check the kernels' arithmetic there)."""
    args = (q.dtype, params, alibi, is_varlen, bd, seqlen_q, seqlen_k, kernel)
    if not (warp_spec_plain(*args) or (split_ok and warp_spec_split(*args))
            or (kernel == "fwd" and warp_spec_masked_fwd(*args[:-1]))):
        _warp_spec_flag()  # a bad value is an error on every call
        return False
    return _warp_spec_switch(q)


def _warp_spec_flag() -> str:
    flag = os.environ.get("FLASHTRITON_WARP_SPEC", "auto")
    if flag not in ("auto", "0", "1"):
        raise ValueError(f"FLASHTRITON_WARP_SPEC: must be auto, 0 or 1, got {flag!r}")
    return flag


def _warp_spec_forced() -> bool:
    """FLASHTRITON_WARP_SPEC=1: the warp-specialized kernels take every call they can compute."""
    return os.environ.get("FLASHTRITON_WARP_SPEC") == "1"


def _warp_spec_switch(q) -> bool:
    """FLASHTRITON_WARP_SPEC for a call the warp-specialized kernels can compute."""
    flag = _warp_spec_flag()
    if flag == "0":
        return False
    if interpreting():
        return flag == "1"
    return q.is_cuda and _compute_capability(q.device.index)[0] == 9


@functools.lru_cache(maxsize=None)
def _compute_capability(index) -> tuple:
    """torch.cuda.get_device_capability, once per device: 9-22 us a call on the H200
    machine's CPU, asked on every launch (bench/NOTES.md, "Session 10")."""
    return torch.cuda.get_device_capability(index)


def warp_spec_varlen(q, params: AttnParams, alibi, bd: int) -> bool:
    """Whether a varlen forward takes kernels/fwd_ws_varlen.py: non-causal, no window,
    ALiBi, softcap or dropout, bf16 / fp16 at a BLOCK_D of WARP_SPEC_TILES; under
    warp_spec_applies' switch."""
    if not (alibi is None and params.softcap == 0 and params.dropout_p == 0 and params.window_left < 0
            and params.window_right < 0 and bd in WARP_SPEC_TILES and q.dtype in (torch.bfloat16, torch.float16)):
        _warp_spec_flag()
        return False
    return _warp_spec_switch(q)


def warp_spec_plain(dtype, params: AttnParams, alibi, is_varlen: bool, bd: int, seqlen_q: int, seqlen_k: int,
                    kernel: str = "fwd") -> bool:
    """The calls kernels/fwd_ws.py (kernel="fwd") or bwd_ws.py ("bwd") computes whole:
    no mask at all (not causal, no window, key and query counts that are multiples of the
    tiles), no varlen, ALiBi or softcap; dropout where WARP_SPEC_DROPOUT_FWD /
    WARP_SPEC_DROPOUT_BWD allow it (always with FLASHTRITON_WARP_SPEC=1, for the tests);
    bf16 / fp16 at a BLOCK_D of WARP_SPEC_TILES / BWD_WARP_SPEC_TILES.

    The dropout forward's history (H200, Triton 3.6.0, 2026-11-29): with the key table
    read through descriptors in fwd_ws.py, the lse of row 0 came out wrong in every call
    at D = 256 (bench/gpu/s8_lse_probe.py; the output right), and at D = 128 in 6-9% of
    calls with ten processes sharing the GPU (s8_ws_stress.py), never without dropout
    (20k calls): a compiler or shared-memory race we could not fix in the kernel. The
    kernel now hashes the keys itself, at the iota rows (kernels/fwd_ws.py).
    The backward kernels read the same table through descriptors; a stress of 26689
    calls a case under load found their gradients right (bench/gpu/s9_dropout_bwd.py)."""
    tiles = _ws_tiles(kernel)
    if bd not in tiles:
        return False
    n_mult, m_mult = ((tiles[bd].block_n, tiles[bd].block_m) if kernel == "fwd"
                      else (tiles[bd][0].block_n, tiles[bd][1].block_m))
    return (not is_varlen and alibi is None and params.softcap == 0
            and params.window_left < 0 and params.window_right < 0
            and (params.dropout_p == 0 or _warp_spec_forced()
                 or (WARP_SPEC_DROPOUT_FWD if kernel == "fwd" else WARP_SPEC_DROPOUT_BWD))
            and dtype in (torch.bfloat16, torch.float16) and seqlen_q > 0 and seqlen_k > 0
            and seqlen_k % n_mult == 0 and seqlen_q % m_mult == 0)


def warp_spec_masked_fwd(dtype, params: AttnParams, alibi, is_varlen: bool, bd: int, seqlen_q: int,
                         seqlen_k: int) -> bool:
    """The masked calls kernels/fwd_ws.py computes (MASKED, every tile of the band masked,
    rows through an iota descriptor): a bottom-right causal mask or sliding window with a
    right edge (window_right >= 0; a left edge optional) and 0 < Nq <= Nk (no row without
    keys), counts multiples of the tile, no ALiBi, softcap, dropout or varlen (with
    dropout the specialization pass fails to compile it: Triton 3.6.0, sm_90a), bf16 / fp16,
    at a BLOCK_D in WARP_SPEC_MASKED_FWD["causal"] (window_right = 0, no left edge) or
    ["window"] (any BLOCK_D of WARP_SPEC_TILES with FLASHTRITON_WARP_SPEC=1, so the tests
    reach it under the interpreter)."""
    if params.window_right < 0 or bd not in WARP_SPEC_TILES:
        return False
    kind = "causal" if params.window_right == 0 and params.window_left < 0 else "window"
    if not (bd in WARP_SPEC_MASKED_FWD[kind] or _warp_spec_forced()):
        return False
    tile = WARP_SPEC_TILES[bd]
    return (not is_varlen and alibi is None and params.softcap == 0 and params.dropout_p == 0
            and dtype in (torch.bfloat16, torch.float16) and 0 < seqlen_q <= seqlen_k
            and seqlen_k % tile.block_n == 0 and seqlen_q % tile.block_m == 0)


# BLOCK_Ds whose causal / windowed forwards run fwd_ws.py's MASKED variant by default.
# Causal D = 256 (H200, 2026-11-29): 315 / 408 / 474 / 534 TFLOP/s at N = 1k / 2k / 4k / 16k
# against fwd.py's 274 / 313 / 350 / 415 (bench/gpu/s8_causal_ws_ab.py); D = 128 level
# (-8% at 16k), so not taken. Window (1024, 0) (bench/gpu/s9_window_ws_ab.py, 16k tokens):
# D = 256 400 / 403 band TFLOP/s at N = 4k / 16k against 326 / 331; D = 128 305 against
# 258 at 4k but 316 against 371 at 16k, so not taken.
WARP_SPEC_MASKED_FWD = {"causal": {256}, "window": {256}}


# The dropout forward on fwd_ws.py (keys hashed in the kernel at the iota rows): its lse
# right in 15453 calls a case under load and 20 poisoned calls a case idle (H200,
# bench/gpu/s9_dropout_fwd.py; the versions that read the key table through
# descriptors were wrong: warp_spec_plain, kernels/fwd_ws.py).
WARP_SPEC_DROPOUT_FWD = True
# The dropout backward on bwd_ws.py: session 8 took it off as a precaution (see
# warp_spec_plain); session 9's stress (bench/gpu/s9_dropout_bwd.py, H200: 10 processes
# for 150 s, 26689 calls a case, D = 128 and 64) found no gradient off from bwd.py's, and
# it is 10% faster (B=2 H=16 N=4k D=128 p=0.1 non-causal: 2.046 ms against 2.271).
WARP_SPEC_DROPOUT_BWD = True


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
    plans.launch(attn_fwd_ws_kernel, (batch * nheads * triton.cdiv(seqlen_q, tile.block_m),),
        q, k, v, out, lse, iota if rows else lse, rng if rng is not None else lse,
        *_dims4(q, False), *_dims4(k, False), *_dims4(v, False), *_dims4(out, False),
        lse.numel(),
        nheads, nheads // nheads_k, seqlen_q, seqlen_k, qk_scale, params.window_left, params.window_right,
        params.dropout_p, batch * seqlen_q, seqlen_k,
        HEAD_DIM=head_dim, BLOCK_D=bd, BLOCK_M=tile.block_m, BLOCK_N=tile.block_n, NEG_SCALE=qk_scale < 0,
        MASKED=masked, HAS_LEFT=masked and params.window_left >= 0, HAS_DROPOUT=rng is not None,
        num_warps=tile.num_warps, num_stages=tile.num_stages,
    )


def bwd(dout, q, k, v, out, lse, params: AttnParams, alibi=None, rng=None, varlen: Varlen | None = None):
    """Returns (dq, dk, dv) shaped like q, k, v. Deterministic: no atomics anywhere. A
    dense call seen before replays its launch plan (launchers/plans.py)."""
    inputs = (dout, q, k, v, out, lse, alibi, rng)
    key = plans.plan_key("bwd", inputs, params) if varlen is None else None
    return plans.run(key, inputs, lambda: _bwd(dout, q, k, v, out, lse, params, alibi, rng, varlen))


def _bwd(dout, q, k, v, out, lse, params: AttnParams, alibi=None, rng=None, varlen: Varlen | None = None):
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
        stride_lb, stride_lh = lse.stride(0), lse.stride(1)
        rng_rows, rng_stride = batch * seqlen_q, seqlen_k
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
    scalars = _common_scalars(params, alibi)
    common = dict(rng_rows=rng_rows, rng_stride=rng_stride,
                  n_bucket=configs.seqlen_bucket(max(seqlen_q, seqlen_k)),
                  HEAD_DIM=head_dim, BLOCK_D=bd, IS_VARLEN=is_varlen,
                  DOT_PRECISION=_dot_precision(q.dtype), **scalars)

    pre_block = 64
    # delta is one value per query row: a varlen batch is one packed run of total_q rows
    # here, so no program is spent on padding up to max_seqlen_q.
    pre_batch, pre_rows = (1, total_q) if is_varlen else (batch, seqlen_q)
    plans.launch(bwd_preprocess_kernel, (pre_batch * nheads, triton.cdiv(pre_rows, pre_block)),
        out, dout, delta, cu_q, *_dims4(out, is_varlen), *_dims4(dout, is_varlen),
        stride_lb, stride_lh, nheads, pre_rows,
        HEAD_DIM=head_dim, BLOCK_D=bd, BLOCK_M=pre_block, IS_VARLEN=False)

    if (is_varlen and warp_spec_varlen(q, params, alibi, bd) and min(total_q, total_k) > 0
            and head_dim == bd and q.stride(1) == bd and dout.stride(1) == bd):
        _bwd_warp_spec_varlen(q, k, v, dout, lse, delta, dq, dk, dv, params, varlen, bd)
        return dq, dk, dv

    def launch_dkdv(tile: configs.Tile, resume: bool = False):
        if is_varlen:
            cu_blocks = _cached_map(varlen.cu_seqlens_k, ("blocks", tile.block_n),
                                    lambda: _cu_blocks(varlen.cu_seqlens_k, tile.block_n))
            grid = (nheads_k, triton.cdiv(total_k, tile.block_n) + batch)
        else:
            cu_blocks = dummy
            grid = (batch * nheads_k, triton.cdiv(seqlen_k, tile.block_n))
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
            KEY_ROWS=dkdv_key_rows(bd, q.dtype, resume, tile.block_m),
            num_warps=tile.num_warps, num_stages=tile.num_stages, **common)

    def launch_dq(tile: configs.Tile, resume: bool = False):
        if is_varlen:
            cu_blocks = _cached_map(varlen.cu_seqlens_q, ("blocks", tile.block_m),
                                    lambda: _cu_blocks(varlen.cu_seqlens_q, tile.block_m))
            grid = (nheads, triton.cdiv(total_q, tile.block_m) + batch)
        else:
            cu_blocks = dummy
            grid = (batch * nheads, triton.cdiv(seqlen_q, tile.block_m))
        descs = (dummy,) * 5
        use_host_desc = dense_desc and host_descriptors("dq", bd, params.window_right == 0, n)
        if use_host_desc:
            bm, bn = tile.block_m, tile.block_n
            descs = (_host_descriptor(q, bm, bd), _host_descriptor(k, bn, bd), _host_descriptor(v, bn, bd),
                     _host_descriptor(dout, bm, bd), _host_descriptor(dq, bm, bd))
        plans.launch(attn_bwd_dq_kernel, grid,
            q, k, v, dout, lse, delta, dq, cu_q, cu_k, cu_blocks, alibi_arg, rng_arg, *descs,
            *_dims4(q, is_varlen), *_dims4(k, is_varlen), *_dims4(v, is_varlen), *_dims4(dout, is_varlen),
            *_dims4(dq, is_varlen),
            stride_lb, stride_lh, stride_ab, stride_ah,
            nheads, group, batch, seqlen_q, seqlen_k, params.softmax_scale,
            BLOCK_M=tile.block_m, BLOCK_N=tile.block_n, HOST_DESC=use_host_desc, RESUME=resume,
            num_warps=tile.num_warps, num_stages=tile.num_stages, **common)

    # (descriptor shapes must be positive: empty sequences keep the in-kernel path)
    dense_desc = not is_varlen and min(seqlen_q, seqlen_k) > 0
    n = max(seqlen_q, seqlen_k)
    mode = (warp_spec_mode(q, params, alibi, is_varlen, bd, seqlen_q, seqlen_k, kernel="bwd", dout=dout)
            if lse.is_contiguous() else None)
    if mode == "whole":
        _bwd_warp_spec(q, k, v, dout, lse, delta, dq, dk, dv, params, bd,
                       rng_arg if params.dropout_p > 0 else None, rng_rows)
    elif mode == "split":
        # the warp-specialized kernels do the fully visible tiles and leave unscaled partial
        # gradients in dq, dk, dv; bwd.py's kernels resume from them with the masked rest,
        # on the same BLOCK_M / BLOCK_N (two launches more: as the forward's split path)
        _bwd_warp_spec(q, k, v, dout, lse, delta, dq, dk, dv, params, bd, None, rng_rows, partial=True)
        interp = interpreting()
        ws_dkdv, ws_dq = _bwd_ws_tiles(bd)
        launch_dkdv(replace(ws_dkdv, num_warps=8) if not interp else ws_dkdv, resume=True)
        launch_dq(replace(ws_dq, num_warps=8, num_stages=3) if not interp else ws_dq, resume=True)
    else:
        launch_dkdv(_tile("dkdv", bd, q, params, n, varlen, launch_dkdv))
        launch_dq(_tile("dq", bd, q, params, n, varlen, launch_dq))
    return dq, dk, dv


# BLOCK_D at which bwd.py's dK/dV kernel computes its tiles as query rows x key columns
# (KEY_ROWS=False: S = Q K^T and dP = dO V^T read K and V from shared memory, where the
# key-rows layout holds them in registers as A operands, one copy per warpgroup). H200,
# 2026-11-30 (bench/gpu/s11_dkdv_ab.py, backward ms, key rows -> query rows): D = 256
# N = 8k 10.47 -> 9.67 (with the (128, 64, 8, 1) tile), causal 6.20 -> 4.70; D = 128
# window (1024, 0) 1.404 -> 1.297, causal 2k 1.371 -> 1.348 (same (64, 64, 4, 2) tile).
# D = 64: masked calls' (64, 64, 4, 3) tile, +4-10% (configs "dkdv_masked"); its unmasked
# tile has 32 query rows (a wgmma needs 64), so those keep key rows (dkdv_key_rows). The
# split path's resumed dK/dV was not measured in this layout and keeps key rows.
DKDV_QUERY_ROWS: set = {64, 128, 256}


def dkdv_key_rows(bd: int, dtype: torch.dtype, resume: bool, block_m: int) -> bool:
    """KEY_ROWS of bwd.py's dK/dV kernel for this call (see DKDV_QUERY_ROWS). float32's
    FMA tiles keep the layout they were sized in; so do tiles of fewer than 64 query rows
    (a tuner candidate), whose S = Q K^T would not be a warpgroup wgmma (M < 64) - except
    under the interpreter, where speed does not matter and the tests use 32-row tiles."""
    if resume or dtype == torch.float32 or bd not in DKDV_QUERY_ROWS:
        return True
    return block_m < 64 and not interpreting()


# The warp-specialized backward kernels (kernels/bwd_ws.py), for the calls the
# warp-specialized forward computes whole (num_warps=4 -> 12). dK/dV: 64 query rows a
# tile, 128 keys a program (64 per consumer warpgroup); dQ: 128 query rows a program, 64
# keys a tile. sm_90a compile (2026-11-29): 168 registers, no spills (dK/dV with dropout:
# 132 bytes since session 9 folded 1 / (1 - p) out of the loop), 162 KB of shared memory
# each at 2 stages.
# H200, 2026-11-29, bf16 D = 128, 16k tokens (bench/results/nvidia-h200/prefill-d128.md):
# non-causal backward 245 / 333 / 392 / 431 / 449 / 458 TFLOP/s at N = 512 to 16k against
# 213 / 261 / 318 / 361 / 384 / 389 with bwd.py; causal (split, N >= 4k) 315 / 371 / 418
# against 291 / 319 / 342. The dK/dV kernel alone: 629 TFLOP/s at N = 4k (s7_dk_probe.py).
# D = 64 (sm_90a: (128, 128) tiles 117 KB of shared memory, dK/dV 8 bytes of spill):
# causal 8k split 284 against 267 with bwd.py.
BWD_WARP_SPEC_TILES = {128: (configs.Tile(64, 128, 4, 2), configs.Tile(128, 64, 4, 2)),
                       # D = 64: (128, 128) both (s8a.sh, bench/gpu/s7_d64_bwd_ab.py, 2026-11-29):
                       # 293 / 362 TFLOP/s non-causal at 2k / 8k against 273 / 334 for (64, 128) /
                       # (128, 64) and 279 / 332 for bwd.py.
                       64: (configs.Tile(128, 128, 4, 2), configs.Tile(128, 128, 4, 2))}


def _bwd_ws_tiles(bd: int):
    """(dK/dV tile, dQ tile) of the warp-specialized backward at BLOCK_D bd."""
    if interpreting():
        return configs.INTERPRETER_TILE, configs.INTERPRETER_TILE
    return BWD_WARP_SPEC_TILES[bd]


def _bwd_warp_spec(q, k, v, dout, lse, delta, dq, dk, dv, params: AttnParams, bd: int, keys=None, rng_rows=0,
                   partial: bool = False):
    """keys: the dropout key table (_dropout_keys) when params.dropout_p > 0. partial:
    only the fully visible tiles (causal, right window, ragged counts), the unscaled
    gradients left in dq, dk, dv for bwd.py's RESUME."""
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
    plans.launch(attn_bwd_dkdv_ws_kernel, (batch * nheads_k * triton.cdiv(seqlen_k, tile.block_n),),
        q, k, v, dout, lse, delta, dk, dv, keys_arg,
        *_dims4(q, False), *_dims4(k, False), *_dims4(v, False), *_dims4(dout, False),
        *_dims4(dk, False), *_dims4(dv, False),
        lse.numel(), lse_stride, nheads, nheads_k, nheads // nheads_k, seqlen_q, seqlen_k,
        params.softmax_scale, params.softmax_scale * LOG2E, params.dropout_p, keys_total, rng_rows,
        params.window_left, params.window_right,
        HEAD_DIM=head_dim, BLOCK_D=bd, BLOCK_M=tile.block_m, BLOCK_N=tile.block_n, HAS_DROPOUT=keys is not None,
        PARTIAL=partial, HAS_RIGHT=params.window_right >= 0, HAS_LEFT=params.window_left >= 0,
        num_warps=tile.num_warps, num_stages=tile.num_stages,
    )
    tile = dq_tile
    plans.launch(attn_bwd_dq_ws_kernel, (batch * nheads * triton.cdiv(seqlen_q, tile.block_m),),
        q, k, v, dout, lse, delta, dq, keys_arg,
        *_dims4(q, False), *_dims4(k, False), *_dims4(v, False), *_dims4(dout, False), *_dims4(dq, False),
        lse.numel(), lse_stride, nheads, nheads // nheads_k, seqlen_q, seqlen_k,
        params.softmax_scale, params.softmax_scale * LOG2E, params.dropout_p, keys_total, rng_rows,
        params.window_left, params.window_right,
        HEAD_DIM=head_dim, BLOCK_D=bd, BLOCK_M=tile.block_m, BLOCK_N=tile.block_n, HAS_DROPOUT=keys is not None,
        PARTIAL=partial, HAS_RIGHT=params.window_right >= 0, HAS_LEFT=params.window_left >= 0,
        num_warps=tile.num_warps, num_stages=tile.num_stages,
    )


def _ws_varlen_maps(cu_q: torch.Tensor, block_m: int, n_slots: int, total_q: int):
    """The varlen warp-specialized forward's maps, on the device without a host sync:
    slots (n_slots, 2) int32, each slot's (sequence, first row), spare slots (the grid
    is an upper bound) at row 2**30; gather (total_q,) int64, each token's row in the
    kernel's (H, n_slots * block_m) lse buffer."""
    cu_blocks = _cu_blocks(cu_q, block_m).long()
    s = torch.arange(n_slots, device=cu_q.device)
    seq = torch.searchsorted(cu_blocks[1:].contiguous(), s, right=True)   # cu_blocks[seq] <= s < cu_blocks[seq + 1]
    valid = s < cu_blocks[-1]
    seq = torch.where(valid, seq, 0)
    start = torch.where(valid, (s - cu_blocks[seq]) * block_m, 1 << 30)
    slots = torch.stack([seq, start], 1).to(torch.int32).contiguous()
    cu = cu_q.long()
    t = torch.arange(total_q, device=cu_q.device)
    tseq = torch.searchsorted(cu[1:].contiguous(), t, right=True)
    row = t - cu[tseq]
    gather = (cu_blocks[tseq] + row // block_m) * block_m + row % block_m
    return slots, gather


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
