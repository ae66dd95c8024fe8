"""Host helpers shared by the prefill launchers (launchers/forward.py, backward.py):
the call's scalar parameters (AttnParams, Varlen), tensor-descriptor alignment and the
host-made TMA descriptors with their policy (host_descriptors), the varlen program maps
(cached on cu_seqlens), the dropout key table, the kernels' common scalars and the tile
choice (_tile). Tensor layouts: see launchers/prefill.py."""
from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import NamedTuple, Optional

import torch
import triton

from .. import envvars, memory
from . import plans
from ..kernels import configs
from . import tuning

LOG2E = 1.4426950408889634


@dataclass(frozen=True)
class AttnParams:
    """Scalar semantics of one attention call (already canonical: causal is right = 0).
    deterministic: the backward must be bitwise reproducible (flash-attn's flag, or
    torch.use_deterministic_algorithms); False lets policy.gluon_bwd_fused (D = 64 / 128)
    and policy.gluon_bwd_d256 (D = 256, since session 32) route the call to a fused Gluon
    backward (Hopper), whose dq is reduce-added in fp32 in whatever order its key blocks run."""
    softmax_scale: float
    window_left: int = -1
    window_right: int = -1
    softcap: float = 0.0
    dropout_p: float = 0.0
    deterministic: bool = True


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


DEFAULT_SMS = 132  # H200; off the GPU (the interpreter), where the real count is not read
_sm_count: dict = {}


def sm_count(device: torch.device) -> int:
    """Streaming multiprocessors of device (cached), DEFAULT_SMS for a CPU device."""
    if device.type != "cuda":
        return DEFAULT_SMS
    idx = device.index if device.index is not None else torch.cuda.current_device()
    if idx not in _sm_count:
        _sm_count[idx] = torch.cuda.get_device_properties(idx).multi_processor_count
    return _sm_count[idx]


