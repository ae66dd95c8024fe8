"""Decoding with a KV cache: flash_attn_with_kvcache, as in flash-attn 2.x (forward only).

    from flashtriton import flash_attn_with_kvcache
    out = flash_attn_with_kvcache(q, k_cache, v_cache, k=k_step, v=v_step, cache_seqlens=lens,
                                  rotary_cos=cos, rotary_sin=sin, causal=True)

The API validates everything first (structure, then - unless switched off - the
values of the index tensors), then flashtriton.backends.select(q.device) picks the
backend module and its kvcache_fwd runs the call.

Backend interface (flashtriton.triton_backend, flashtriton.reference_backend and
flashtriton.cpu implement the same function):

    kvcache_fwd(q, k_cache, v_cache, k_new, v_new, rotary_cos, rotary_sin, cache_seqlens,
                cache_batch_idx, cache_leftpad, block_table, params, rotary_interleaved,
                alibi_slopes, num_splits, need_lse=True) -> (out, lse)

need_lse=False (return_softmax_lse=False) lets a backend return a scratch lse that a
later call may overwrite.

Everything arrives validated, on q's device, with the caches' dtype equal to q's.
- q (B, Sq, H, D), NOT yet rotated. Query head h reads KV head h // (H // Hk).
- Contiguous cache: k_cache, v_cache (B_cache, S_cache, Hk, D); sequence b lives in
  row cache_batch_idx[b] ((B,) int32, values in [0, B_cache)) or, without it, in row b
  (then B_cache == B). Capacity S_cache.
- Paged cache (block_table is not None): k_cache, v_cache (num_blocks, page_size, Hk, D)
  with page_size a power of two in 1..256, and block_table (B, max_blocks_per_seq)
  int32: position p of sequence b is row p % page_size of page block_table[b, p // page_size].
  Pages may sit anywhere in the pool, in any order. cache_batch_idx is None then.
  Capacity max_blocks_per_seq * page_size.
- cache_seqlens (B,) int32 (the API turns an int or None into one): end[b], the
  number of tokens already in the cache, as an absolute position.
- cache_leftpad (B,) int32 or None: start[b], the first valid cache position
  (0 <= start[b] <= end[b]); positions before it are ignored. None means 0.
- k_new, v_new (B, Snew, Hk, D) or None (both or neither). When given, k_new[b, i]
  (after rotary) and v_new[b, i] are written IN PLACE into the cache at position
  end[b] + i, in both layouts, BEFORE attending. end[b] + Snew <= capacity.
- rotary_cos, rotary_sin (S_ro, R / 2), R = rotary_dim <= D, dtype q's or float32, or
  both None; only given together with k_new. k_new[b, i] is rotated at position
  end[b] + i; q[b, i] at position end[b] + i when the call is causal or windowed
  (params.window_left >= 0 or params.window_right >= 0), else every q[b, i] at position
  end[b] (flash-attn's rule). rotary_interleaved=True: GPT-J pairs (2j, 2j + 1);
  False: GPT-NeoX halves (j, j + R / 2). Only the first R features rotate. The
  rotation is computed in float32 and rounded to the cache / q dtype, and the
  attention sees the rounded values.
- Attention of the (rotated) queries over the keys at positions [start[b], end[b] + Snew)
  of sequence b, with flashtriton.reference.attention's semantics on that slice:
  n = end[b] + Snew - start[b] keys; query i sees key j (0-based in the slice) when
  i + n - Sq - window_left <= j <= i + n - Sq + window_right (a negative bound is
  unbounded; causal is window_right = 0: bottom-right alignment); softcap, then the
  ALiBi bias -slope * |i + n - Sq - j| with slopes (H,) or (B, H) float32.
- params: launchers.prefill.AttnParams(softmax_scale, window_left, window_right,
  softcap, dropout_p=0.0), canonical (causal already turned into window_right = 0).
- num_splits: 0 = the backend's heuristic; > 0 = exactly that many KV chunks (a
  backend without split-KV may ignore it: the result does not depend on it beyond
  rounding).
- Returns out (B, Sq, H, D) in q's dtype (allocated with flashtriton.memory.empty)
  and lse (B, H, Sq) float32: the natural-log logsumexp of the scaled scores; a row
  that sees no key gets lse = +inf and outputs 0.

Value checks. The structure of every argument is checked always. The VALUES of
cache_seqlens, cache_leftpad, cache_batch_idx and the used entries of block_table
(range, capacity, distinct cache rows when appending, rotary table length) need
one small device-to-host copy, a host sync (on CUDA tensors the values it copies are
gathered by one Triton launch, kernels/kvcache_checks.py; elsewhere by torch ops).
They run by default, are skipped while a CUDA graph is being captured or
torch.compile traces, and can be switched off
for latency-critical serving with `with flashtriton.kvcache.value_checks(False):`
or FLASHTRITON_KVCACHE_CHECKS=0. Unchecked out-of-range indices are undefined
behaviour (reads and writes out of bounds), as in flash-attn.
"""
from __future__ import annotations

