"""flash_attn_with_kvcache on the CPU: append (with rotary), then split-KV attention.

The contract is flashtriton.kvcache's docstring; flashtriton.reference_decode is the
truth. For every sequence b, the keys are the cache positions [start, end + Snew).

Split-KV: the keys a sequence's queries can see are cut into S contiguous splits
(`num_splits`; by default enough for the (split, KV head) batch below to give every
intra-op thread work: one split when Hk >= threads, 2 for MQA on 2 threads). The
splits advance in lock step, each by DECODE_CHUNK / S positions per round, as one
batch of S x Hk (split, KV head) problems: every op of a round covers all splits,
and torch's intra-op threads divide that batch, so different threads work on
different KV splits (or heads). Each split keeps its own online-
softmax state (m, l, acc); at the end the states are merged by logsumexp, in split
order (log2 units inside):

    M = max_s m_s,   L = sum_s 2^(m_s - M) l_s,   out = sum_s 2^(m_s - M) acc_s / L,
    lse = (M + log2 L) * ln 2

The default path (config.DECODE_PATH = "compiled", FLASHTRITON_CPU_DECODE) is the C
kernel of native.py (CompiledLaunch): the same split-KV online softmax, fused into
one streaming pass over the cache, for bf16 / fp16 / float32 caches (fp16 since session 63;
softcap and ALiBi since session 62; compiled_ok lists the conditions); 2-3x the torch-ops
paths below at L = 8k-32k (fp16: 3.0-6.7x).
Everything else, or FLASHTRITON_CPU_DECODE=ops, takes the torch-ops paths.

Two torch-ops paths compute those splits (measurements: bench/NOTES.md, "CPU backend"):
- bf16 caches (at most Hk^2 * R <= config.DECODE_DIRECT_MAX): _attend_direct, bf16
  products read straight from the cache, the long dimension as the rows of the
  products, the splits one after the other (torch's threads split each product);
  1.35-2x the lock-step path at L = 8k-32k, Hk = 8, G = 4.
- everything else: the lock-step rounds below; a float32 cache with one split is
  read in place (the bmm takes the strided cache rows), other cases are copied.

A round, rows = the Sq * G queries of a KV head (R of them):
    kf, vf = each split's chunk of keys / values, copied into float32 scratch
             (c, S * Hk, D): one sequential read of the cache rows (of the pages,
             when paged), an exact conversion for bf16 / fp16 caches
    s   = q (S * Hk, R, D) @ kf^T                  (S * Hk, R, c), float32, log2 units
    m, l, acc: the online softmax update, on (S * Hk, R) rows
    acc += p @ vf                                  (S * Hk, R, D)
Each KV byte is read from memory once per GQA group: the G query heads of a KV head
are rows of one product, and the cache is never expanded (no repeat_interleave).

Why not worker threads (one per split, single-threaded ops)? Measured (bench/NOTES.md):
as fast alone, but right after other intra-op work (any model op; SDPA in the bench)
OpenMP's workers keep spinning for milliseconds and compete with such threads: 1.5-2x
slower, while this lock-step form stays on OpenMP's own threads.
"""
from __future__ import annotations

import ctypes
import math
import threading

import torch

from flashtriton import alibi_anchor, memory

from . import config, engine, native, native_prefill
from .forward import LN2, M_FLOOR, q_scale
from .rotary import rotate
from .tiles import LOG2E, Band, alibi_distance, hidden_mask


