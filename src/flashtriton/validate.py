"""Input checks, run before anything is launched.

Every failure is a TypeError (wrong type or dtype) or a ValueError (anything else)
whose message starts with the argument's name and states the rule it broke.
"""
from __future__ import annotations

import math

import torch

LOW_PRECISION = (torch.float16, torch.bfloat16)
KERNEL_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
MAX_HEAD_DIM = 256


def _tensor(name, t):
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")


def _inputs_ok(q, k, v, varlen: bool) -> bool:
    """True when q, k, v pass every check of attention_inputs, for any backend: the common
    case in one pass, without the per-check loops (~3 us of a replayed eager forward's host
    time on the CI CPU, bench/prefill_host_probe.py). False does not mean an error: plain
    tensors only, the kernel dtypes only (float64 on the reference backend, tensor
    subclasses) and anything unusual take the full checks, which raise or pass."""
    T = torch.Tensor
    if type(q) is not T or type(k) is not T or type(v) is not T:
        return False
    qs, ks = q.shape, k.shape
    ndim = 3 if varlen else 4
    dt = q.dtype
    if len(qs) != ndim or len(ks) != ndim or v.shape != ks or dt not in KERNEL_DTYPES:
        return False
    head_dim, nheads, nheads_k = qs[-1], qs[-2], ks[-2]
    if (k.dtype != dt or v.dtype != dt or ks[-1] != head_dim or head_dim % 8 != 0
            or not 8 <= head_dim <= MAX_HEAD_DIM or nheads_k == 0 or nheads == 0 or nheads % nheads_k != 0
            or q.stride(-1) != 1 or k.stride(-1) != 1 or v.stride(-1) != 1):
        return False
    if not varlen and (ks[0] != qs[0] or qs[0] == 0 or qs[1] == 0 or ks[1] == 0):
        return False
    device = q.device
    return k.device == device and v.device == device


def attention_inputs(q, k, v, *, varlen: bool, backend: str):
    """Checks q, k, v: (B, N, H, D) each, or (total, H, D) each when varlen."""
    if _inputs_ok(q, k, v, varlen):
        return
    ndim = 3 if varlen else 4
    layout = "(total, nheads, headdim)" if varlen else "(batch, seqlen, nheads, headdim)"
    for name, t in (("q", q), ("k", k), ("v", v)):
        _tensor(name, t)
        if t.dim() != ndim:
            raise ValueError(f"{name}: expected {ndim} dims {layout}, got shape {tuple(t.shape)}")
    allowed = KERNEL_DTYPES if backend != "reference" else (torch.float16, torch.bfloat16, torch.float32, torch.float64)
    if q.dtype not in allowed:
        names = ", ".join(str(d).replace("torch.", "") for d in allowed)
        raise TypeError(f"q: dtype {q.dtype} is not supported by the {backend} backend (supported: {names})")
    for name, t in (("k", k), ("v", v)):
        if t.dtype != q.dtype:
            raise TypeError(f"{name}: dtype {t.dtype} differs from q's {q.dtype}; q, k and v must share one dtype")
        if t.device != q.device:
            raise ValueError(f"{name}: on {t.device} but q is on {q.device}; all tensors must be on one device")
    if k.shape != v.shape:
        raise ValueError(f"v: shape {tuple(v.shape)} must equal k's {tuple(k.shape)}")
    head_dim = q.shape[-1]
    if k.shape[-1] != head_dim:
        raise ValueError(f"k: head dim {k.shape[-1]} differs from q's {head_dim}; q, k and v must share the head dim")
    if head_dim % 8 != 0 or not 8 <= head_dim <= MAX_HEAD_DIM:
        raise ValueError(f"q: head dim {head_dim} must be a multiple of 8 between 8 and {MAX_HEAD_DIM}")
    nheads, nheads_k = q.shape[-2], k.shape[-2]
    if nheads_k == 0 or nheads % nheads_k != 0:
        raise ValueError(f"k: nheads_k = {nheads_k} must divide nheads_q = {nheads} (MQA/GQA)")
    if not varlen:
        if k.shape[0] != q.shape[0]:
            raise ValueError(f"k: batch {k.shape[0]} differs from q's batch {q.shape[0]}")
        for name, t in (("q", q), ("k", k)):
            if t.shape[0] == 0:
                raise ValueError(f"{name}: batch size must be >= 1, got 0")
            if t.shape[1] == 0:
                raise ValueError(f"{name}: seqlen must be >= 1, got 0")
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.stride(-1) != 1:
            raise ValueError(f"{name}: the last (headdim) dimension must have stride 1, got stride {t.stride(-1)}")
    if nheads == 0:
        raise ValueError("q: nheads must be >= 1, got 0")


def _finite(x) -> bool:
    """math.isfinite by comparisons: they also work on the symbolic floats of
    torch.compile(dynamic=True), where math.isfinite is a graph break."""
    return -math.inf < x < math.inf  # False for NaN too