import contextlib
import math

import torch

from . import backends, envvars, validate
from .launchers import kvcache_checks, plans
from .launchers.prefill import AttnParams

MAX_PAGE_SIZE = 256
MAX_SPLITS = 256

_checks_override: list[bool] = []


class value_checks(contextlib.ContextDecorator):
    """Turn the host-synchronising value checks of flash_attn_with_kvcache on or off
    inside the block (the structure checks always run).

    (A class, not a generator context manager: a serving loop may enter it every step,
    and @contextlib.contextmanager costs ~1 us more an entry and exit, CI CPU, 2026-12.)"""

    def __init__(self, enabled: bool):
        self.enabled = enabled

    def __enter__(self):
        enabled = self.enabled
        if not isinstance(enabled, bool):
            raise TypeError(f"enabled: must be a bool, got {type(enabled).__name__}")
        _checks_override.append(enabled)

    def __exit__(self, *exc):
        _checks_override.pop()
        return False


def _value_checks_on(device: torch.device) -> bool:
    if torch.compiler.is_compiling():
        return False
    if _checks_override:
        if not _checks_override[-1]:
            return False
    elif envvars.value("FLASHTRITON_KVCACHE_CHECKS", "1") == "0":
        return False
    return not (device.type == "cuda" and torch.cuda.is_current_stream_capturing())


def _index_tensor(name, t, batch, device):
    """A (batch,) int32 tensor on q's device."""
    validate._tensor(name, t)
    if t.dtype != torch.int32:
        raise TypeError(f"{name}: dtype must be int32, got {t.dtype}")
    if t.dim() != 1 or t.shape[0] != batch:
        raise ValueError(f"{name}: shape must be (batch,) = ({batch},), got {tuple(t.shape)}")
    if t.device != device:
        raise ValueError(f"{name}: on {t.device} but q is on {device}")