def kvcache_fwd(q, k_cache, v_cache, k_new, v_new, rotary_cos, rotary_sin, cache_seqlens, cache_batch_idx,
                cache_leftpad, block_table, params, rotary_interleaved, alibi_slopes, num_splits, need_lse=True,
                memo=None):
    """Backend entry point (see flashtriton.kvcache). Mutates the caches when k_new is
    given. Returns (out like q, lse (B, H, Sq) float32); the lse is computed whatever
    need_lse says (the merge needs it), and with need_lse=False the compiled path writes it
    into per-thread scratch and returns None in its place (one torch.empty less a call: cold
    after other work ~40-65 us, session 46).

    memo: None, or an object whose attribute `launch` holds this call's CompiledLaunch
    between calls (kvcache.py's _CpuStep: calls of one tensor signature and one set of
    options); a launch built under other settings (CompiledLaunch.current) is rebuilt."""
    batch, seqlen_q, nheads, head_dim = q.shape
    nheads_k = k_cache.shape[2]
    group = nheads // nheads_k
    if params.dropout_p > 0:
        raise NotImplementedError("flash_attn_with_kvcache: dropout is not supported (dropout_p must be 0)")
    snew = k_new.shape[1] if k_new is not None else 0
    out = memory.empty_like(q)                  # (q's shape: the same before and after its rotation)
    global LAST_PATH
    launch = memo.launch if memo is not None else None
    if launch is None or not launch.current():
        launch = compiled_launch(q, k_cache, v_cache, params, alibi_slopes, out)
        if memo is not None:
            memo.launch = launch
    if snew and launch is not None:
        # the compiled kernel writes the new tokens into the caches itself (ft_decode_lens); k rotated here
        if rotary_cos is not None:
            k_new = rotate(k_new, rotary_cos, rotary_sin, _new_positions(cache_seqlens, snew), rotary_interleaved)
        k_new, v_new = (t if t.dtype == k_cache.dtype and t.stride(3) == 1 else t.to(k_cache.dtype).contiguous()
                        for t in (k_new, v_new))
    elif snew:
        _append(k_cache, v_cache, k_new, v_new, rotary_cos, rotary_sin, cache_seqlens, cache_batch_idx,
                block_table, rotary_interleaved)
    if rotary_cos is not None:
        # flash-attn's rule: queries rotate at end + i when the call is causal or
        # windowed, else all at position end
        per_row = params.window_left >= 0 or params.window_right >= 0
        offs = torch.arange(seqlen_q) if per_row else torch.zeros(seqlen_q, dtype=torch.int64)
        q = rotate(q, rotary_cos, rotary_sin, cache_seqlens.to(torch.int64)[:, None] + offs[None, :],
                   rotary_interleaved)
    if launch is not None:
        LAST_PATH = launch.path
        lse = memory.empty((batch, nheads, seqlen_q), torch.float32, q.device) if need_lse else None
        launch.run(q, k_cache, v_cache, cache_seqlens, cache_leftpad, cache_batch_idx, block_table,
                   k_new if snew else None, v_new if snew else None, num_splits, out, lse, alibi_slopes)
        return out, lse
    ends = cache_seqlens.tolist()
    starts = cache_leftpad.tolist() if cache_leftpad is not None else [0] * batch
    lse = memory.empty((batch, nheads, seqlen_q), torch.float32, q.device)
    # (B, Hk, Sq * G, D) float32 rows r = i * G + g, scaled into log2 units
    qf = torch.empty(batch, nheads_k, seqlen_q, group, head_dim, dtype=torch.float32)
    qf.copy_(q.view(batch, seqlen_q, nheads_k, group, head_dim).permute(0, 2, 1, 3, 4))
    qf = qf.mul_(q_scale(params)).view(batch, nheads_k, seqlen_q * group, head_dim)
    LAST_PATH = "ops"
    for b in range(batch):
        seq = _SeqView(b, starts[b], ends[b] + snew - starts[b], k_cache, v_cache, cache_batch_idx, block_table,
                       alibi_slopes, nheads_k, group, seqlen_q)
        m, l_, acc = _attend(params, qf[b], seq, num_splits)
        _write(m, l_, acc, seqlen_q, group, out[b], lse[b])
        if alibi_slopes is not None:
            # these paths measure ALiBi from the rows' anchors (tiles.alibi_distance): flash-attn's lse
            # for rows before every key (a no-op elsewhere)
            slopes = alibi_slopes if alibi_slopes.dim() == 1 else alibi_slopes[b]
            lse[b] = alibi_anchor.to_public(lse[b:b + 1], slopes, seqlen_q, seq.n)[0]
    return out, lse


# Which path the last kvcache_fwd call took: "compiled-amx" (cpu/native.py's AMX step,
# bf16 caches), "compiled" (cpu/native.py, AVX-512 or portable) or "ops" (the torch-ops
# paths below); the benchmark prints it.
LAST_PATH: str | None = None


def decode_path() -> str:
    """config.DECODE_PATH, checked: "compiled" or "ops" (FLASHTRITON_CPU_DECODE)."""
    return config.checked("DECODE_PATH", "FLASHTRITON_CPU_DECODE", config.DECODE_PATHS)


def amx_mode() -> str:
    """config.DECODE_AMX, checked: "auto", "on" or "off" (FLASHTRITON_CPU_DECODE_AMX)."""
    return config.checked("DECODE_AMX", "FLASHTRITON_CPU_DECODE_AMX", config.DECODE_AMX_MODES)


_amx_warned = False