def options(*, softmax_scale, window_size, softcap, dropout_p, alibi_slopes, q, batch: int):
    # the defaults (no scale, window, softcap, dropout or ALiBi) pass every check below:
    # one test (~1 us of a replayed eager call's host time, CI CPU); anything else, or
    # another type (a bool, a list window, an int 0), takes the checks
    if (softmax_scale is None and alibi_slopes is None and type(softcap) is float and softcap == 0.0
            and type(dropout_p) is float and dropout_p == 0.0 and type(window_size) is tuple
            and len(window_size) == 2 and type(window_size[0]) is int and type(window_size[1]) is int
            and window_size[0] >= -1 and window_size[1] >= -1):
        return
    if softmax_scale is not None and not (isinstance(softmax_scale, (int, float)) and _finite(softmax_scale)):
        raise ValueError(f"softmax_scale: must be a finite float or None, got {softmax_scale!r}")
    if not (isinstance(window_size, (tuple, list)) and len(window_size) == 2
            and isinstance(window_size[0], int) and window_size[0] >= -1
            and isinstance(window_size[1], int) and window_size[1] >= -1):
        raise ValueError(f"window_size: must be a pair (left, right) of ints >= -1 (-1: unbounded), got {window_size!r}")
    if not (isinstance(softcap, (int, float)) and _finite(softcap) and softcap >= 0):
        raise ValueError(f"softcap: must be a finite float >= 0 (0 disables it), got {softcap!r}")
    if not (isinstance(dropout_p, (int, float)) and 0.0 <= dropout_p < 1.0):
        raise ValueError(f"dropout_p: must be in [0, 1), got {dropout_p!r}")
    if alibi_slopes is not None:
        _tensor("alibi_slopes", alibi_slopes)
        nheads = q.shape[-2]
        if alibi_slopes.dtype != torch.float32:
            raise TypeError(f"alibi_slopes: dtype must be float32, got {alibi_slopes.dtype}")
        if alibi_slopes.device != q.device:
            raise ValueError(f"alibi_slopes: on {alibi_slopes.device} but q is on {q.device}")
        if tuple(alibi_slopes.shape) not in ((nheads,), (batch, nheads)):
            raise ValueError(f"alibi_slopes: shape must be (nheads,) = ({nheads},) or (batch, nheads) = "
                             f"({batch}, {nheads}), got {tuple(alibi_slopes.shape)}")
        if alibi_slopes.stride(-1) != 1:
            raise ValueError("alibi_slopes: the last dimension must have stride 1")


def block_table(table, batch: int, device):
    """A paged cache's block table (flash_attn_with_kvcache, flash_attn_varlen_func): int32
    (batch, max_blocks_per_seq >= 1) on the queries' device. Its entries are checked inside
    the ops (a host read), where the sequences' lengths are known."""
    _tensor("block_table", table)
    if table.dtype != torch.int32:
        raise TypeError(f"block_table: dtype must be int32, got {table.dtype}")
    if table.dim() != 2 or table.shape[0] != batch or table.shape[1] == 0:
        raise ValueError(f"block_table: shape must be (batch, max_blocks_per_seq) = ({batch}, >= 1), "
                         f"got {tuple(table.shape)}")
    if table.device != device:
        raise ValueError(f"block_table: on {table.device} but q is on {device}")


def cu_seqlens(name: str, cu: torch.Tensor, total: int, device, batch: int | None):
    """Structure of a cu_seqlens tensor (no host sync); its values are checked by
    cu_seqlens_values inside the op, just before launch."""
    _tensor(name, cu)
    if cu.dtype != torch.int32:
        raise TypeError(f"{name}: dtype must be int32, got {cu.dtype}")
    if cu.dim() != 1 or cu.numel() < 2:
        raise ValueError(f"{name}: must be 1-D with batch + 1 >= 2 entries, got shape {tuple(cu.shape)}")
    if batch is not None and cu.numel() != batch + 1:
        raise ValueError(f"{name}: length must be batch + 1 = {batch + 1} (as cu_seqlens_q), got {cu.numel()}")
    if cu.device != device:
        raise ValueError(f"{name}: on {cu.device} but q is on {device}")


def cu_seqlens_values(name: str, cu: torch.Tensor, total: int, max_seqlen: int):
    """Values of a cu_seqlens tensor: starts at 0, never decreases, ends at total.

    Reading them costs a device-to-host copy, which is a host sync: every launch after
    it waits for the host (measured 2026-11-29 on the H200: a varlen forward of 16k
    tokens took 1.5 ms against 0.7 ms for its kernel). A model calls attention with
    the same cu_seqlens in every layer, so a tensor that passed is remembered, with
    its version counter (bumped by any in-place write) and data pointer; only a new
    or modified tensor is read again."""
    stamp = (cu._version, cu.data_ptr())
    seen = getattr(cu, "_flashtriton_checked", None)
    if seen is not None and seen[0] == stamp and seen[1] == total:
        longest = seen[2]
    else:
        vals = cu.tolist()
        if vals[0] != 0:
            raise ValueError(f"{name}: must start at 0, got {vals[0]}")
        lens = [b - a for a, b in zip(vals, vals[1:])]
        if any(n < 0 for n in lens):
            i = next(i for i, n in enumerate(lens) if n < 0)
            raise ValueError(f"{name}: must be non-decreasing, but entry {i + 1} ({vals[i + 1]}) < entry {i} "
                             f"({vals[i]})")
        if vals[-1] != total:
            raise ValueError(f"{name}: last entry must equal the total number of tokens {total}, got {vals[-1]}")
        longest = max(lens)
        try:
            cu._flashtriton_checked = (stamp, total, longest)
        except (AttributeError, RuntimeError):  # a tensor subclass that refuses attributes: no cache
            pass
    if longest > max_seqlen:
        raise ValueError(f"max_seqlen_{name[-1]}: {max_seqlen} is less than the longest sequence in {name} "
                         f"({longest})")