def _check_structure(q, k_cache, v_cache, k, v, rotary_cos, rotary_sin, cache_seqlens, cache_batch_idx,
                     cache_leftpad, block_table, backend):
    """Shapes, dtypes, devices. Returns (capacity, page_size or 0, snew)."""
    if q.dim() != 4:
        raise ValueError(f"q: expected 4 dims (batch, seqlen_q, nheads, headdim), got shape {tuple(q.shape)}")
    allowed = validate.KERNEL_DTYPES if backend != "reference" else validate.KERNEL_DTYPES + (torch.float64,)
    if q.dtype not in allowed:
        names = ", ".join(str(d).replace("torch.", "") for d in allowed)
        raise TypeError(f"q: dtype {q.dtype} is not supported by the {backend} backend (supported: {names})")
    batch, seqlen_q, nheads, head_dim = q.shape
    if batch == 0:
        raise ValueError("q: batch size must be >= 1, got 0")
    if seqlen_q == 0:
        raise ValueError("q: seqlen_q must be >= 1, got 0")
    if nheads == 0:
        raise ValueError("q: nheads must be >= 1, got 0")
    if head_dim % 8 != 0 or not 8 <= head_dim <= validate.MAX_HEAD_DIM:
        raise ValueError(f"q: head dim {head_dim} must be a multiple of 8 between 8 and {validate.MAX_HEAD_DIM}")
    for name, t in (("k_cache", k_cache), ("v_cache", v_cache)):
        validate._tensor(name, t)
        if t.dim() != 4:
            layout = "(num_blocks, page_size, nheads_k, headdim)" if block_table is not None else \
                "(batch_cache, seqlen_cache, nheads_k, headdim)"
            raise ValueError(f"{name}: expected 4 dims {layout}, got shape {tuple(t.shape)}")
        if t.dtype != q.dtype:
            raise TypeError(f"{name}: dtype {t.dtype} differs from q's {q.dtype}; "
                            f"q and the caches must share one dtype")
        if t.device != q.device:
            raise ValueError(f"{name}: on {t.device} but q is on {q.device}; all tensors must be on one device")
    if v_cache.shape != k_cache.shape:
        raise ValueError(f"v_cache: shape {tuple(v_cache.shape)} must equal k_cache's {tuple(k_cache.shape)}")
    if k_cache.shape[3] != head_dim:
        raise ValueError(f"k_cache: head dim {k_cache.shape[3]} differs from q's {head_dim}")
    nheads_k = k_cache.shape[2]
    if nheads_k == 0 or nheads % nheads_k != 0:
        raise ValueError(f"k_cache: nheads_k = {nheads_k} must divide nheads_q = {nheads} (MQA/GQA)")
    for name, t in (("q", q), ("k_cache", k_cache), ("v_cache", v_cache)):
        if t.stride(-1) != 1:
            raise ValueError(f"{name}: the last (headdim) dimension must have stride 1, got stride {t.stride(-1)}")

    if block_table is not None:
        validate._tensor("block_table", block_table)
        if block_table.dtype != torch.int32:
            raise TypeError(f"block_table: dtype must be int32, got {block_table.dtype}")
        if block_table.dim() != 2 or block_table.shape[0] != batch or block_table.shape[1] == 0:
            raise ValueError(f"block_table: shape must be (batch, max_blocks_per_seq) = ({batch}, >= 1), "
                             f"got {tuple(block_table.shape)}")
        if block_table.device != q.device:
            raise ValueError(f"block_table: on {block_table.device} but q is on {q.device}")
        if cache_batch_idx is not None:
            raise ValueError("cache_batch_idx: must be None with a paged cache (block_table given); "
                             "the block table already maps every sequence to its pages")
        page_size = k_cache.shape[1]
        if page_size < 1 or page_size > MAX_PAGE_SIZE or page_size & (page_size - 1):
            raise ValueError(f"k_cache: page size (dim 1 of a paged cache) must be a power of two in "
                             f"1..{MAX_PAGE_SIZE}, got {page_size}")
        if k_cache.shape[0] == 0:
            raise ValueError("k_cache: a paged cache needs at least one block, got num_blocks = 0")
        capacity = block_table.shape[1] * page_size
    else:
        page_size = 0
        capacity = k_cache.shape[1]
        if cache_batch_idx is not None:
            _index_tensor("cache_batch_idx", cache_batch_idx, batch, q.device)
            if k_cache.shape[0] == 0:
                raise ValueError("k_cache: batch_cache must be >= 1 with cache_batch_idx, got 0")
        elif k_cache.shape[0] != batch:
            raise ValueError(f"k_cache: batch_cache {k_cache.shape[0]} differs from q's batch {batch} "
                             f"(pass cache_batch_idx to select cache rows)")

    if (k is None) != (v is None):
        raise ValueError("k, v: give both new keys and new values, or neither")
    snew = 0
    if k is not None:
        for name, t in (("k", k), ("v", v)):
            validate._tensor(name, t)
            if t.dim() != 4:
                raise ValueError(f"{name}: expected 4 dims (batch, seqlen_new, nheads_k, headdim), "
                                 f"got shape {tuple(t.shape)}")
            if t.dtype != q.dtype:
                raise TypeError(f"{name}: dtype {t.dtype} differs from q's {q.dtype}")
            if t.device != q.device:
                raise ValueError(f"{name}: on {t.device} but q is on {q.device}")
            if t.stride(-1) != 1:
                raise ValueError(f"{name}: the last (headdim) dimension must have stride 1, got stride {t.stride(-1)}")
        snew = k.shape[1]
        expected = (batch, snew, nheads_k, head_dim)
        for name, t in (("k", k), ("v", v)):
            if tuple(t.shape) != expected:
                raise ValueError(f"{name}: shape must be (batch, seqlen_new, nheads_k, headdim) = {expected}, "
                                 f"got {tuple(t.shape)}")
        if snew > capacity:
            raise ValueError(f"k: seqlen_new = {snew} exceeds the cache capacity {capacity}")

    if (rotary_cos is None) != (rotary_sin is None):
        raise ValueError("rotary_cos, rotary_sin: give both or neither")
    if rotary_cos is not None:
        if k is None:
            raise ValueError("rotary_cos: rotary embedding needs the new keys k and v (it rotates k and q at "
                             "the positions where k is appended)")
        for name, t in (("rotary_cos", rotary_cos), ("rotary_sin", rotary_sin)):
            validate._tensor(name, t)
            if t.dim() != 2:
                raise ValueError(f"{name}: expected 2 dims (seqlen_ro, rotary_dim / 2), got shape {tuple(t.shape)}")
            if t.dtype not in (q.dtype, torch.float32):
                raise TypeError(f"{name}: dtype must be q's ({q.dtype}) or float32, got {t.dtype}")
            if t.device != q.device:
                raise ValueError(f"{name}: on {t.device} but q is on {q.device}")
            if t.stride(-1) != 1:
                raise ValueError(f"{name}: the last dimension must have stride 1, got stride {t.stride(-1)}")
        if rotary_sin.shape != rotary_cos.shape or rotary_sin.dtype != rotary_cos.dtype:
            raise ValueError(f"rotary_sin: shape {tuple(rotary_sin.shape)} and dtype {rotary_sin.dtype} must equal "
                             f"rotary_cos's {tuple(rotary_cos.shape)}, {rotary_cos.dtype}")
        half = rotary_cos.shape[1]
        if half == 0 or 2 * half > head_dim:
            raise ValueError(f"rotary_cos: rotary_dim = 2 * {half} must be in 2..headdim = {head_dim}")
        if rotary_cos.shape[0] == 0:
            raise ValueError("rotary_cos: needs at least one position (seqlen_ro >= 1)")

    if isinstance(cache_seqlens, torch.Tensor):
        _index_tensor("cache_seqlens", cache_seqlens, batch, q.device)
    elif cache_seqlens is None:
        if k is not None:
            raise ValueError("cache_seqlens: required when appending k and v (they are written at cache_seqlens)")
    elif isinstance(cache_seqlens, int) and not isinstance(cache_seqlens, bool):
        if not 0 <= cache_seqlens <= capacity - snew:
            raise ValueError(f"cache_seqlens: {cache_seqlens} must be in [0, capacity - seqlen_new] = "
                             f"[0, {capacity} - {snew}] (the cache is too small for the append)"
                             if snew else f"cache_seqlens: {cache_seqlens} must be in [0, capacity = {capacity}]")
    else:
        raise TypeError(f"cache_seqlens: expected an int, a (batch,) int32 tensor or None, "
                        f"got {type(cache_seqlens).__name__}")
    if cache_leftpad is not None:
        _index_tensor("cache_leftpad", cache_leftpad, batch, q.device)
    return capacity, page_size, snew