def compiled_library(dtype: torch.dtype, amx_ok: bool = True):
    """The compiled library a call with this cache dtype runs (compiled_ok said yes): bf16
    takes the AMX build (native.load_amx) under config.DECODE_AMX "auto" when the CPU has
    AMX, the build succeeds and Linux grants the permission - else the AVX-512 kernel,
    with one RuntimeWarning naming the cause when the CPU has AMX but the build or the
    permission failed (silently on CPUs without AMX); "on" raises NativeUnavailable
    instead; "off" never uses it. float32 never does. bf16 where config.bf16_products() is False
    (this CPU's bf16 products are the slower ones) takes the FT_NO_DPBF16 build (native.load_fma)
    before any of that. amx_ok=False (ALiBi or softcap: the AMX step has neither) takes the AVX-512 kernel
    whatever the mode.
    Selection by feature and availability only: a selected kernel that fails raises."""
    global _amx_warned
    mode = amx_mode()
    if dtype == torch.bfloat16 and not config.bf16_products():
        # bf16 products slower than float32 here (config.BF16_PRODUCTS): FMAs on widened K / V
        return native.load_fma()
    if not amx_ok or (dtype == torch.bfloat16 and mode == "auto" and not native_prefill.cpu_has_amx()):
        # what the try below ends in without AMX, minus a raised and caught exception per call (cold after
        # other work: ~30 us, session 44)
        return native.load()
    if dtype == torch.bfloat16 and mode != "off":
        try:
            return native.load_amx()
        except native.NativeUnavailable as e:
            if mode == "on":
                raise
            if native_prefill.cpu_has_amx() and not _amx_warned:
                _amx_warned = True
                import warnings
                warnings.warn(f"flashtriton cpu: the AMX decode kernel is unavailable, using the AVX-512 one ({e})",
                              RuntimeWarning, stacklevel=3)
    return native.load()


def compiled_ok(k_cache, v_cache, params, alibi, head_dim: int, rows: int) -> bool:
    """Whether this call runs the compiled kernel (cpu/native.py): the "compiled" path
    is selected and the kernel implements the problem - a bf16 / fp16 / float32 cache, head_dim
    a multiple of 8 up to 256 (native.supports), at most native.MAX_ROWS query rows (Sq * G) per KV
    head, K and V caches with the same strides and contiguous rows. Everything else takes
    the torch-ops paths (a documented split by feature; windows, causal speculative rows,
    paged caches, leftpad, ALiBi, softcap and GQA / MQA are all in the kernel; ALiBi and
    softcap on the AVX-512 / portable step, never AMX's: compiled_library). When the kernel
    is selected but cannot be built (no C compiler, a compile error), native.load() raises
    NativeUnavailable: no silent fallback."""
    if decode_path() != "compiled":
        return False
    ok = (native.supports(k_cache.dtype, head_dim, rows)
          and v_cache.dtype == k_cache.dtype and k_cache.stride() == v_cache.stride() and k_cache.stride(-1) == 1)
    if ok:
        lib = native.load()
        if k_cache.dtype == torch.float16 and not lib.ft_f16():
            return False      # a compiler without _Float16 (by build, not by failure: the torch-ops paths take fp16)
    return ok


# the kernel's element kind of each cache dtype it takes (C's ek)
ELEMENT_KINDS = {torch.float32: 0, torch.bfloat16: 1, torch.float16: 2}


