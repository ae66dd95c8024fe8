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
later call may overwrite, or None.

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

A call whose tensor signature and options were seen before (the steps of a decoding loop)
replays its launch plans straight from the structure memo (_Step): the structure and
option checks it passed are not repeated, the value checks (when on) run every call.
The CPU backend's calls do the same with their own steps (_CpuStep): its canonical
parameters straight into cpu.kvcache_fwd, value checks (when on) every call.
"""
from __future__ import annotations

import contextlib
import math

import torch
import triton

from . import backends, envvars, validate
from .launchers import decode, kvcache_checks, plans
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
    if not _checks_switch():
        return False
    return not (device.type == "cuda" and torch.cuda.is_current_stream_capturing())


def _checks_switch() -> bool:
    """value_checks() innermost, else FLASHTRITON_KVCACHE_CHECKS (a CPU step's replay asks this
    alone: it runs eagerly, where torch.compiler.is_compiling() costs ~12 us cold after other
    work, session 56)."""
    if _checks_override:
        return _checks_override[-1]
    return envvars.value("FLASHTRITON_KVCACHE_CHECKS", "1") != "0"


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
        validate.block_table(block_table, batch, q.device)
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
# Each entry (a _Structure) also stands for its signature in the launch plans' keys: with
# signed, the plan key takes the entry in place of the signature (launchers.decode.plan_key),
# which hashes and compares by identity where the signature's tuples hashed and compared
# field by field in every step's plan lookup. One entry a signature, so equal entries mean
# equal signatures; a signature stored again after a clear() gets a new entry, and its
# calls record a new plan. And each entry keeps the steps seen with its signature
# (_Step, below), which a call of that signature and those options replays directly.
_STRUCTURES: dict = {}
_STRUCTURES_MAX = 1024


class _Structure:
    """A signature that passed the structure checks: what they computed, and the steps
    (_Step) replayed with it, by _step_key. Hash and equality by identity."""
    __slots__ = ("capacity", "page_size", "snew", "steps")

    def __init__(self, capacity: int, page_size: int, snew: int):
        self.capacity, self.page_size, self.snew = capacity, page_size, snew
        self.steps = {}


def _checked_structure(*args, signed=None) -> _Structure:
    """_check_structure(*args), remembered per signature: its memo entry (an entry not
    stored where nothing is remembered: under torch.compile, or an argument of an
    unexpected type, which the check then names). signed: _signature of the tensor
    arguments (None: signed here, without alignment), which is then the key."""
    if torch.compiler.is_compiling():          # no global state mutated under tracing
        return _Structure(*_check_structure(*args))
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
                return _Structure(*_check_structure(*args))
        key = tuple(key)
    hit = _STRUCTURES.get(key)
    if hit is None:
        hit = _Structure(*_check_structure(*args))
        if len(_STRUCTURES) >= _STRUCTURES_MAX:
            _STRUCTURES.clear()
        _STRUCTURES[key] = hit
    return hit


_Tensor = torch.Tensor


def _signature(q, k_cache, v_cache, k, v, rotary_cos, rotary_sin, cache_seqlens, cache_batch_idx, cache_leftpad,
               block_table):
    """The signature of the tensor arguments: shape, strides, dtype, device and 16-byte
    alignment of each (plans.sign's fields), as one flat tuple; None unless each is a
    torch.Tensor (exactly: a subclass may answer differently) or None, with q, k_cache,
    v_cache and cache_seqlens tensors. Equal exactly when plans.sign of the arguments is
    (the plan keys take the memo entry in its place). Flat: q, k_cache, v_cache and
    cache_seqlens give 20 fields; a paged call's block table 5 more, and any other
    argument one more field (plans.sign of the other seven), so the lengths 20 / 25 / 21
    never mix the three forms. (A decode step without append signs 4-5 tensors in ~1.5
    us where plans.sign's generator over 11 took ~2.1, CI CPU, 2026-12-01.)"""
    T = _Tensor
    if type(q) is not T or type(k_cache) is not T or type(v_cache) is not T or type(cache_seqlens) is not T:
        return None
    head = (q.shape, q.stride(), q.dtype, q.device, q.data_ptr() % 16 == 0,
            k_cache.shape, k_cache.stride(), k_cache.dtype, k_cache.device, k_cache.data_ptr() % 16 == 0,
            v_cache.shape, v_cache.stride(), v_cache.dtype, v_cache.device, v_cache.data_ptr() % 16 == 0,
            cache_seqlens.shape, cache_seqlens.stride(), cache_seqlens.dtype, cache_seqlens.device,
            cache_seqlens.data_ptr() % 16 == 0)
    if (k is None and v is None and rotary_cos is None and rotary_sin is None and cache_batch_idx is None
            and cache_leftpad is None):
        if block_table is None:
            return head
        if type(block_table) is not T:
            return None
        bt = block_table
        return head + (bt.shape, bt.stride(), bt.dtype, bt.device, bt.data_ptr() % 16 == 0)
    rest = (k, v, rotary_cos, rotary_sin, cache_batch_idx, cache_leftpad, block_table)
    for t in rest:
        if t is not None and type(t) is not T:
            return None
    return head + (plans.sign(rest),)


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


def _kernel_value_rows(device: torch.device) -> bool:
    """Whether the value checks gather their values by the kernel (see _KERNEL_VALUE_ROWS)."""
    use_kernel = _KERNEL_VALUE_ROWS
    return device.type == "cuda" if use_kernel is None else use_kernel


def _check_values(q, k_cache, cache_seqlens, cache_batch_idx, cache_leftpad, block_table, rotary_cos,
                  capacity, page_size, snew, per_row_rotary, signed=None):
    """Values of the index tensors, with one device-to-host copy of a (5, batch) tensor.
    signed: the structure memo's entry when the call was signed (kernel path's plan key)."""
    if _kernel_value_rows(q.device):
        rows = kvcache_checks.value_rows(cache_seqlens, cache_leftpad, cache_batch_idx, block_table,
                                         k_cache.shape[0], page_size, snew, signed)
    else:
        rows = _value_rows_torch(cache_seqlens, cache_batch_idx, cache_leftpad, block_table, k_cache.shape[0],
                                 page_size, snew)
    _check_rows(rows.cpu().tolist(), q.shape[0], q.shape[1], k_cache.shape[0], capacity, snew,  # the one sync
                cache_batch_idx is not None, block_table is not None,
                rotary_cos.shape[0] if rotary_cos is not None else None, per_row_rotary)


def _check_rows(vals, batch: int, seqlen_q: int, cache_dim0: int, capacity: int, snew: int, has_batch_idx: bool,
                has_table: bool, s_ro, per_row_rotary: bool):
    """The value checks on the rows read back (vals: the (5, batch) rows as lists; layout
    in kernels/kvcache_checks.py). cache_dim0: k_cache.shape[0] (batch_cache, or a paged
    cache's num_blocks); s_ro: rotary_cos.shape[0], None without rotary. Raises on the
    first bad value."""
    ends, starts, idx, bad_col, bad_val = vals
    if not has_batch_idx:
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
            if not 0 <= i < cache_dim0:
                raise ValueError(f"cache_batch_idx: entry {b} is {i}; must be in [0, batch_cache = {cache_dim0})")
        if snew and len(set(idx)) != len(idx):
            dup = next(i for i in idx if idx.count(i) > 1)
            raise ValueError(f"cache_batch_idx: cache row {dup} appears more than once; appending k and v needs "
                             f"distinct rows")
    if has_table:
        for b in range(batch):
            if bad_col[b] >= 0:
                raise ValueError(f"block_table: entry [{b}, {bad_col[b]}] is {bad_val[b]}; used entries must be "
                                 f"block indices in [0, num_blocks = {cache_dim0})")
    if s_ro is not None:
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


# Steps seen before. A serving loop calls with the same signature and options every step;
# each such call, once seen, replays its launch plans from here: it signs its tensors once
# (_signature), finds the memo entry and in it the step by its options (_step_key), runs
# the value checks (if on) and replays the decode plan, skipping the checks already passed
# for this signature and the option parsing, plan keys and plan lookups of the long way.
# (B = 1, L = 8k, paged or not, CI CPU host simulation, bench/decode_host_sim.py,
# 2026-12-01: 14.7-15.3 -> 8.7-9.2 us a call with the value checks off, 22.1-23.4 ->
# 12.4-13.1 with them on, with the launch changes in plans.py; H200 machine, host us a
# call, bench/gpu/s27_decode_host_fast_ab.py: 43-46 -> 26-28 off, 91-99 -> 56-59 on.)
#
# A step is stored after a call of its signature and options went the long way and left
# launch plans to replay (the decode's, and the value checks' when they run by the
# kernel); the key holds everything else that way reads: the options (of exact types, so
# that no value passes for another that fails a check: 1 for True, a float for an int),
# ALiBi's signature, the FLASHTRITON_* variables read per call, the checks' switch, the
# interpreter knob and the stream. A step is not stored (the call goes the long way every
# time) where the long way copies an index tensor (a strided view) or replays nothing; none
# is used under torch.compile, during CUDA-graph capture, inside a decode options() block,
# or after plans.clear() (the plans' generation).
_STEPS_MAX = 64         # steps per signature (options x streams x environments)
_STEP_ENV = envvars.raw_reader(("FLASHTRITON_KVCACHE_CHECKS",) + plans._ENV + decode._ENV_KEYS)


class _Step:
    """A call seen before: the decode's launch plan, the plans' generation it was taken
    in, and the value checks (a _StepChecks, None while they are off)."""
    __slots__ = ("plan", "generation", "checks")

    def __init__(self, plan, generation: int, checks):
        self.plan, self.generation, self.checks = plan, generation, checks


class _StepChecks:
    """A step's value checks: the value rows' launch plan (None: gathered by torch ops),
    _value_rows_torch's scalars and _check_rows' arguments after the rows."""
    __slots__ = ("plan", "cache_dim0", "page_size", "snew", "rows_args")

    def __init__(self, plan, cache_dim0: int, page_size: int, snew: int, rows_args: tuple):
        self.plan, self.cache_dim0, self.page_size, self.snew = plan, cache_dim0, page_size, snew
        self.rows_args = rows_args


def _forget_steps():
    """plans.clear()'s hook: every step dropped with the plans (a step whose generation is
    past would never replay, but its plan, with the plan's workspaces, would stay alive)."""
    for structure in _STRUCTURES.values():
        structure.steps.clear()


plans.on_clear.append(_forget_steps)


def _options_key(softmax_scale, causal, window_size, softcap, rotary_interleaved, alibi_slopes, num_splits,
                 return_softmax_lse):
    """The options of a call as a step key's head (both backends' steps), or None where no
    step is kept: options of another type than the API's defaults take (so that no equal
    value of a failing type, 1 for True, finds a step) or ALiBi slopes that are no plain
    tensor. ALiBi enters by its signature (its values are read at replay)."""
    if not (type(causal) is bool and type(rotary_interleaved) is bool and type(return_softmax_lse) is bool
            and type(num_splits) is int and type(softcap) is float
            and (softmax_scale is None or type(softmax_scale) is float)
            and type(window_size) is tuple and len(window_size) == 2
            and type(window_size[0]) is int and type(window_size[1]) is int):
        return None
    # a step replays the AttnParams of its first call: no zero passes for the other sign's
    # (a softmax_scale or softcap of -0.0 beside 0.0 compare equal in the key)
    if softmax_scale == 0.0 or (softcap == 0.0 and math.copysign(1.0, softcap) < 0.0):
        return None
    if alibi_slopes is None:
        alibi = None
    elif type(alibi_slopes) is _Tensor:
        a = alibi_slopes
        alibi = (a.shape, a.stride(), a.dtype, a.device, a.data_ptr() % 16 == 0)
    else:
        return None
    return (softmax_scale, causal, window_size, softcap, rotary_interleaved, num_splits, return_softmax_lse, alibi)


def _step_key(q, softmax_scale, causal, window_size, softcap, rotary_interleaved, alibi_slopes, num_splits,
              return_softmax_lse):
    """What a triton step's replay depends on besides its tensors' signature (see _Step), or
    None where no step is kept (the long way, every time)."""
    head = _options_key(softmax_scale, causal, window_size, softcap, rotary_interleaved, alibi_slopes, num_splits,
                        return_softmax_lse)
    if head is None or decode._override or (q.is_cuda and torch.cuda.is_current_stream_capturing()):
        return None
    return head + (_STEP_ENV(), _checks_override[-1] if _checks_override else None, _KERNEL_VALUE_ROWS,
                   triton.knobs.runtime.interpret, plans.tensor_stream_id(q))


def _replay_step(step: _Step, inputs: tuple, need_lse: bool):
    """A step seen before: its value checks (if on), then its decode plan's replay.
    inputs: the 12 tensor arguments of kvcache_fwd (q, ..., block_table, alibi_slopes)."""
    checks = step.checks
    if checks is not None:
        index = (inputs[7], inputs[9], inputs[8], inputs[10])  # cache_seqlens, leftpad, batch idx, table
        if checks.plan is not None:
            plans.stats["replayed"] += 1
            rows = checks.plan.replay(index)[0]
        else:
            rows = _value_rows_torch(index[0], index[2], index[1], index[3], checks.cache_dim0, checks.page_size,
                                     checks.snew)
        _check_rows(rows.cpu().tolist(), *checks.rows_args)   # the one host sync
    plans.stats["replayed"] += 1
    out, lse = step.plan.replay(inputs)
    return (out, lse) if need_lse else out


# The CPU backend's steps (issue 6, session 45). The same memo as the triton backend's
# (_STRUCTURES by signature, then the step by _options_key), holding what the long way
# computes from the signature and the options alone: the canonical AttnParams and the
# rotary rule. A replay skips the structure checks, the option checks and parsing and
# the index tensors' stride tests, and keeps everything that reads values or settings:
# the value checks (when on, by the same function as the long way), the backend's
# selection (before the memo: use_backend, FLASHTRITON_BACKEND) and the whole of
# cpu.kvcache_fwd (its path and library choice read config and the environment there).
# Right after other work every Python line runs with cold caches (~10x its warm cost):
# the front end took ~270 us of the bench's bf16 8k call of ~1.9 ms (session 44,
# bench/wip/cpu-decode-8k.md); bench/wip/cpu-decode-memo.md has this memo's measurements.
# A step is not stored (the long way, every call) where the long way copied an index
# tensor (a strided view), under torch.compile, or with options of unexpected types.
class _CpuStep:
    """A CPU call seen before: its AttnParams, whether q rotates per row, and the compiled
    kernel's launch (cpu/decode.py's CompiledLaunch, set by kvcache_fwd; None on the
    torch-ops paths): kvcache_fwd's `memo`."""
    __slots__ = ("params", "per_row_rotary", "launch")

    def __init__(self, params, per_row_rotary: bool):
        self.params, self.per_row_rotary, self.launch = params, per_row_rotary, None


def _replay_cpu_step(step: _CpuStep, structure: _Structure, q, k_cache, v_cache, k, v, rotary_cos, rotary_sin,
                     cache_seqlens, cache_batch_idx, cache_leftpad, block_table, rotary_interleaved, alibi_slopes,
                     num_splits, need_lse):
    """A CPU step seen before: the value checks (if on), then the backend's kvcache_fwd with
    the step's params, exactly as the long way calls it. (Called only outside torch.compile,
    on CPU tensors: what _value_checks_on adds to _checks_switch does not apply.)"""
    if _checks_switch():
        _check_values(q, k_cache, cache_seqlens, cache_batch_idx, cache_leftpad, block_table, rotary_cos,
                      structure.capacity, structure.page_size, structure.snew, step.per_row_rotary, structure)
    out, lse = backends.get("cpu").kvcache_fwd(q, k_cache, v_cache, k, v, rotary_cos, rotary_sin, cache_seqlens,
                                               cache_batch_idx, cache_leftpad, block_table, step.params,
                                               rotary_interleaved, alibi_slopes, num_splits, need_lse=need_lse,
                                               memo=step)
    return (out, lse) if need_lse else out


def _remember_step(structure: _Structure, step_key: tuple, inputs: tuple, params, rotary_interleaved: bool,
                   num_splits: int, need_lse: bool, checks: bool, per_row_rotary: bool):
    """Stores the step of a call that just went the long way with these kvcache_fwd inputs
    (the caller's own tensors: no copies) and value checks on or off, where its launch
    plans exist (see _Step)."""
    key = decode.plan_key(inputs, params, rotary_interleaved, num_splits, decode.current_options(), need_lse,
                          structure)
    plan = plans._PLANS.get(key) if key is not None else None
    if plan is None:
        return
    step_checks = None
    if checks:
        q, k_cache = inputs[0], inputs[1]
        index = (inputs[7], inputs[9], inputs[8], inputs[10])
        check_plan = None
        if _kernel_value_rows(q.device):
            key = kvcache_checks.plan_key(index, k_cache.shape[0], structure.page_size, structure.snew, structure)
            check_plan = plans._PLANS.get(key) if key is not None else None
            if check_plan is None:
                return
        rotary_cos = inputs[5]
        rows_args = (q.shape[0], q.shape[1], k_cache.shape[0], structure.capacity, structure.snew,
                     inputs[8] is not None, inputs[10] is not None,
                     rotary_cos.shape[0] if rotary_cos is not None else None, per_row_rotary)
        step_checks = _StepChecks(check_plan, k_cache.shape[0], structure.page_size, structure.snew, rows_args)
    _store_step(structure, step_key, _Step(plan, plans.generation, step_checks))


def _store_step(structure: _Structure, step_key: tuple, step):
    """structure.steps[step_key] = step, the memo bounded by _STEPS_MAX (cleared when full)."""
    if len(structure.steps) >= _STEPS_MAX:
        structure.steps.clear()
    structure.steps[step_key] = step


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
    if type(q) is not _Tensor:          # (the check inline: one call less with cold caches)
        validate._tensor("q", q)
    device = q.device
    backend = backends.select(device)
    # signed once for the structure memo, the step memo and the launch plans' keys, when
    # every argument is a tensor or None and cache_seqlens a tensor (an int or None becomes
    # one below; a wrong type: the long way, whose check names it)
    signed = step_key = None
    if backend in ("triton", "cpu") and not torch.compiler.is_compiling():
        signed = _signature(q, k_cache, v_cache, k, v, rotary_cos, rotary_sin, cache_seqlens, cache_batch_idx,
                            cache_leftpad, block_table)
        if signed is not None:
            options = (softmax_scale, causal, window_size, softcap, rotary_interleaved, alibi_slopes, num_splits,
                       return_softmax_lse)
            step_key = _step_key(q, *options) if backend == "triton" else _options_key(*options)
        if step_key is not None:
            structure = _STRUCTURES.get((backend, signed))
            step = structure.steps.get(step_key) if structure is not None else None
            if step is not None and backend == "cpu":
                return _replay_cpu_step(step, structure, q, k_cache, v_cache, k, v, rotary_cos, rotary_sin,
                                        cache_seqlens, cache_batch_idx, cache_leftpad, block_table,
                                        rotary_interleaved, alibi_slopes, num_splits, return_softmax_lse)
            if step is not None and step.generation == plans.generation:
                return _replay_step(step, (q, k_cache, v_cache, k, v, rotary_cos, rotary_sin, cache_seqlens,
                                           cache_batch_idx, cache_leftpad, block_table, alibi_slopes),
                                    return_softmax_lse)
    tensors = (q, k_cache, v_cache, k, v, rotary_cos, rotary_sin, cache_seqlens, cache_batch_idx, cache_leftpad,
               block_table)
    structure = _checked_structure(*tensors, backend, signed=signed)
    capacity, page_size, snew = structure.capacity, structure.page_size, structure.snew
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
    index_in = (cache_seqlens, cache_leftpad, cache_batch_idx, block_table)
    if cache_seqlens.dim() == 1 and cache_seqlens.stride(0) != 1 and batch > 1:
        cache_seqlens = cache_seqlens.contiguous()
    if cache_leftpad is not None and cache_leftpad.stride(0) != 1 and batch > 1:
        cache_leftpad = cache_leftpad.contiguous()
    if cache_batch_idx is not None and cache_batch_idx.stride(0) != 1 and batch > 1:
        cache_batch_idx = cache_batch_idx.contiguous()
    if block_table is not None and block_table.stride(1) != 1 and block_table.shape[1] > 1:
        block_table = block_table.contiguous()
    per_row_rotary = window_left >= 0 or window_right >= 0
    checks = _value_checks_on(device)
    if checks:
        _check_values(q, k_cache, cache_seqlens, cache_batch_idx, cache_leftpad, block_table, rotary_cos,
                      capacity, page_size, snew, per_row_rotary, structure if signed is not None else None)

    module = backends.get(backend)
    if not hasattr(module, "kvcache_fwd"):
        raise NotImplementedError(f"flash_attn_with_kvcache: the {backend} backend does not implement kvcache_fwd")
    # (the plan key takes the signature's memo entry: see _STRUCTURES; a CPU step takes the
    # compiled launch this call builds)
    cpu_step = _CpuStep(params, per_row_rotary) if step_key is not None and backend == "cpu" else None
    extra = {"signed": structure} if signed is not None and backend == "triton" else \
        {"memo": cpu_step} if cpu_step is not None else {}
    inputs = (q, k_cache, v_cache, k, v, rotary_cos, rotary_sin, cache_seqlens, cache_batch_idx, cache_leftpad,
              block_table, alibi_slopes)
    out, lse = module.kvcache_fwd(q, k_cache, v_cache, k, v, rotary_cos, rotary_sin, cache_seqlens, cache_batch_idx,
                                  cache_leftpad, block_table, params, rotary_interleaved, alibi_slopes, num_splits,
                                  need_lse=return_softmax_lse, **extra)
    if step_key is not None and all(a is b for a, b in zip(index_in, (cache_seqlens, cache_leftpad, cache_batch_idx,
                                                                      block_table))):
        if backend == "cpu":
            _store_step(structure, step_key, cpu_step)
        else:
            _remember_step(structure, step_key, inputs, params, rotary_interleaved, num_splits, return_softmax_lse,
                           checks, per_row_rotary)
    return (out, lse) if return_softmax_lse else out