# Structures that passed _check_structure, by signature. The check reads nothing but each
# tensor argument's type, shape, strides, dtype and device, an int cache_seqlens' value and
# the backend, so a call with the same signature passes it again: a decode loop checks its
# structure once. (Its ~25 Python branches were ~15% of a replayed decode step's host time,
# ~3 us of 17 on the CI CPU, 2026-11-30.) Only passing signatures are stored; a failing
# call raises from _check_structure every time.
#
# Each entry also holds a token for its signature (a _SignatureToken): with signed, the launch
# plan's key takes the token in place of the signature (launchers.decode.kvcache_fwd), which
# hashes and compares by identity where the signature's ~12 tuples hashed and compared field
# by field in every step's plan lookup. One token an entry, so equal tokens mean equal
# signatures; a signature stored again after a clear() gets a new token, and its calls
# record a new plan.
_STRUCTURES: dict = {}
_STRUCTURES_MAX = 1024


class _SignatureToken:
    """Stands for one signature in launch plan keys (hash and equality by identity)."""
    __slots__ = ()


def _checked_structure(*args, signed=None):
    """_check_structure(*args), remembered per signature. Returns (capacity, page_size, snew,
    token): token is the memo entry's _SignatureToken (None when nothing is remembered).
    signed: plans.sign of the tensor arguments (all tensors or None), which is then the key."""
    if torch.compiler.is_compiling():          # no global state mutated under tracing
        return _check_structure(*args) + (None,)
    if signed is not None:
        key = (args[-1], signed)
    else:
        key = [args[-1]]                       # the backend
        for t in args[:-1]:
            if t is None or type(t) is int:    # (an int: cache_seqlens, by value)
                key.append(t)
            elif isinstance(t, torch.Tensor):
                key.append((t.shape, t.stride(), t.dtype, t.device))
            else:                              # anything else: no memo, the check says what is wrong
                return _check_structure(*args) + (None,)
        key = tuple(key)
    hit = _STRUCTURES.get(key)
    if hit is None:
        hit = _check_structure(*args) + (_SignatureToken(),)
        if len(_STRUCTURES) >= _STRUCTURES_MAX:
            _STRUCTURES.clear()
        _STRUCTURES[key] = hit
    return hit