class ScratchRing:
    """Descriptor scratch handed out in order from one buffer, so that an address is
    reused only after the ring wraps (hundreds of launches later), where torch.empty per
    launch hands the same address to the next launch with new descriptors in it.

    Experimental, for session 16's fault hypothesis H1 (bench/NOTES.md: a stale copy of an
    in-kernel descriptor in an SM's descriptor cache, triton-lang/triton PRs 4342 / 7293),
    taken only with FLASHTRITON_DESC_SCRATCH=ring. Safe while launches that share a ring
    run in order: one ring per (device, stream), and CUDA-graph captures keep torch.empty
    (the graph's own pool)."""

    def __init__(self, nbytes: int, device="cuda"):
        self.buf = torch.empty(nbytes, dtype=torch.int8, device=device)
        self.head = 0

    def take(self, size: int, alignment: int) -> torch.Tensor:
        start = -(-self.head // alignment) * alignment
        if start + size > self.buf.numel():
            start = 0                                    # wrap: the oldest slot again
        self.head = start + size
        return self.buf[start:start + size]


SCRATCH_RING_BYTES = 64 << 20
_scratch_rings: dict = {}


def _alloc_descriptor_scratch(size: int, alignment: int, stream: Optional[int]):
    mode = envvars.value("FLASHTRITON_DESC_SCRATCH", "torch")
    if mode == "ring" and not torch.cuda.is_current_stream_capturing():
        key = (torch.cuda.current_device(), stream)
        ring = _scratch_rings.get(key)
        if ring is None or ring.buf.numel() < 4 * size:
            ring = _scratch_rings[key] = ScratchRing(max(SCRATCH_RING_BYTES, 4 * size))
        return ring.take(size, alignment)
    if mode not in ("torch", "ring"):
        raise ValueError(f"FLASHTRITON_DESC_SCRATCH: must be torch (the default) or ring, got {mode!r}")
    return torch.empty(size, dtype=torch.int8, device="cuda")


_allocation = None      # triton.runtime._allocation, imported at the first _ensure_allocator


def _ensure_allocator():
    """Descriptors made inside a kernel need a scratch buffer from triton's allocator.
    It is a context variable, unset on autograd's backward thread: set it per launch.
    (The module bound once, not an import statement a call: ~0.5 us, CI CPU.)"""
    global _allocation
    if _allocation is None:
        from triton.runtime import _allocation
    if isinstance(_allocation._allocator.get(), _allocation.NullAllocator):
        triton.set_allocator(_alloc_descriptor_scratch)


HOST_DESC_KERNELS = ("fwd", "dkdv", "dq")


def host_desc_default(kernel: str, block_d: int, causal: bool, seqlen: int) -> bool:
    """Where host-made descriptors measured faster (H200, 2026-11-29, bf16, 16k tokens,
    bench/gpu/s5_bwd_ab.py and next_host_desc.sh; bench/NOTES.md "Session 5"):
    - forward: everywhere (D = 128 graph replays +27% / +5% / +8% at N = 512 / 1k / 2k,
      causal +32% / +23% / +12%, level from 4k; window (1024, 0) at 16k: +17%). Until
      session 22 eager forwards under 1e11 FLOPs kept the in-kernel descriptors, for the
      ~45 us of host time the four host-made ones cost before launch plans: a replay
      encodes a descriptor once per base address (plans._DirectLaunch), and those eager
      calls ran 1.4-1.8x their graph replay's time (H200, 2026-11-30, s22_short_fwd_ab.py:
      D = 64 causal 512 259 against 147 us, D = 128 causal 512 208 against 141);
    - dQ at D = 128 up to N = 4k (+3-8%; -4% at 16k, non-causal on bwd.py then);
    - dK/dV at D = 64, causal (+4-11%); everywhere else both lost up to 22% (dQ at D = 64:
      170 registers against 128 with the descriptors as kernel parameters);
    - since session 22, both at D = 128 in causal-like calls (causal, or a window's right
      edge at 0) at any length: eager backward, H200, 2026-11-30, 16k tokens, host-made
      dK/dV and dQ against today's auto (bench/gpu/s22_bwd_desc_ab.py): causal 512 / 1k / 2k
      153 / 222-227 / 303-308 TFLOP/s against 135 / 205-207 / 288-295, 4k level (348-363
      against 357-363), 8k / 16k 371-372 / 415-418 against 337-369 / 385-406; window (1024,
      0) at 16k +1-2%; causal dropout 512 / 2k 133 / 258-260 against 119 / 244-246. Either
      kernel's alone gained 0-2% at 512 / 1k. D = 64 lost with them (causal 512-2k -6 to
      -9%, dQ alone -25%), D = 256 lost 20-60%, non-causal D = 128 at 512 level."""
    if kernel == "fwd":
        return True
    if kernel == "dq":
        return block_d == 128 and (seqlen <= 4096 or causal)
    return (block_d == 64 or block_d == 128) and causal


def host_descriptors(kernel: str, block_d: int, causal: bool, seqlen: int) -> bool:
    """Whether the dense `kernel` (one of HOST_DESC_KERNELS) takes host-made TMA
    descriptors of the whole (B, N, H, D) tensors instead of making 4-6 per program in
    the kernel (kernels/common.tile_load). FLASHTRITON_HOST_DESCRIPTORS: "auto" (default:
    host_desc_default), "1" (all), "0" (none), or a comma-separated list of kernels.
    Eagerly, each descriptor costs host time (~10 us on the H200 machine's CPU)."""
    flag = os.environ.get("FLASHTRITON_HOST_DESCRIPTORS", "auto")
    if flag == "auto":
        return host_desc_default(kernel, block_d, causal, seqlen)
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


def _flat_rows(t: torch.Tensor, bd: int) -> bool:
    """Whether t (B, N, H, D) reads as a (B * N, H-span) matrix whose rows are the (batch,
    token) pairs and whose heads are column offsets, as the persistent fwd_ws.py's descriptors
    read it (made once over every (batch, head)): each head a
    whole BLOCK_D row segment, heads side by side inside a row, the batches' rows one after
    another, and row indices within int32."""
    batch, n, h, d = t.shape
    return (d == bd and t.stride(3) == 1 and t.stride(2) >= d and t.stride(1) >= (h - 1) * t.stride(2) + d
            and (batch == 1 or t.stride(0) == n * t.stride(1)) and batch * n < 2**31)


def _flat_view(t: torch.Tensor, bd: int):
    """(rb, rh, ch) when t (B, N, H, D) reads as one 2-D view of rows t.stride(1) elements
    apart in which element (b, n, h, :) is row b * rb + h * rh + n from column h * ch, as
    the persistent fwd_ws.py's descriptors (made once over every (batch, head)) read it;
    else None. The address identity b * stride_b + h * stride_h = (b * rb + h * rh) *
    stride_n + h * ch needs stride_b a multiple of stride_n (or one batch) and stride_h =
    rh * stride_n + ch with every head's columns inside a row: (B, N, H, D) memory gives
    (N, 0, D), heads side by side; (B, H, N, D) memory (a transposed view) gives (H * N, N,
    0), heads as row ranges. The head is exactly BLOCK_D wide; row indices within int32."""
    batch, n, h, d = t.shape
    sb, sn, sh, sd = t.stride()
    if d != bd or sd != 1 or sn < d:
        return None
    rh, ch = (0, 0) if h == 1 else divmod(sh, sn)
    if (h - 1) * ch + d > sn:
        return None
    rb = 0
    if batch > 1:
        if sb % sn:
            return None
        rb = sb // sn
    if (batch - 1) * rb + (h - 1) * rh + n >= 2**31:
        return None
    return rb, rh, ch


def block_d(head_dim: int) -> int:
    return max(16, triton.next_power_of_2(head_dim))


# FLASHTRITON_ALLOW_TF32 -> the input_precision of float32 inputs' dots (16-bit inputs: always "tf32", which
# Triton ignores for them). "x3": Triton's tf32x3, three tf32 tensor-core products per dot (a_hi b_hi + a_hi b_lo
# + a_lo b_hi, a = a_hi + a_lo in tf32), ~22 of fp32's 24 mantissa bits per input (README, bench/NOTES.md
# "Session 71").
FP32_DOT_PRECISION = {"0": "ieee", "1": "tf32", "x3": "tf32x3"}


def _dot_precision(dtype: torch.dtype, rows: int | None = None, kernel: str | None = None) -> str:
    """The kernels' DOT_PRECISION. fp32 inputs compute in true fp32 unless the user opts into tf32 or tf32x3 (see
    README). tf32x3 applies to the kernels with tensor-core fp32 tiles (configs.FP32_TC_TABLES: the dense forward
    and backward; kernel None: one of them) at more than configs.FP32_FEW_ROWS query rows (rows: max_seqlen_q).
    The rest run true fp32: the paged forward and the decode kernel (their fp32 tiles are the FMA ones, untimed
    with tf32x3), and calls of few rows, whose one-row paths (qk_levels, the few-rows tiles) the one-query accuracy
    tests hold to the criterion (tf32x3 read dq 1.05x the bound there, H100, session 71), at no cost: a 16-row dot
    is too small for the tensor cores' 64-row MMA."""
    if dtype != torch.float32:
        return "tf32"
    knob = envvars.value("FLASHTRITON_ALLOW_TF32", "0")
    precision = FP32_DOT_PRECISION.get(knob)
    if precision is None:
        raise ValueError(f"FLASHTRITON_ALLOW_TF32 must be one of {sorted(FP32_DOT_PRECISION)}, got {knob!r}")
    if precision == "tf32x3" and ((rows is not None and rows <= configs.FP32_FEW_ROWS)
                                  or (kernel is not None and kernel not in configs.DEFAULTS_FP32_TC)):
        return "ieee"
    return precision


def reg_options(kernel: str, dtype: torch.dtype, bd: int, rows: int | None = None) -> dict:
    """Triton's maxnreg launch option for the true-fp32 kernels where configs.FP32_MAXNREG_AT lists them (why:
    there), {} otherwise; rows as _dot_precision takes it."""
    if _dot_precision(dtype, rows, kernel) == "ieee" and bd in configs.FP32_MAXNREG_AT.get(kernel, ()):
        return {"maxnreg": configs.FP32_MAXNREG}
    return {}


def qk_levels(dtype: torch.dtype, bd: int, seqlen_q: int) -> int:
    """kernels.common.qk_dot's QK_LEVELS for the decode and prefill kernels: true-fp32 calls with
    one query row (max_seqlen_q for varlen) sum the head dim in slices of 16 columns (2^L =
    BLOCK_D / 16, at most 16), the accuracy of the one-row fp32 math the tests compare with
    (sessions 55-59); 0 otherwise."""
    if seqlen_q != 1 or _dot_precision(dtype, seqlen_q) != "ieee":
        return 0
    return min(4, max(0, (bd // 16).bit_length() - 1))


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


def _heaviest_first(varlen: Varlen, cu_blocks: torch.Tensor, n_programs: int, block_m: int,
                    causal: bool = True) -> torch.Tensor:
    """Varlen causal forward: the dispatch order of the query-block programs, by their
    number of visible keys, most first (longest-processing-time first), on the device
    and without a host sync.

    The grid's blocks start in order. With programs in sequence order, the heavy
    last blocks of a long sequence late in the batch started last and ran alone at
    the end: measured 2026-11-29 on the H200, a causal varlen forward of 16k tokens
    (8 sequences, 293..3774) ran at 0.80x the TFLOP/s of the dense kernel, whose grid
    already starts every head's heaviest block first. Slot g runs program order[g];
    the kernel maps a program to (sequence, block) as before, including its own
    heaviest-first reversal inside a sequence, which the work estimate mirrors. causal=False
    (the Gluon VARLEN forward's plain order, session 49): a block's work is its sequence's keys."""
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
    visible = ((block + 1) * block_m + nk - nq).clamp(min=0) if causal else nk
    work = torch.where(valid, torch.minimum(visible, nk), torch.full_like(nk, -1))
    return torch.sort(work, descending=True, stable=True).indices.to(torch.int32)


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


def _common_scalars(params: AttnParams, alibi, anchor: bool = False):
    """The scalars and feature constexprs every prefill kernel takes. anchor (alibi_anchor.needed):
    HAS_ALIBI = 2, kernels/common.scores_log2 anchors the ALiBi bias at max(i + diag, 0)."""
    scale = params.softmax_scale
    softcap = params.softcap
    return dict(
        qk_scale=scale * LOG2E,
        softcap_scale=(2.0 * LOG2E * scale / softcap) if softcap > 0 else 0.0,
        softcap_out=softcap * LOG2E,
        window_left=params.window_left, window_right=params.window_right,
        dropout_p=params.dropout_p,
        HAS_LEFT=params.window_left >= 0, HAS_RIGHT=params.window_right >= 0,
        HAS_ALIBI=(2 if anchor else True) if alibi is not None else False, HAS_SOFTCAP=softcap > 0,
        HAS_DROPOUT=params.dropout_p > 0,
    )


def _alibi_strides(alibi):
    if alibi is None:
        return 0, 0
    return (alibi.stride(0), alibi.stride(1)) if alibi.dim() == 2 else (0, alibi.stride(0))


def _tile(kernel: str, bd: int, q: torch.Tensor, params: AttnParams, n: int, varlen, run,
          rows: int | None = None) -> configs.Tile:
    """rows: the call's query rows (max_seqlen_q), for fp32's few-rows tile (configs.FP32_FEW_ROWS: the
    tuner, whose only fp32 candidate is the default, does not decide those) and its dot precision (tf32x3's
    tensor-core tiles only above FP32_FEW_ROWS: _dot_precision)."""
    if interpreting():
        return configs.INTERPRETER_TILE
    few_rows_fp32 = q.element_size() == 4 and rows is not None and rows <= configs.FP32_FEW_ROWS
    if configs.autotune_enabled() and varlen is None and not few_rows_fp32:
        key = ((q.dtype, _dot_precision(q.dtype, rows, kernel)), params.window_left >= 0, params.window_right >= 0,
               params.softcap > 0, params.dropout_p > 0, configs.seqlen_bucket(n))
        return tuning.pick(kernel, key, bd, q.element_size(), run)
    band = None
    if params.window_left >= 0 and params.window_right >= 0:
        band = params.window_left + params.window_right + 1
    masked = params.window_left >= 0 or params.window_right >= 0
    return configs.default_tile(kernel, bd, n, q.element_size(), window_band=band, masked=masked, rows=rows,
                                fp32_dots=_dot_precision(q.dtype, rows, kernel))