class CompiledLaunch:
    """What the compiled kernel (native.py has the math) takes from a call's structure alone -
    the library, the path label, the cache and output strides in bytes, the scale, the flags -
    built once by compiled_launch and reused by every call of the same tensor signature and
    options (kvcache.py's _CpuStep holds it): right after other work (SDPA in the benchmark)
    every Python line runs with cold caches (~3-5 us a call), and compiled_ok +
    compiled_library alone cost ~70 us there (session 56, bench/NOTES.md). run() keeps the
    per-call work - the pointers, the thread count, the work buffer - and the kernel derives
    the key ranges and the split count from the index tensors itself (ft_decode_lens: no
    lens.tolist() or range lists in Python, session 56). The host side is a few Python lines
    and no torch op: ~12 cold torch ops cost ~0.3 ms, a fifth of the L = 8k bf16 call
    (bench/NOTES.md, "Session 4"), so run() reads no scratch view (_scratch_ptr) and repeats
    no stride() of the cache. The kernel's 29 per-step constants go as one array built by the
    first run() (ft_decode_packed: 17 arguments where ft_decode_lens takes 45; a cold ctypes
    call costs ~0.8 us an argument): 0.86-0.91x the launch's time at L = 512, session 57."""
    __slots__ = ("lib", "path", "modes", "hk", "sq", "group", "padded", "d", "es", "k_bytes", "page_rows",
                 "out_bytes", "scale", "softcap2", "ek", "amx", "left", "right", "alibi_bs", "packed", "packed_at",
                 "batch", "snew")

    def __init__(self, lib, q, k_cache, params, alibi, out):
        _, sq, nheads, d = q.shape
        self.lib, self.modes = lib, _modes()
        self.path = "compiled-amx" if lib.amx else "compiled-f32" if lib is native._fma_library.lib else "compiled"
        self.hk = k_cache.shape[2]
        self.sq, self.group, self.d = sq, nheads // self.hk, d
        self.padded = -(-sq * self.group // 4) * 4    # the kernel takes rows in groups of 4 (empty rows pad)
        self.es = es = k_cache.element_size()      # q and out have the cache's dtype (kvcache.py checks)
        self.k_bytes = tuple(x * es for x in k_cache.stride()[:3])
        self.page_rows = k_cache.shape[1]             # a paged call's page size
        self.out_bytes = tuple(x * es for x in out.stride()[:3])
        self.scale = q_scale(params)                  # scale / softcap with softcap: the kernel's tanh argument
        self.softcap2 = params.softcap * LOG2E if params.softcap > 0 else 0.0
        self.ek = ELEMENT_KINDS[k_cache.dtype]        # the kernel's element kind: 0 float32, 1 bf16, 2 fp16
        self.amx = int(bool(lib.amx) and self.ek == 1)
        self.left, self.right = params.window_left, params.window_right
        # ALiBi slopes: sequence b's at element b * alibi_bs (0: one (H,) vector); run() passes the tensor
        self.alibi_bs = alibi.stride(0) if alibi is not None and alibi.dim() == 2 else 0
        self.packed = self.packed_at = None     # ft_decode_packed's constants (and their address): the first run()

    def current(self) -> bool:
        """Whether the settings that chose this launch are still the settings (compiled_ok,
        compiled_library): the decode path, the AMX mode and the bf16 products' mode."""
        return self.modes == _modes()

    def _pack(self, q, table, k_new, v_new, num_splits):
        """Builds the kernel's per-step constants (ft_decode_packed's array c): every value follows from the
        step's tensor signature and options (q's strides as the kernel reads it, the table's, the new
        tokens' count and strides, the batch, num_splits), so run() builds it once a launch."""
        es = self.es
        self.batch = q.shape[0]
        self.snew = snew = k_new.shape[1] if k_new is not None else 0
        kns = tuple(x * es for x in k_new.stride()[:3]) if snew else (0, 0, 0)
        vns = tuple(x * es for x in v_new.stride()[:3]) if snew else (0, 0, 0)
        qs = q.stride()
        paged = table is not None
        c = (*self.k_bytes, self.page_rows if paged else 0, table.stride(0) if paged else 0, snew, *kns, *vns,
             self.left, self.right, qs[0] * es, qs[1] * es, qs[2] * es, self.batch, self.hk, self.sq, self.group,
             self.padded, self.d, num_splits, self.ek, *self.out_bytes, self.amx, self.alibi_bs)
        self.packed = (ctypes.c_int64 * len(c))(*c)
        # passed as its address: a plain int converts faster than the array does (~6 us, cold)
        self.packed_at = ctypes.addressof(self.packed)

    def run(self, q, k_cache, v_cache, cache_seqlens, cache_leftpad, cache_batch_idx, block_table, k_new, v_new,
            num_splits, out, lse, alibi=None):
        """All sequences through the kernel: q (B, Sq, H, D) as given (rotated); k_new / v_new
        (B, Snew, Hk, D) in the caches' dtype with unit-stride rows (k_new rotated), or None:
        written by the kernel at cache positions cache_seqlens[b] + [0, Snew) first. The keys of
        sequence b are cache positions start + [0, cache_seqlens[b] + Snew - start), start =
        cache_leftpad[b] (0 without); the index tensors int32 (B,) with unit stride (kvcache.py
        copies strided views) - the kernel reads their values itself (ft_decode_lens) and
        derives each query's key range and the split count; it writes out (B, Sq, H, D) and
        lse (B, H, Sq) (lse None: this thread's scratch, _scratch_ptr). A launch serves one step
        (one tensor signature and one set of options, as kvcache.py's _CpuStep holds it): the
        first run() packs the step's constants (_pack) and later ones reuse them. alibi: the float32
        slopes, (H,) or (B, H) (validate.options: unit stride along H), of the signature the launch was built for."""
        if q.stride(3) != 1:
            q = q.contiguous()
        if block_table is not None and (block_table.dtype != torch.int32 or not block_table.is_contiguous()):
            block_table = block_table.to(torch.int32).contiguous()
        packed = self.packed_at
        if packed is None:
            self._pack(q, block_table, k_new, v_new, num_splits)
            packed = self.packed_at
        threads = torch.get_num_threads()
        per_thread = config.DECODE_ITEMS_PER_THREAD
        batch, hk = self.batch, self.hk
        # the work rows of the most splits the kernel may pick (ft_decode_lens: min(this, width / piece))
        most = num_splits if num_splits > 0 else max(1, -(-per_thread * threads // batch))
        # per row: DS accumulators, m, l, padding to 64-byte rows (the kernel's W = DS + 16)
        work = _scratch_ptr("work", batch * most * hk * self.padded * (native.state_width(self.d) + 16))
        lse_ptr = lse.data_ptr() if lse is not None else _scratch_ptr("lse", batch * hk * self.group * self.sq)
        snew = self.snew
        rc = self.lib.ft_decode_packed(
            packed, self.scale, k_cache.data_ptr(), v_cache.data_ptr(),
            block_table.data_ptr() if block_table is not None else None, cache_seqlens.data_ptr(),
            cache_leftpad.data_ptr() if cache_leftpad is not None else None,
            cache_batch_idx.data_ptr() if cache_batch_idx is not None else None,
            k_new.data_ptr() if snew else None, v_new.data_ptr() if snew else None, q.data_ptr(), work,
            out.data_ptr(), lse_ptr, per_thread, config.DECODE_MIN_PIECE, threads,
            alibi.data_ptr() if alibi is not None else None, self.softcap2)
        if rc != 0:
            raise RuntimeError(f"compiled decode kernel failed (code {rc}: 1-2 a problem it does not take, "
                               f"D={self.d}, rows={self.sq * self.group}; 4 out of memory; 5 AMX without the "
                               f"permission)")


def _modes() -> tuple:
    """The settings compiled_ok and compiled_library read (a CompiledLaunch is current while they hold)."""
    return config.DECODE_PATH, config.DECODE_AMX, config.BF16_PRODUCTS


def compiled_launch(q, k_cache, v_cache, params, alibi, out):
    """The CompiledLaunch of this call (q as the kernel reads it: rotated; out as allocated),
    or None where the call takes the torch-ops paths (compiled_ok)."""
    if not compiled_ok(k_cache, v_cache, params, alibi, q.shape[3], q.shape[1] * (q.shape[2] // k_cache.shape[2])):
        return None
    amx_ok = alibi is None and params.softcap == 0 and q.shape[3] % 32 == 0
    return CompiledLaunch(compiled_library(k_cache.dtype, amx_ok=amx_ok), q, k_cache, params, alibi, out)


def _scratch_ptr(name: str, numel: int) -> int:
    """Address of this thread's float32 buffer `name` ("work": the kernel's partial rows; "lse": an lse nobody
    asked for) of at least numel elements (grown, never shrunk; held for the thread's lifetime, like _scratch,
    without a torch op per call)."""
    w = getattr(_local, name, None)
    if w is None or w[1] < numel:
        t = torch.empty(numel, dtype=torch.float32)
        w = (t, numel, t.data_ptr())
        setattr(_local, name, w)
    return w[2]


def num_splits_for(n: int, requested: int, nheads_k: int) -> int:
    """Splits of n keys: the request, else enough that the (split, KV head) batch
    gives every intra-op thread an item, while every split keeps two chunks. With
    Hk >= threads the heads alone occupy the threads and one split is fastest
    (measured: 23 vs 31 ms at L=32k bf16 for 1 vs 2 splits, Hk=8, 2 threads)."""
    if requested > 0:
        return requested
    want = -(-torch.get_num_threads() // nheads_k)
    return max(1, min(want, n // (2 * config.DECODE_CHUNK)))


class _SeqView:
    """Where the keys of one sequence live: its slice [start, start + n) of cache
    positions, in a contiguous cache row or in pages."""

    def __init__(self, b, start, n, k_cache, v_cache, cache_batch_idx, block_table, alibi, nheads_k, group, seqlen_q):
        self.start, self.n, self.seqlen_q = start, n, seqlen_q
        self.k_cache, self.v_cache = k_cache, v_cache
        self.paged = block_table is not None
        if self.paged:
            self.page = k_cache.shape[1]
            self.pages = block_table[b].to(torch.int64)
        else:
            self.row = int(cache_batch_idx[b]) if cache_batch_idx is not None else b
        self.slopes = None
        if alibi is not None:
            s = alibi if alibi.dim() == 1 else alibi[b]
            self.slopes = (s.to(torch.float32) * -LOG2E).view(nheads_k, 1, group, 1)

    def chunk(self, cache: torch.Tensor, j0: int, j1: int, name: str) -> torch.Tensor:
        """Keys (or values) j0 .. j1 - 1 of the slice as a contiguous (j1 - j0, Hk, D)
        tensor in the cache's dtype: a view of a contiguous cache row (no copy), else
        gathered (pages) or copied into per-thread scratch."""
        p0, p1 = self.start + j0, self.start + j1
        hk, d = cache.shape[2], cache.shape[3]
        if not self.paged:
            x = cache[self.row, p0:p1]
            if x.is_contiguous():
                return x
            dst = _scratch(name, (p1 - p0, hk, d), cache.dtype)
            return dst.copy_(x)
        pg0, pg1 = p0 // self.page, (p1 - 1) // self.page + 1
        gathered = _scratch(name, (pg1 - pg0, self.page, hk, d), cache.dtype)
        torch.index_select(cache, 0, self.pages[pg0:pg1], out=gathered)
        return gathered.view(-1, hk, d)[p0 - pg0 * self.page:p1 - pg0 * self.page]

    def load(self, cache: torch.Tensor, j0: int, j1: int, dst: torch.Tensor) -> None:
        """Copies keys (or values) j0 .. j1 - 1 of the slice into dst (j1 - j0, Hk, D)
        float32: one sequential pass over the cache memory they occupy."""
        p0, p1 = self.start + j0, self.start + j1
        if not self.paged:
            dst.copy_(cache[self.row, p0:p1])
            return
        pg0, pg1 = p0 // self.page, (p1 - 1) // self.page + 1
        hk, d = cache.shape[2], cache.shape[3]
        gathered = _scratch("pages", (pg1 - pg0, self.page, hk, d), cache.dtype)
        torch.index_select(cache, 0, self.pages[pg0:pg1], out=gathered)
        dst.copy_(gathered.view(-1, hk, d)[p0 - pg0 * self.page:p1 - pg0 * self.page])


def direct_ok(dtype: torch.dtype, nheads_k: int, rows: int) -> bool:
    """Whether the direct path (_attend_direct) takes this problem: a bf16 cache
    (config.DECODE_DIRECT_DTYPES), and a block-diagonal score weight whose wasted
    columns stay cheap (Hk^2 * R <= config.DECODE_DIRECT_MAX, e.g. Hk = 8 KV heads x
    R = 4 rows)."""
    return dtype in config.DECODE_DIRECT_DTYPES and nheads_k * nheads_k * rows <= config.DECODE_DIRECT_MAX


def _attend(params, qh, seq: _SeqView, num_splits: int):
    """Split-KV online softmax of one sequence's queries qh (Hk, R, D). Returns the
    merged (m (Hk, R, 1), l (Hk, R, 1), acc (Hk, R, D)), unnormalised."""
    hk, rows, d = qh.shape
    if direct_ok(seq.k_cache.dtype, hk, rows):
        return _attend_direct(params, qh, seq, num_splits)
    sq = seq.seqlen_q
    group = rows // sq
    band = Band(sq, seq.n, params.window_left, params.window_right)
    lo, hi = band.key_range(0, sq)       # keys no query sees are never read
    n = max(0, hi - lo)
    ns = min(num_splits_for(n, num_splits, hk), max(n, 1))
    per = -(-n // ns) if n else 0        # keys per split (the last may be shorter)
    m_i = torch.full((ns * hk, rows, 1), M_FLOOR)
    l_i = torch.zeros(ns * hk, rows, 1)
    acc = torch.zeros(ns * hk, rows, d)
    qb = qh.repeat(ns, 1, 1)                               # (S * Hk, R, D): split-major
    # a round covers DECODE_CHUNK positions over all splits: its scratch stays ~8 MiB
    step = max(64, config.DECODE_CHUNK // ns)
    # one split of a float32 cache: bmm reads the cache rows in place (strided, no
    # copy); measured 1.0-1.1x the copy into scratch (bench/NOTES.md)
    in_place = ns == 1 and seq.k_cache.dtype == torch.float32 and config.DECODE_FP32_IN_PLACE
    for c0 in range(0, per, step):
        c = min(step, per - c0)
        spans = []  # (split, first key, width) of this round
        if in_place:  # one split of a float32 cache: its rows as they are
            spans.append((0, lo + c0, c))
            kf = seq.chunk(seq.k_cache, lo + c0, lo + c0 + c, "kd")
            vf = seq.chunk(seq.v_cache, lo + c0, lo + c0 + c, "vd")
        else:
            kf = _scratch("k", (c, ns * hk, d), torch.float32)
            vf = _scratch("v", (c, ns * hk, d), torch.float32)
        for s in range(0 if in_place else ns):
            j0 = lo + s * per + c0
            w = max(0, min(c, hi - j0, lo + (s + 1) * per - j0))
            spans.append((s, j0, w))
            cols = slice(s * hk, (s + 1) * hk)
            if w:
                seq.load(seq.k_cache, j0, j0 + w, kf[:w, cols])
                seq.load(seq.v_cache, j0, j0 + w, vf[:w, cols])
            if w < c:  # a short last split: zero keys / values, masked below
                kf[w:, cols].zero_()
                vf[w:, cols].zero_()
        s_ = torch.bmm(qb, kf.permute(1, 2, 0))              # (S * Hk, R, c)
        s4 = s_.view(ns, hk, sq, group, c)
        if params.softcap > 0:
            s_.tanh_().mul_(params.softcap * LOG2E)
        for s, j0, w in spans:
            if seq.slopes is not None and w:
                s4[s, :, :, :, :w].addcmul_(alibi_distance(band, 0, sq, j0, j0 + w).view(1, sq, 1, w), seq.slopes)
            if w < c:
                s4[s, :, :, :, w:] = -math.inf
            if w and not band.full(0, sq, j0, j0 + w):
                hidden = hidden_mask(sq, w, band.off - j0, band.left, band.right)   # (Sq, 1, w)
                s4[s, :, :, :, :w].masked_fill_(hidden.view(1, sq, 1, w), -math.inf)
        m_new = torch.maximum(m_i, s_.amax(dim=2, keepdim=True))
        p = s_.sub_(m_new).exp2_()
        alpha = torch.exp2(m_i.sub_(m_new))
        m_i = m_new
        l_i.mul_(alpha).add_(p.sum(dim=2, keepdim=True))
        torch.addcmul(torch.bmm(p, vf.permute(1, 0, 2)), acc, alpha, out=acc)
    return _merge(m_i.view(ns, hk, rows, 1), l_i.view(ns, hk, rows, 1), acc.view(ns, hk, rows, d))


def _attend_direct(params, qh, seq: _SeqView, num_splits: int):
    """The split-KV online softmax read straight from a bf16 cache (float32 too when
    config.DECODE_DIRECT_DTYPES has it; tests use it): no float32 copy, chunks of config.DECODE_DIRECT_CHUNK positions, the long dimension
    as the rows of the products. A chunk (c positions, contiguous in the cache):

        s   = K (c, Hk * D) @ W^T               (c, Hk * R), the cache's dtype
              W (Hk * R, Hk * D) block-diagonal: row h * R + r holds query row r of
              KV head h in head h's D columns, zeros elsewhere (Hk x the useful
              flops, but one contiguous 2-D oneDNN product with M = c; every per-head
              or strided form measured 1.2-5x slower, bench/NOTES.md)
        m, l: online softmax over the c rows of each of the Hk * R columns, float32
        acc += P^T (Hk, R, c) @ V (Hk, c, D)    V a strided view of the cache, P in
              the cache's dtype (bf16: a bf16 product, as the prefill's P @ V)

    bf16 scores are rounded to bf16 (the same-dtype PyTorch math does too). Splits run
    one after the other, each with its own state, merged by logsumexp at the end;
    torch's threads split every product along c."""
    hk, rows, d = qh.shape
    sq = seq.seqlen_q
    group = rows // sq
    dt = seq.k_cache.dtype
    band = Band(sq, seq.n, params.window_left, params.window_right)
    lo, hi = band.key_range(0, sq)       # keys no query sees are never read
    n = max(0, hi - lo)
    ns = min(num_splits_for(n, num_splits, hk), max(n, 1))
    per = -(-n // ns) if n else 0
    # bf16: W holds q itself (q_scale undone: back to the exact bf16 inputs) and the
    # scale multiplies the float32 copy of the bf16 scores; float32: W is the scaled q.
    # softmax_scale = 0: qh is all zeros, so are the scores either way, and undoing the
    # scale would be 0 / 0 = NaN (test_regression_kvcache_scale_zero_bf16)
    unscale = q_scale(params) if dt != torch.float32 else 1.0
    w = torch.zeros(hk, rows, hk, d, dtype=dt)
    w.diagonal(dim1=0, dim2=2).copy_((qh / unscale if unscale not in (0.0, 1.0) else qh).permute(1, 2, 0))
    w = w.view(hk * rows, hk * d)
    slopes = seq.slopes.view(1, hk, 1, group) if seq.slopes is not None else None
    step = config.DECODE_DIRECT_CHUNK
    pbuf = _scratch("p", (hk * rows, min(step, max(per, 1))), dt)
    states = []
    for s in range(ns):
        m_i = torch.full((1, hk * rows), M_FLOOR)
        l_i = torch.zeros(1, hk * rows)
        acc = torch.zeros(hk, rows, d)
        a0, a1 = lo + s * per, min(hi, lo + (s + 1) * per)
        for j0 in range(a0, a1, step):
            j1 = min(a1, j0 + step)
            c = j1 - j0
            kc = seq.chunk(seq.k_cache, j0, j1, "kd")
            s_ = engine.mm_nt_any(kc.view(c, hk * d), w)           # (c, Hk * R)
            if s_.dtype != torch.float32:
                s_ = s_.float().mul_(unscale)
            s4 = s_.view(c, hk, sq, group)
            if params.softcap > 0:
                s_.tanh_().mul_(params.softcap * LOG2E)
            if slopes is not None:
                s4.addcmul_(alibi_distance(band, 0, sq, j0, j1).view(sq, c).t().reshape(c, 1, sq, 1), slopes)
            if not band.full(0, sq, j0, j1):
                hidden = hidden_mask(sq, c, band.off - j0, band.left, band.right)   # (Sq, 1, c)
                s4.masked_fill_(hidden.view(sq, c).t().reshape(c, 1, sq, 1), -math.inf)
            m_new = torch.maximum(m_i, s_.amax(dim=0, keepdim=True))
            p = s_.sub_(m_new).exp2_()
            alpha = torch.exp2(m_i.sub_(m_new))
            m_i = m_new
            l_i.mul_(alpha).add_(p.sum(dim=0, keepdim=True))
            pt = pbuf[:, :c]
            pt.copy_(p.t())                                        # (Hk * R, c), rounded to dt
            vc = seq.chunk(seq.v_cache, j0, j1, "vd")
            pv = torch.bmm(pt.view(hk, rows, c), vc.permute(1, 0, 2))  # (Hk, R, D)
            torch.addcmul(pv, acc, alpha.view(hk, rows, 1), out=acc)
        states.append((m_i.view(hk, rows, 1), l_i.view(hk, rows, 1), acc))
    if ns == 1:
        return states[0]
    return _merge(*(torch.stack(x) for x in zip(*states)))


def _merge(m, l_, acc):
    """Logsumexp merge of the split states (S, Hk, R, .), in split order."""
    big_m = m.amax(dim=0)                                   # (Hk, R, 1)
    w = torch.exp2(m - big_m)                               # (S, Hk, R, 1); 0 for empty splits
    big_l = (l_ * w).sum(dim=0)
    big_acc = (acc * w).sum(dim=0)
    return big_m, big_l, big_acc


def _write(m, l_, acc, seqlen_q, group, out_b, lse_b):
    """out_b (Sq, H, D) and lse_b (H, Sq) from the merged state of one sequence."""
    hk, _, d = acc.shape
    empty = l_ == 0                                         # no key at all: out 0, lse +inf
    acc.div_(l_.masked_fill(empty, 1.0))
    lse_rows = torch.log2(l_).add_(m).mul_(LN2).masked_fill_(empty, math.inf)   # (Hk, R, 1)
    # rows r = i * G + g of KV head hk are query i of head hk * G + g
    out_b.copy_(acc.view(hk, seqlen_q, group, d).permute(1, 0, 2, 3).reshape(seqlen_q, hk * group, d))
    lse_b.copy_(lse_rows.view(hk, seqlen_q, group).permute(0, 2, 1).reshape(hk * group, seqlen_q))


_local = threading.local()


def _scratch(name: str, shape: tuple, dtype: torch.dtype) -> torch.Tensor:
    """A per-thread reusable buffer of at least this size, viewed to `shape`.

    Decode rounds reuse the same few MiB on every call: a fresh multi-MiB allocation
    is an mmap whose first touch page-faults (~20x the cost of refilling a warm
    buffer on the reference VM). Held for the thread's lifetime; its size is bounded
    by the largest round (DECODE_CHUNK x splits x Hk x D floats)."""
    bufs = getattr(_local, "bufs", None)
    if bufs is None:
        bufs = _local.bufs = {}
    n = math.prod(shape)
    buf = bufs.get((name, dtype))
    if buf is None or buf.numel() < n:
        buf = bufs[(name, dtype)] = torch.empty(n, dtype=dtype)
    return buf[:n].view(shape)


def _new_positions(cache_seqlens, snew: int) -> torch.Tensor:
    """(B, Snew) int64: the cache positions end + i of the new tokens (rotated there, written there)."""
    return cache_seqlens.to(torch.int64)[:, None] + torch.arange(snew)[None, :]


def _append(k_cache, v_cache, k_new, v_new, rotary_cos, rotary_sin, cache_seqlens, cache_batch_idx, block_table,
            interleaved):
    """Writes k_new (rotated at positions end + i) and v_new into the caches, in place."""
    batch, snew = k_new.shape[:2]
    pos = _new_positions(cache_seqlens, snew)
    if rotary_cos is not None:
        k_new = rotate(k_new, rotary_cos, rotary_sin, pos, interleaved)
    if block_table is not None:
        page = k_cache.shape[1]
        bt = block_table.to(torch.int64)
        idx = (bt.gather(1, pos // page), pos % page)
    else:
        rows = cache_batch_idx.to(torch.int64) if cache_batch_idx is not None else torch.arange(batch)
        idx = (rows[:, None].expand(batch, snew), pos)
    k_cache[idx] = k_new.to(k_cache.dtype)
    v_cache[idx] = v_new.to(v_cache.dtype)