# Where the value checks gather their values: None (default) in one Triton launch
# (launchers/kvcache_checks.py) for CUDA tensors, with torch ops (_value_rows_torch) for
# any other device (the CPU backend; the interpreter's CPU tensors); True / False force
# the kernel / torch ops (tests: the kernel's path under the interpreter).
_KERNEL_VALUE_ROWS = None


def _value_rows_torch(cache_seqlens, cache_batch_idx, cache_leftpad, block_table, num_blocks, page_size, snew):
    """The (5, B) int64 tensor of kernels/kvcache_checks.py (the layout is there), with torch
    ops: the CPU path, and the truth of the kernel's tests."""
    ends = cache_seqlens.to(torch.int64)
    zeros = torch.zeros_like(ends)
    starts = cache_leftpad.to(torch.int64) if cache_leftpad is not None else zeros
    idx = cache_batch_idx.to(torch.int64) if cache_batch_idx is not None else zeros
    if block_table is None:
        return torch.stack([ends, starts, idx, torch.full_like(ends, -1), zeros])
    # The first used page with an out-of-range entry, per sequence (-1: none). Used
    # pages are [start // page_size, ceil((end + snew) / page_size)).
    bt = block_table.to(torch.int64)
    col = torch.arange(bt.shape[1], device=bt.device)[None, :]
    first = starts[:, None] // page_size
    last = (ends[:, None] + snew + page_size - 1) // page_size
    bad = (col >= first) & (col < last) & ((bt < 0) | (bt >= num_blocks))
    bad_col = torch.where(bad, col, bt.shape[1]).amin(dim=1).masked_fill_(~bad.any(dim=1), -1)
    bad_val = bt.gather(1, bad_col.clamp_min(0)[:, None]).squeeze(1)
    return torch.stack([ends, starts, idx, bad_col, bad_val])


def _check_values(q, k_cache, cache_seqlens, cache_batch_idx, cache_leftpad, block_table, rotary_cos,
                  capacity, page_size, snew, per_row_rotary, signed=None):
    """Values of the index tensors, with one device-to-host copy of a (5, batch) tensor.
    signed: the structure memo's token when the call was signed (kernel path's plan key)."""
    batch, seqlen_q = q.shape[0], q.shape[1]
    use_kernel = _KERNEL_VALUE_ROWS
    if use_kernel is None:
        use_kernel = q.device.type == "cuda"
    if use_kernel:
        rows = kvcache_checks.value_rows(cache_seqlens, cache_leftpad, cache_batch_idx, block_table,
                                         k_cache.shape[0], page_size, snew, signed)
    else:
        rows = _value_rows_torch(cache_seqlens, cache_batch_idx, cache_leftpad, block_table, k_cache.shape[0],
                                 page_size, snew)
    vals = rows.cpu().tolist()  # the one host sync
    ends, starts, idx, bad_col, bad_val = vals
    if cache_batch_idx is None:
        idx = None
    for b, e in enumerate(ends):
        if e < 0:
            raise ValueError(f"cache_seqlens: entry {b} is {e}; must be >= 0")
        if e + snew > capacity:
            if snew:
                raise ValueError(f"cache_seqlens: entry {b} is {e}, and appending seqlen_new = {snew} tokens would "
                                 f"end at {e + snew} > the cache capacity {capacity}: the cache is too small "
                                 f"for the append")
            raise ValueError(f"cache_seqlens: entry {b} is {e} > the cache capacity {capacity}")
        if not 0 <= starts[b] <= e:
            raise ValueError(f"cache_leftpad: entry {b} is {starts[b]}; must be in [0, cache_seqlens[{b}] = {e}]")
    if idx is not None:
        for b, i in enumerate(idx):
            if not 0 <= i < k_cache.shape[0]:
                raise ValueError(f"cache_batch_idx: entry {b} is {i}; must be in [0, batch_cache = {k_cache.shape[0]})")
        if snew and len(set(idx)) != len(idx):
            dup = next(i for i in idx if idx.count(i) > 1)
            raise ValueError(f"cache_batch_idx: cache row {dup} appears more than once; appending k and v needs "
                             f"distinct rows")
    if block_table is not None:
        for b in range(batch):
            if bad_col[b] >= 0:
                raise ValueError(f"block_table: entry [{b}, {bad_col[b]}] is {bad_val[b]}; used entries must be "
                                 f"block indices in [0, num_blocks = {k_cache.shape[0]})")
    if rotary_cos is not None:
        s_ro = rotary_cos.shape[0]
        for b, e in enumerate(ends):
            need = e + max(snew, seqlen_q if per_row_rotary else 1) - 1
            if need >= s_ro:
                raise ValueError(f"rotary_cos: has {s_ro} positions, but sequence {b} needs position {need} "
                                 f"(cache_seqlens[{b}] = {e})")


# The AttnParams of a call, one object per value (a decode loop makes the same every step:
# a frozen dataclass costs ~0.5 us to build and its __eq__ ~0.3 us in each plan lookup,
# where the same object compares by identity). Only for values that equal no other
# representation (window bounds of type int, not bool; no zero of either sign among the
# floats but a positive-zero softcap), so the object handed on is exactly the one the call
# would build; and not while torch.compile traces (no global state mutated there).
_PARAMS: dict = {}
_PARAMS_MAX = 1024


def _attn_params(scale: float, window_left, window_right, softcap: float) -> AttnParams:
    if (torch.compiler.is_compiling() or type(window_left) is not int or type(window_right) is not int
            or scale == 0.0 or (softcap <= 0.0 and math.copysign(1.0, softcap) < 0.0)):
        return AttnParams(scale, window_left, window_right, softcap, 0.0)
    key = (scale, window_left, window_right, softcap)
    params = _PARAMS.get(key)
    if params is None:
        params = AttnParams(scale, window_left, window_right, softcap, 0.0)
        if len(_PARAMS) >= _PARAMS_MAX:
            _PARAMS.clear()
        _PARAMS[key] = params
    return params


def flash_attn_with_kvcache(q, k_cache, v_cache, k=None, v=None, rotary_cos=None, rotary_sin=None,
                            cache_seqlens=None, cache_batch_idx=None, cache_leftpad=None, block_table=None,
                            softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0,
                            rotary_interleaved=True, alibi_slopes=None, num_splits=0, return_softmax_lse=False):
    """Attention of q over a KV cache, optionally appending k and v (with rotary) first.

    q (B, Sq, H, D); k_cache, v_cache (B_cache, S_cache, Hk, D), or paged
    (num_blocks, page_size, Hk, D) with block_table (B, max_blocks_per_seq) int32;
    k, v (B, Snew, Hk, D) are written into the caches in place at cache_seqlens;
    cache_seqlens an int or a (B,) int32 tensor (None: the whole capacity);
    rotary_cos / rotary_sin (S_ro, rotary_dim / 2); cache_batch_idx (B,) int32;
    cache_leftpad (B,) int32. num_splits = 0 picks the split-KV count by heuristic.
    Returns out (B, Sq, H, D), and with return_softmax_lse=True (out, lse (B, H, Sq)).
    The full contract is the docstring of flashtriton.kvcache.
    """
    validate._tensor("q", q)
    device = q.device
    backend = backends.select(device)
    tensors = (q, k_cache, v_cache, k, v, rotary_cos, rotary_sin, cache_seqlens, cache_batch_idx, cache_leftpad,
               block_table)
    # signed once for the structure memo and the launch plan's key (plans.sign), when every
    # argument is a tensor or None and cache_seqlens a tensor (an int or None becomes one
    # below; a wrong type: the long way, whose check names it)
    signed = None
    if backend == "triton" and isinstance(cache_seqlens, torch.Tensor) and not torch.compiler.is_compiling():
        try:
            signed = plans.sign(tensors)
        except (AttributeError, TypeError):    # a wrong type somewhere: _check_structure names it
            signed = None
    capacity, page_size, snew, token = _checked_structure(*tensors, backend, signed=signed)
    batch = q.shape[0]
    validate.options(softmax_scale=softmax_scale, window_size=window_size, softcap=softcap, dropout_p=0.0,
                     alibi_slopes=alibi_slopes, q=q, batch=batch)
    if type(causal) is not bool or type(rotary_interleaved) is not bool or type(return_softmax_lse) is not bool:
        for name, flag in (("causal", causal), ("rotary_interleaved", rotary_interleaved),
                           ("return_softmax_lse", return_softmax_lse)):
            if not isinstance(flag, bool):
                raise TypeError(f"{name}: must be a bool, got {type(flag).__name__}")
    if not isinstance(num_splits, int) or isinstance(num_splits, bool) or not 0 <= num_splits <= MAX_SPLITS:
        raise ValueError(f"num_splits: must be an int in [0, {MAX_SPLITS}] (0: heuristic), got {num_splits!r}")

    window_left, window_right = int(window_size[0]), int(window_size[1])     # (bools admitted as ints)
    if causal:
        window_right = 0
    # flash-attn: a window at least as long as the cache is no window (this only
    # matters for the rotary rule, "q rotated per row when causal or windowed").
    if window_left >= capacity:
        window_left = -1
    if window_right >= capacity:
        window_right = -1
    scale = float(softmax_scale) if softmax_scale is not None else 1.0 / math.sqrt(q.shape[-1])
    params = _attn_params(scale, window_left, window_right, float(softcap))

    if cache_seqlens is None:
        cache_seqlens = torch.full((batch,), capacity, dtype=torch.int32, device=device)
    elif isinstance(cache_seqlens, int):
        cache_seqlens = torch.full((batch,), cache_seqlens, dtype=torch.int32, device=device)
    # The kernels read cache_seqlens, cache_leftpad and cache_batch_idx with unit stride and
    # block_table's rows with a unit column stride: a strided view is copied (the structure
    # memo and the plan key see the caller's strides, so a strided call copies every time).
    # (Session 26: strided views were read as if packed, a silent wrong answer;
    # tests/test_kvcache.py::test_regression_strided_index_tensors.)
    if cache_seqlens.dim() == 1 and cache_seqlens.stride(0) != 1 and batch > 1:
        cache_seqlens = cache_seqlens.contiguous()
    if cache_leftpad is not None and cache_leftpad.stride(0) != 1 and batch > 1:
        cache_leftpad = cache_leftpad.contiguous()
    if cache_batch_idx is not None and cache_batch_idx.stride(0) != 1 and batch > 1:
        cache_batch_idx = cache_batch_idx.contiguous()
    if block_table is not None and block_table.stride(1) != 1 and block_table.shape[1] > 1:
        block_table = block_table.contiguous()
    if _value_checks_on(device):
        _check_values(q, k_cache, cache_seqlens, cache_batch_idx, cache_leftpad, block_table, rotary_cos,
                      capacity, page_size, snew, window_left >= 0 or window_right >= 0,
                      token if signed is not None else None)

    module = backends.get(backend)
    if not hasattr(module, "kvcache_fwd"):
        raise NotImplementedError(f"flash_attn_with_kvcache: the {backend} backend does not implement kvcache_fwd")
    # (the plan key takes the signature's token: see _STRUCTURES)
    extra = {"signed": token} if signed is not None else {}
    out, lse = module.kvcache_fwd(q, k_cache, v_cache, k, v, rotary_cos, rotary_sin, cache_seqlens, cache_batch_idx,
                                  cache_leftpad, block_table, params, rotary_interleaved, alibi_slopes, num_splits,
                                  need_lse=return_softmax_lse, **extra)
    return (out, lse) if return_softmax_lse else out
