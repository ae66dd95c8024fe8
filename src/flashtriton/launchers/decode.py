"""Layer 2: host launchers of the decode kernels (kernels/decode.py, kernels/rotary_append.py).

kvcache_fwd is the `triton` backend's implementation of flash_attn_with_kvcache (the
contract is in flashtriton.kvcache); merge_states backs merge_attention_states.

A decode step is one launch by default: the split kernel appends the new tokens (with
rotary) as it reaches them, attends, and the last program of each KV head merges the
partials (the fused combine). Inside a CUDA graph, when the cache is split to fill the
GPU (few sequences), a second small kernel merges the partials instead ("auto"; see
auto_combine). The alternatives stay switchable, so that they can be timed against
each other on the GPU in one run:

  FLASHTRITON_DECODE_COMBINE = auto | fused | kernel   merge in the split kernel, or in a second launch
  FLASHTRITON_DECODE_APPEND  = fused | separate    append inside the split kernel, or kernels of its own
  FLASHTRITON_DECODE_KV_LOAD = tma | pointer       K/V tiles by TMA (contiguous cache, pages >= BLOCK_N), or
                                                   by pointer loads (cp.async); small pages always gather
  FLASHTRITON_DECODE_GATHER  = pages | rows        small pages (page < BLOCK_N): the row pointers built page by
                                                   page from BLOCK_N / page entries a tile (the default since
                                                   session 28), or row by row from one entry a row (see
                                                   page_gather)
  FLASHTRITON_DECODE_TILE    = BLOCK_N,num_warps,num_stages    (default: default_tile, by regime)
  FLASHTRITON_DECODE_BLOCK_M = 16..128             query rows per program (default G * Sq padded to >= 16)
  FLASHTRITON_DECODE_MIN_SPLIT_KEYS = 256          the split heuristic's smallest chunk

or in code: `with flashtriton.launchers.decode.options(combine="kernel"): ...`.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import os
from dataclasses import dataclass

import torch

from .. import envvars, memory
from . import plans
from ..kernels.decode import decode_combine_kernel, decode_split_kernel, merge_states_kernel
from ..kernels.rotary_append import append_kv_kernel, rotary_q_kernel
from .common import LOG2E, AttnParams, _dot_precision, interpreting, qk_levels, sm_count

MAX_SPLITS = 256


@dataclass(frozen=True)
class DecodeOptions:
    combine: str = "auto"       # "kernel" in the split regime under CUDA-graph capture, else "fused"
    append: str = "fused"
    kv_load: str = "tma"        # "tma" where the layout allows it, else pointer loads; or "pointer"
    gather: str = "pages"       # pages < BLOCK_N: "pages" (a tile's entries, page by page) or "rows" (see page_gather)
    block_n: int = 0            # 0: the default table
    block_m: int = 0            # query rows per program; 0: G * Sq padded to >= 16 (64 allows wgmma)
    num_warps: int = 0
    num_stages: int = 0
    min_split_keys: int = 256


# Host arithmetic in plain Python: triton.cdiv and triton.next_power_of_2 are
# constexpr functions, slow to call on the host, and this runs on every decode step.
def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _pow2(n: int) -> int:
    return 1 << max(n - 1, 0).bit_length()


_ENV_KEYS = ("FLASHTRITON_DECODE_COMBINE", "FLASHTRITON_DECODE_APPEND", "FLASHTRITON_DECODE_KV_LOAD",
             "FLASHTRITON_DECODE_GATHER", "FLASHTRITON_DECODE_TILE", "FLASHTRITON_DECODE_BLOCK_M",
             "FLASHTRITON_DECODE_MIN_SPLIT_KEYS")
_env_cache: dict = {}
_env_values = envvars.reader(_ENV_KEYS)


def _env_options() -> DecodeOptions:
    """The options the environment sets (parsed once per distinct environment)."""
    key = _env_values()
    if key not in _env_cache:
        _env_cache[key] = _parse_env_options()
    return _env_cache[key]


def _parse_env_options() -> DecodeOptions:
    kw = {}
    if "FLASHTRITON_DECODE_COMBINE" in os.environ:
        kw["combine"] = os.environ["FLASHTRITON_DECODE_COMBINE"]
    if "FLASHTRITON_DECODE_APPEND" in os.environ:
        kw["append"] = os.environ["FLASHTRITON_DECODE_APPEND"]
    if "FLASHTRITON_DECODE_KV_LOAD" in os.environ:
        kw["kv_load"] = os.environ["FLASHTRITON_DECODE_KV_LOAD"]
    if "FLASHTRITON_DECODE_GATHER" in os.environ:
        kw["gather"] = os.environ["FLASHTRITON_DECODE_GATHER"]
    if os.environ.get("FLASHTRITON_DECODE_TILE"):
        parts = os.environ["FLASHTRITON_DECODE_TILE"].split(",")
        if len(parts) != 3 or not all(p.strip().isdigit() for p in parts):
            raise ValueError(f"FLASHTRITON_DECODE_TILE: must be 'BLOCK_N,num_warps,num_stages', "
                             f"got {os.environ['FLASHTRITON_DECODE_TILE']!r}")
        kw["block_n"], kw["num_warps"], kw["num_stages"] = (int(p) for p in parts)
    if os.environ.get("FLASHTRITON_DECODE_BLOCK_M"):
        kw["block_m"] = int(os.environ["FLASHTRITON_DECODE_BLOCK_M"])
    if os.environ.get("FLASHTRITON_DECODE_MIN_SPLIT_KEYS"):
        kw["min_split_keys"] = int(os.environ["FLASHTRITON_DECODE_MIN_SPLIT_KEYS"])
    return DecodeOptions(**kw)


_override: list[DecodeOptions] = []


_env_checked: dict = {}


def current_options() -> DecodeOptions:
    """The options in force: the innermost options() block's (checked when it was
    entered), else the environment's, checked (once per distinct environment: a bad
    one raises on every call)."""
    if _override:
        return _override[-1]
    key = _env_values()
    opts = _env_checked.get(key)
    if opts is None:
        opts = _checked_options(_env_options())
        _env_checked[key] = opts
    return opts


@functools.lru_cache(maxsize=64)
def _checked_options(opts: DecodeOptions) -> DecodeOptions:
    if opts.combine not in ("auto", "fused", "kernel"):
        raise ValueError(f"decode option combine: must be 'auto', 'fused' or 'kernel', got {opts.combine!r}")
    if opts.append not in ("fused", "separate"):
        raise ValueError(f"decode option append: must be 'fused' or 'separate', got {opts.append!r}")
    if opts.kv_load not in ("tma", "pointer"):
        raise ValueError(f"decode option kv_load: must be 'tma' or 'pointer', got {opts.kv_load!r}")
    if opts.gather not in ("rows", "pages"):
        raise ValueError(f"decode option gather: must be 'rows' or 'pages', got {opts.gather!r}")
    if opts.block_n and (opts.block_n < 16 or opts.block_n & (opts.block_n - 1)):
        raise ValueError(f"decode option block_n: must be a power of two >= 16, got {opts.block_n}")
    if opts.block_m and (opts.block_m < 16 or opts.block_m > 128 or opts.block_m & (opts.block_m - 1)):
        raise ValueError(f"decode option block_m: must be a power of two in 16..128, got {opts.block_m}")
    if opts.min_split_keys < 1:
        raise ValueError(f"decode option min_split_keys: must be >= 1, got {opts.min_split_keys}")
    return opts


@contextlib.contextmanager
def options(**kw):
    """Override decode launch options inside the block (see the module docstring)."""
    base = _override[-1] if _override else _env_options()
    _override.append(dataclasses.replace(base, **kw))
    try:
        _checked_options(_override[-1])  # validate now (current_options trusts the entries here)
        yield
    finally:
        _override.pop()


# Default tiles for Hopper, by BLOCK_D: (BLOCK_N, num_warps, num_stages). Decode is
# memory bound: a tile moves 2 * BLOCK_N * D * 2 bytes (32 KB for D = 128), and
# num_stages - 1 of them are in flight per program. Two regimes (first H200 run,
# 2026-11-29, bf16, Hq = 32, Hk = 8, D = 128; bench/NOTES.md, "## Decode", "Defaults
# from the first H200 run"):
#
# split regime (B * Hk * m-blocks < SMs; the cache is split to fill the GPU): DEFAULT_TILES.
#   D = 128: 64 keys, 4 warps, 3 stages (70 KB of shared memory: 3 programs an SM). At
#   B = 1 it beat 128-key tiles (L = 8k: 28.6 vs 32.8 us graph; 128k: 147.7 vs 152.4) and
#   equalled 4 stages or 8 warps.
# batch regime (B * Hk * m-blocks >= SMs, and >= BATCH_TILE_MIN_KEYS keys a program):
#   BATCH_TILES. D = 128: 128 keys, 4 warps, 3 stages (136 KB, 252 registers: one program
#   an SM, each with two 64 KB tiles in flight): B = 32, L = 32k: 966 us against 1149 for
#   the 64-key tile at the same 2 splits; B = 128, L = 8k: 957 against 983 us (graph).
#   (The 64-key tile's 3 programs an SM left the 2-split grid of B = 32 at 1.29 waves of
#   resident programs: 512 programs on 396 slots.) Paged caches add 2 stages as below
#   (136 KB at 128 keys x 5 stages, sm_90a compile); pages smaller than the batch tile
#   gather rows by pointer loads and take BATCH_GATHER_TILES instead: 32 keys, 4 warps,
#   5 stages, 37 KB and 122 registers (4 programs an SM): page 16, B = 32, L = 32k:
#   995 us against 1254 for the 64-key gather and 1131 for a 128-key gather (graph).
#
# Session 4 sweep (2026-11-29, H200, B = 1, graph µs at L = 8k / 32k / 128k; bench/gpu/
# s4_decode_sweep.py, bench/NOTES.md "Session 4"):
#   64,4,3 fused 23.7 / 52.4 / 144.1; 64,4,3 + combine kernel 21.7 / 50.7 / 142.0;
#   128,4,3 + combine kernel 22.3 / 49.5 / 138.6. Hence, in the split regime:
#   - COMBINE: the partials merge in a second kernel (each program loads all partials of
#     its rows at once) instead of serially in the last program: -2 µs at every L
#     (in CUDA graphs; eagerly the second launch costs more host time: auto_combine);
#   - the 128-key tile once a split streams >= WIDE_SPLIT_MIN_KEYS keys;
#   - paged caches that gather rows (page < BLOCK_N): twice the splits while a split
#     keeps >= GATHER_SPLIT_MIN_KEYS keys (page 16, L = 128k: 144.0 µs at 32 splits
#     against 159.7 at 16; at L = 8k 16 splits stay: 23.6 against 25.5).
DEFAULT_TILES = {16: (128, 4, 4), 32: (128, 4, 4), 64: (128, 4, 3), 128: (64, 4, 3), 256: (32, 4, 3)}
BATCH_TILES = {128: (128, 4, 3)}          # other head dims: DEFAULT_TILES (not measured yet)
BATCH_GATHER_TILES = {128: (32, 4, 5)}    # stages included (a paged layout only)
BATCH_TILE_MIN_KEYS = 4096                # keys a program streams; below it, DEFAULT_TILES
WIDE_SPLIT_MIN_KEYS = 2048                # split regime: BATCH_TILES from this many keys a split
GATHER_SPLIT_MIN_KEYS = 4096              # split regime, row gather: split further down to this
GATHER_MAX_SPLITS = 32
INTERPRETER_TILE = (16, 4, 1)  # small tiles: the small test shapes still cross many tiles
# The tiles above were sized for 2-byte caches. fp32 caches take twice the bytes a tile: the 128-key D = 128 tile
# (wide split, batch regime) asked 278,544 bytes of shared memory against 232,448 on an H100 (OutOfResources,
# flash_attn_with_kvcache fp32, B = 1, L = 32k, session 61). default_tile halves BLOCK_N while the K / V stages in
# flight need more than KV_SMEM_BUDGET (kv_smem_bytes; the q tile, partials and barriers took ~16 KB more there).
KV_SMEM_BUDGET = 200 * 1024
# fp32 caches at D = 64 / 128 / 256 (session 63): the 2-byte tiles spill there (ptxas, sm_90a: D = 128 on
# (64, 4, 3) 3.1-4.4 KB a thread, D = 256 on (32, 4, 3) 4.5-34 KB, D = 64 on (128, 4, 3) 1.0-4.3 KB; bench/NOTES.md
# "Session 61" / "Session 63"); 8 warps with 16-32 keys do not. H100, session 63, do_bench median us, Hq = 32,
# Hk = 8 (bench/gpu/s61_fp32_decode_tiles.py, s63_fp32_decode_d64.py):
#   D = 128, B = 1 8k / 32k, B = 8 8k: default 176 / 588 / 1132, (16, 8, 3) 105 / 371 / 734,
#            (32, 8, 3) 89 / 287 / 547, (16, 4, 3) 93 / 314 / 665
#   D = 256, B = 1 8k, 1 / 4 query rows: default 553 / 2501, (16, 8, 3) 228 / 353, (32, 8, 3) 534 / 598
#   D = 64, B = 1 8k / 32k, B = 8 8k: default 64.4 / 170.0 / 312.0, (32, 8, 3) 44.8 / 135.5 / 262.2,
#            (64, 8, 3) 60.5 / 193.2 / 384.1
# Every regime (split, wide split, batch) takes them; paged caches add their 2 stages; pages smaller than BLOCK_N
# gather. D = 32 (block_d 32; its 2-byte tile (128, 4, 4) spills 16-372 B in fp32): (64, 4, 4) since session 65 -
# 0.94x the time on the H100 (session 63: B = 1 8k 32.8 -> 30.8 us, B = 8 8k 170.0 -> 159.1) and 0.95x on the H200
# (session 65: 31.3 -> 29.6, 165.8 -> 158.0); 8 warps 0.62-1.00x its speed.
FP32_TILES = {32: (64, 4, 4), 64: (32, 8, 3), 128: (32, 8, 3), 256: (16, 8, 3)}


def block_d(head_dim: int) -> int:
    return max(16, _pow2(head_dim))


def batch_regime(programs: int, keys_per_split: int, sms: int) -> bool:
    """Enough programs without splitting the cache to give every SM one, each streaming a
    long chunk: one large-tile program an SM beats three small-tile ones (see BATCH_TILES)."""
    return programs >= sms and keys_per_split >= BATCH_TILE_MIN_KEYS


def kv_smem_bytes(block_n: int, bd: int, stages: int, paged: bool, elem: int) -> int:
    """Shared memory of the K and V tiles in flight: num_stages - 1 of them, two fewer in a paged cache (the
    block-table load holds two pipeline stages; sm_90a compiles, bf16 D = 128: 70 KB at 64 keys x 3 stages
    contiguous, 38 KB paged, 136 KB at 128 keys x 5 stages paged)."""
    return max(1, stages - 1 - (2 if paged else 0)) * 2 * block_n * bd * elem


def default_tile(head_dim: int, page_size: int, batch: bool, split_keys: int = 0, elem: int = 2):
    """(BLOCK_N, num_warps, num_stages) that the launcher picks on Hopper. Paged caches get
    two more stages: the block-table load feeding each tile's address takes two stages of
    the software pipeline, and without them only one K/V tile would be in flight (sm_90a
    compile: 38 KB of shared memory at 3 stages against 70 KB for the contiguous cache).
    split_keys: keys per split in the split regime (long splits take the wide tile,
    except where pages are too small for it to load them by TMA). elem: the caches'
    element size; BLOCK_N halves while the tiles in flight overflow KV_SMEM_BUDGET (fp32); fp32 caches
    at block_d 32 / 64 / 128 / 256 take FP32_TILES (no spills) in every regime."""
    bd = block_d(head_dim)
    if elem == 4 and bd in FP32_TILES:
        bn, warps, stages = FP32_TILES[bd]
        return bn, warps, stages + (2 if page_size else 0)
    wide = (not batch and split_keys >= WIDE_SPLIT_MIN_KEYS and bd in BATCH_TILES
            and (page_size == 0 or page_size >= BATCH_TILES[bd][0]))
    paged_stages = 2 if page_size else 0
    if wide:
        bn, warps, stages = BATCH_TILES[bd]
    elif batch and bd in BATCH_TILES:
        bn, warps, stages = BATCH_TILES[bd]
        if page_size and page_size < bn:
            (bn, warps, stages), paged_stages = BATCH_GATHER_TILES[bd], 0     # (stages included)
    else:
        bn, warps, stages = DEFAULT_TILES[bd]
    stages += paged_stages
    while bn > 16 and kv_smem_bytes(bn, bd, stages, page_size > 0, elem) > KV_SMEM_BUDGET:
        bn //= 2
    return bn, warps, stages


def tile_for(head_dim: int, page_size: int, opts: DecodeOptions, batch: bool = False, split_keys: int = 0,
             elem: int = 2):
    """default_tile, or the interpreter's small tile; options override each field."""
    if interpreting():
        bn, warps, stages = INTERPRETER_TILE
    else:
        bn, warps, stages = default_tile(head_dim, page_size, batch, split_keys, elem)
    return opts.block_n or bn, opts.num_warps or warps, opts.num_stages or stages


def block_m_for(rows: int, head_dim: int, opts: DecodeOptions) -> int:
    """Query rows (G * Sq) per program, padded for tl.dot (>= 16). Larger groups are
    split over m-blocks, each of which reads the chunk again (from L2 when concurrent)."""
    if opts.block_m:
        return opts.block_m
    cap = 32 if head_dim > 128 else 64
    return min(cap, max(16, _pow2(rows)))


# Most splits the heuristic gives when B * Hk * m-blocks < SMs. Each split adds a partial
# to the serial merge of the last program (first H200 run, 2026-11-29, B = 1, L = 8k,
# graph: 24.3 / 28.6 / 40.0 / 60.0 us at 16 / 32 / 64 / 128 splits, ~0.27 us a split;
# L = 128k: 144.1 us at 16 splits, 147.7 at 33, 179.6 at 66): past one program an SM
# (16 x 8 = 128 programs on 132 SMs) more splits lost time.
SMALL_GRID_MAX_SPLITS = 16


@functools.lru_cache(maxsize=1024)
def num_splits_heuristic(programs: int, max_keys: int, sms: int, min_split_keys: int) -> int:
    """Splits per (sequence, KV head, m-block), from the program count without splits.

    Enough programs to fill the SMs at least twice, with a last wave at least 85% full
    (counted in SMs: the batch regime's tile runs one program an SM), no chunk shorter
    than min_split_keys keys, and at most SMALL_GRID_MAX_SPLITS when the unsplit grid
    is smaller than the GPU. max_keys is the cache capacity: actual lengths live on the
    device and reading them would cost a sync.
    """
    limit = max(1, min(MAX_SPLITS, max_keys // min_split_keys))
    if programs < sms:
        limit = min(limit, SMALL_GRID_MAX_SPLITS)
    for s in range(1, limit + 1):
        w = programs * s
        if w >= 2 * sms and w / (math.ceil(w / sms) * sms) >= 0.85:
            return s
    return limit


def auto_combine(batch: bool, device: torch.device) -> str:
    """The "auto" combine: the merge in a second kernel only in the split regime and only
    while a CUDA graph is being captured. There it saves ~2 µs of GPU time per step
    (COMBINE above). Eagerly, a step at small B is bound by host time instead, and a
    second Triton launch costs more than it saves: on the H200 machine's host, ~40 µs
    (2026-11-29, B = 1, L = 8k, eager: 115 µs fused against 159 µs with the kernel;
    bench/gpu/s4-decode-sweep.txt). Each mode is bitwise repeatable; the two differ in
    the order of the merge's float sums."""
    if batch:
        return "fused"
    capturing = device.type == "cuda" and torch.cuda.is_current_stream_capturing()
    return "kernel" if capturing else "fused"


def gather_splits(num_splits: int, capacity: int) -> int:
    """Split regime, pages gathered row by row (page < BLOCK_N): pointer gathers keep
    fewer bytes in flight per program than TMA tiles, so more programs stream the cache:
    double the splits while each keeps >= GATHER_SPLIT_MIN_KEYS keys."""
    while num_splits * 2 <= GATHER_MAX_SPLITS and capacity // (num_splits * 2) >= GATHER_SPLIT_MIN_KEYS:
        num_splits *= 2
    return num_splits


def append_split(programs: int, num_splits: int, sms: int) -> bool:
    """Whether the fused append gets a split of its own (the new tokens' rotation, cache
    write and attention, off the critical path of the cache streaming). In the split
    regime only, where the grid is resident at once and the extra programs cost no wave:
    B = 1, L = 8k, graph (first H200 run): the append added 4.2 us (+14.7%) with the last
    of 32 equal splits also doing the new tokens, but 1.2 us (+0.8%) at L = 128k where the
    last of 33 splits had 32 tiles against 63 (its slack hid the new tokens)."""
    return num_splits > 1 and programs < sms


# Ticket counters of the fused combine. The kernel leaves them at zero (the merging
# program resets its counter), so they are zeroed once, at allocation, and never
# again: no memset launch per step. Launches that may run concurrently must not share
# counters, hence one buffer per (device, stream) for eager calls. CUDA graphs use one
# more buffer per device, made (zeroed) by the eager warm-up call that precedes every
# capture in practice, so that the graph holds no memset node; graphs of decode steps
# must then not replay concurrently on different streams. Capturing without an eager
# call first still works: the graph then zeroes a buffer of its own on every replay.
_counters: dict = {}
_COUNTER_MIN = 4096


def _stream_key(device: torch.device) -> tuple:
    """(device index, current stream) of a CUDA device; (device type, None) elsewhere:
    the key of the per-stream buffers below."""
    if device.type != "cuda":
        return (device.type, None)
    index = device.index if device.index is not None else torch.cuda.current_device()
    return (index, torch.cuda.current_stream(device).cuda_stream)


def _counter_buffer(device: torch.device, n: int) -> torch.Tensor:
    key = _stream_key(device)
    if device.type == "cuda":
        graph_key = (key[0], "graphs")
        if torch.cuda.is_current_stream_capturing():
            buf = _counters.get(graph_key)
            if buf is None or buf.numel() < n:
                return torch.zeros(n, dtype=torch.int32, device=device)
            return buf
        if graph_key not in _counters or _counters[graph_key].numel() < n:
            _counters[graph_key] = torch.zeros(max(n, _COUNTER_MIN), dtype=torch.int32, device=device)
    buf = _counters.get(key)
    if buf is None or buf.numel() < n:
        buf = torch.zeros(max(n, _COUNTER_MIN), dtype=torch.int32, device=device)
        _counters[key] = buf
    return buf


# Workspaces: the split partials (o_part, lse_part) and an lse nobody asked for live in
# buffers kept per (device, stream, use), reused by every call on that stream (stream
# order keeps one call's partials from the next), and passed to plans as persistent
# tensors, so a replayed step allocates only its output. Why: a torch.empty on the H200
# machine's host costs ~5 us, and a split step with return_softmax_lse=False made four
# (bench/gpu/s14_decode_prof.py, 2026-11-30). Not while capturing a CUDA graph (the
# graph's own pool), not above WORKSPACE_MAX_BYTES, and not under memory.poison_outputs
# (the tests: fresh poisoned buffers catch a read of a partial nothing wrote).
_workspaces: dict = {}
WORKSPACE_MAX_BYTES = 64 << 20


def _workspace(device: torch.device, use: str, shape, dtype: torch.dtype) -> torch.Tensor:
    numel = math.prod(shape)
    nbytes = numel * dtype.itemsize
    capturing = device.type == "cuda" and torch.cuda.is_current_stream_capturing()
    if memory.poisoning() or nbytes > WORKSPACE_MAX_BYTES or capturing:
        return memory.empty(shape, dtype, device)
    key = _stream_key(device) + (use, dtype)
    buf = _workspaces.get(key)
    if buf is None or buf.numel() < numel:
        buf = torch.empty(max(numel, 1 << 16), dtype=dtype, device=device)
        _workspaces[key] = buf
    return plans.persistent(buf[:numel].view(shape))


def _tma_ready(t: torch.Tensor) -> bool:
    """The (dim0 * dim1, Hk * D) view TMA uses needs a contiguous cache with a 16-byte
    aligned base (its row stride Hk * D * esize is then a multiple of 16: D % 8 == 0)."""
    return t.is_contiguous() and t.data_ptr() % 16 == 0


# Pages smaller than BLOCK_N (session 28, offline; bench/NOTES.md "Page 16 at B = 1, 8k: the
# gather's instructions"). The row gather ("rows") loads one table entry per row (64 per
# 64-key tile, 8 cp.async of 4 bytes a thread) and builds every row pointer with 64-bit
# signed division, modulo and multiply: the pipelined loop of the sm_90a SASS holds 613
# instructions a tile against 342 for the contiguous cache's pointer loads, ~235 integer
# ones in one block between the softmax and the P @ V mma, on the path from a tile's
# arrival to the next copy's issue (one warp per scheduler: nothing hides them). "pages"
# loads BLOCK_N / page_size entries a tile and builds the pointers page by page (the
# in-page part is loop-invariant): 332 instructions (int64 offsets) or 299 (int32 offsets,
# PAGE_GATHER 2, when both caches span < 2**31 elements), same shared memory and stages.
# Its offsets carry an alignment hint (multiple of 8 elements), hence the stride check.
# Measured (session 28, H200, bf16, Hq 32, Hk 8, D 128, page 16, shuffled pool, CUDA graphs,
# read-only L2 flush, median of 3 interleaved rounds, bench/gpu/s28_decode_paged16_ab.py,
# s28/call3; outputs bitwise the row gather's): B = 1 8k 19.65 us against rows' 21.12 and
# the contiguous cache's 18.94 (1.037x contiguous, rows 1.115x; predicted 1.05-1.09x), int64
# offsets 19.92; B = 1 128k 133.5 against 134.9 (contiguous 129.3); B = 32 32k 981.8 against
# 987.1 (953.7). "pages" is the default since.
GATHER_INT32_LIMIT = 1 << 31


def _span(t: torch.Tensor) -> int:
    """1 + the largest element offset of t from its first element."""
    return 1 + sum((n - 1) * st for n, st in zip(t.shape, t.stride()) if n > 0)


def page_gather(opts: DecodeOptions, page_size: int, block_n: int, use_tma: bool, k_cache, v_cache) -> int:
    """The kernel's PAGE_GATHER: 0 the row gather (and every layout that does not gather),
    1 the page gather with int64 offsets, 2 with int32 offsets."""
    if opts.gather != "pages" or use_tma:
        return 0
    return page_gather_kind(page_size, block_n, k_cache, v_cache)


def page_gather_kind(page_size: int, block_n: int, k_cache, v_cache) -> int:
    """PAGE_GATHER for pointer loads of BLOCK_N-key tiles from pages of page_size keys (also
    the paged varlen forward's, launchers/forward_paged.py): the page gather where pages are
    smaller than a tile and the caches' strides keep its rows 16-byte aligned, else 0."""
    if not 0 < page_size < block_n:
        return 0
    for t in (k_cache, v_cache):
        if t.stride(0) % 8 or t.stride(1) % 8 or t.stride(3) != 1:
            return 0
    return 2 if max(_span(k_cache), _span(v_cache)) < GATHER_INT32_LIMIT else 1


def _kv_descriptor(t: torch.Tensor, block_n: int, bd: int):
    from triton.tools.tensor_descriptor import TensorDescriptor
    d0, d1, hk, d = t.shape
    return TensorDescriptor(t, [d0 * d1, hk * d], [hk * d, 1], [block_n, bd])


def _strides3(t):
    return (t.stride(0), t.stride(1), t.stride(2)) if t is not None else (0, 0, 0)


def kvcache_fwd(q, k_cache, v_cache, k_new, v_new, rotary_cos, rotary_sin, cache_seqlens, cache_batch_idx,
                cache_leftpad, block_table, params: AttnParams, rotary_interleaved: bool, alibi_slopes,
                num_splits: int, need_lse: bool = True, signed=None, span: int | None = None):
    """The triton backend's flash_attn_with_kvcache (contract: flashtriton.kvcache). A call
    seen before replays its launch plan (launchers/plans.py); cache_seqlens and the
    block table are inputs like q, so a decoding loop replays every step. need_lse=False:
    the returned lse is a workspace that the next call on the stream overwrites. signed: a
    hashable that stands for plans.sign of the inputs but alibi_slopes, equal for two calls
    exactly when those signatures are (flash_attn_with_kvcache passes its structure memo's
    entry for the signature, a kvcache._Structure). span: the most keys a sequence has, where the caller knows it
    to be below the capacity (launchers/forward._fwd_one_row's packed varlen keys, every sequence's window of one
    shared cache): the split count and tile follow it instead of the capacity."""
    inputs = (q, k_cache, v_cache, k_new, v_new, rotary_cos, rotary_sin, cache_seqlens, cache_batch_idx,
              cache_leftpad, block_table, alibi_slopes)
    opts = current_options()
    # (num_splits alone without a span: kvcache._remember_step finds a step's plan by that key)
    key = plan_key(inputs, params, rotary_interleaved, num_splits if span is None else (num_splits, span), opts,
                   need_lse, signed)
    return plans.run(key, inputs, lambda: _kvcache_fwd(
        q, k_cache, v_cache, k_new, v_new, rotary_cos, rotary_sin, cache_seqlens, cache_batch_idx, cache_leftpad,
        block_table, params, rotary_interleaved, alibi_slopes, num_splits, opts, need_lse, span))


def plan_key(inputs, params, rotary_interleaved, num_splits, opts, need_lse, signed):
    """kvcache_fwd's launch plan key (plans.plan_key) for inputs, its 12 tensor arguments,
    under options opts (current_options()); signed as kvcache_fwd's. (flashtriton.kvcache
    keeps the plan of a step seen before, found under this key.)"""
    if signed is not None:
        alibi_slopes = inputs[-1]
        signed = (signed, None if alibi_slopes is None else plans.sign((alibi_slopes,)))
    # (the stream: the fused combine's counters and the workspaces are per stream; no
    # gpu_shared flag: the decode launchers do not consult the warp-specialization policy)
    return plans.plan_key("decode", inputs, (params, bool(rotary_interleaved), num_splits, opts,
                                             plans.stream_id(inputs[0].device), need_lse), signed, policy=False)


def _kvcache_fwd(q, k_cache, v_cache, k_new, v_new, rotary_cos, rotary_sin, cache_seqlens, cache_batch_idx,
                 cache_leftpad, block_table, params: AttnParams, rotary_interleaved: bool, alibi_slopes,
                 num_splits: int, opts, need_lse: bool = True, span: int | None = None):
    batch, seqlen_q, nheads, head_dim = q.shape
    nheads_k = k_cache.shape[2]
    group = nheads // nheads_k
    paged = block_table is not None
    page_size = k_cache.shape[1] if paged else 0
    capacity = block_table.shape[1] * page_size if paged else k_cache.shape[1]
    if span is not None:
        capacity = max(1, min(capacity, span))   # (the decisions only: the kernel reads k_cache.shape[1])
    seqlen_new = k_new.shape[1] if k_new is not None else 0
    has_new = seqlen_new > 0
    has_rotary = rotary_cos is not None  # q rotates even when k has no tokens (flash-attn)
    per_row = params.window_left >= 0 or params.window_right >= 0
    bd = block_d(head_dim)
    rows = group * seqlen_q
    block_m = block_m_for(rows, head_dim, opts)
    m_blocks = _cdiv(rows, block_m)
    device = q.device
    dummy = cache_seqlens  # stands in for absent pointer arguments (never dereferenced)
    programs = batch * nheads_k * m_blocks
    sms = sm_count(device)
    auto_splits = num_splits == 0
    if auto_splits:
        num_splits = num_splits_heuristic(programs, capacity, sms, opts.min_split_keys)
    in_batch_regime = batch_regime(programs, capacity // num_splits, sms)
    block_n, num_warps, num_stages = tile_for(head_dim, page_size, opts, in_batch_regime, capacity // num_splits,
                                                  k_cache.element_size())
    if auto_splits and not in_batch_regime and 0 < page_size < block_n:
        num_splits = gather_splits(num_splits, capacity)

    appended = 0
    if has_new and opts.append == "separate":
        _append_separately(q, k_cache, v_cache, k_new, v_new, rotary_cos, rotary_sin, cache_seqlens,
                           cache_batch_idx, block_table, rotary_interleaved, block_n)
        if has_rotary:
            q = _rotate_q(q, rotary_cos, rotary_sin, cache_seqlens, rotary_interleaved, per_row)
        appended, has_new, has_rotary = seqlen_new, False, False

    cache_splits = num_splits
    if has_new and append_split(programs, num_splits, sms):
        num_splits += 1
    split = num_splits > 1
    combine = opts.combine if opts.combine != "auto" else auto_combine(in_batch_regime, device)
    fused = split and combine == "fused"

    out = memory.empty(q.shape, q.dtype, device)
    lse_shape = (batch, nheads, seqlen_q)
    lse = (memory.empty(lse_shape, torch.float32, device) if need_lse
           else _workspace(device, "lse", lse_shape, torch.float32))
    if split:
        o_part = _workspace(device, "o_part", (batch * nheads_k, num_splits, rows, head_dim), torch.float32)
        lse_part = _workspace(device, "lse_part", (batch * nheads_k, num_splits, rows), torch.float32)
    else:
        o_part = lse_part = lse
    counters = plans.persistent(_counter_buffer(device, batch * nheads_k * m_blocks)) if fused else dummy
    use_tma = (opts.kv_load == "tma" and (page_size == 0 or page_size >= block_n)
               and _tma_ready(k_cache) and _tma_ready(v_cache))
    if use_tma:
        k_desc, v_desc = _kv_descriptor(k_cache, block_n, bd), _kv_descriptor(v_cache, block_n, bd)
    else:
        k_desc, v_desc = k_cache, v_cache  # unused

    rot_half = rotary_cos.shape[1] if has_rotary else 0
    n_ro = rotary_cos.shape[0] if has_rotary else 0
    cos = rotary_cos if has_rotary else dummy
    sin = rotary_sin if has_rotary else dummy
    stride_ab, stride_ah = (0, 0)
    if alibi_slopes is not None:
        stride_ab, stride_ah = ((alibi_slopes.stride(0), alibi_slopes.stride(1)) if alibi_slopes.dim() == 2
                                else (0, alibi_slopes.stride(0)))
    softcap = params.softcap
    # ALiBi measured from an anchor (alibi_anchor.py; kernels/decode._update), where a row may sit
    # before every key and still see one: not causal, and more queries than the fewest keys there
    # can be (the lengths are on the device, so any Sq > 1)
    anchored = alibi_slopes is not None and params.window_right != 0 and seqlen_q > 1
    grid = (batch * nheads_k, num_splits, m_blocks)
    plans.launch(decode_split_kernel, grid,
        q, k_cache, v_cache, k_new if has_new else dummy, v_new if has_new else dummy, cos, sin, k_desc, v_desc,
        cache_seqlens, cache_batch_idx if cache_batch_idx is not None else dummy,
        cache_leftpad if cache_leftpad is not None else dummy, block_table if paged else dummy,
        alibi_slopes if alibi_slopes is not None else dummy,
        out, lse, o_part, lse_part, counters,
        *_strides3(q), *_strides3(k_cache), *_strides3(v_cache),
        *_strides3(k_new if has_new else None), *_strides3(v_new if has_new else None),
        *_strides3(out), *_strides3(lse),
        block_table.stride(0) if paged else 0,
        cos.stride(0) if has_rotary else 0, sin.stride(0) if has_rotary else 0,
        stride_ab, stride_ah,
        nheads_k, group, seqlen_q, seqlen_new if has_new else 0, appended, n_ro, rot_half, num_splits, cache_splits,
        m_blocks, k_cache.shape[1],
        params.softmax_scale * LOG2E,
        (2.0 * LOG2E * params.softmax_scale / softcap) if softcap > 0 else 0.0,
        softcap * LOG2E,
        params.window_left, params.window_right,
        HEAD_DIM=head_dim, BLOCK_D=bd, BLOCK_M=block_m, BLOCK_N=block_n, PAGE_SIZE=page_size,
        HAS_BATCH_IDX=cache_batch_idx is not None and not paged, HAS_LEFTPAD=cache_leftpad is not None,
        HAS_NEW=has_new, BLOCK_NEW=16, HAS_ROTARY=has_rotary, ROTARY_INTERLEAVED=bool(rotary_interleaved),
        ROTARY_PER_ROW=per_row, HAS_LEFT=params.window_left >= 0, HAS_RIGHT=params.window_right >= 0,
        HAS_ALIBI=2 if anchored else alibi_slopes is not None, HAS_SOFTCAP=softcap > 0, SPLIT=split,
        FUSED_COMBINE=fused,
        KV_TMA=use_tma, DOT_PRECISION=_dot_precision(q.dtype, seqlen_q, "decode"),
        QK_LEVELS=qk_levels(q.dtype, bd, seqlen_q),
        PAGE_GATHER=page_gather(opts, page_size, block_n, use_tma, k_cache, v_cache),
        num_warps=num_warps, num_stages=num_stages,
    )
    if split and not fused:
        block_r = min(16, _pow2(rows))
        plans.launch(decode_combine_kernel, (batch * nheads_k, _cdiv(rows, block_r)),
            o_part, lse_part, out, lse, *_strides3(out), *_strides3(lse),
            nheads_k, group, seqlen_q, num_splits,
            HEAD_DIM=head_dim, BLOCK_D=bd, BLOCK_R=block_r, SHIFT=anchored, num_warps=4)
    return out, lse


def _append_separately(q, k_cache, v_cache, k_new, v_new, rotary_cos, rotary_sin, cache_seqlens, cache_batch_idx,
                       block_table, rotary_interleaved, block_n):
    batch, seqlen_new, nheads_k, head_dim = k_new.shape
    paged = block_table is not None
    has_rotary = rotary_cos is not None
    dummy = cache_seqlens
    bn = min(block_n, max(16, _pow2(seqlen_new)))
    plans.launch(append_kv_kernel, (batch * nheads_k, _cdiv(seqlen_new, bn)),
        k_new, v_new, k_cache, v_cache, rotary_cos if has_rotary else dummy, rotary_sin if has_rotary else dummy,
        cache_seqlens, cache_batch_idx if cache_batch_idx is not None else dummy, block_table if paged else dummy,
        *_strides3(k_new), *_strides3(v_new), *_strides3(k_cache), *_strides3(v_cache),
        block_table.stride(0) if paged else 0,
        rotary_cos.stride(0) if has_rotary else 0, rotary_sin.stride(0) if has_rotary else 0,
        nheads_k, seqlen_new, rotary_cos.shape[0] if has_rotary else 0, rotary_cos.shape[1] if has_rotary else 0,
        HEAD_DIM=head_dim, BLOCK_D=block_d(head_dim), BLOCK_N=bn, PAGE_SIZE=k_cache.shape[1] if paged else 0,
        HAS_BATCH_IDX=cache_batch_idx is not None and not paged, HAS_ROTARY=has_rotary,
        INTERLEAVED=bool(rotary_interleaved), num_warps=4)


def _rotate_q(q, rotary_cos, rotary_sin, cache_seqlens, rotary_interleaved, per_row):
    batch, seqlen_q, nheads, head_dim = q.shape
    q_rot = memory.empty(q.shape, q.dtype, q.device)  # scratch, fully written
    block_h = min(16, _pow2(nheads))
    plans.launch(rotary_q_kernel, (batch, seqlen_q, _cdiv(nheads, block_h)),
        q, q_rot, rotary_cos, rotary_sin, cache_seqlens, *_strides3(q), *_strides3(q_rot),
        rotary_cos.stride(0), rotary_sin.stride(0), nheads, seqlen_q, rotary_cos.shape[0], rotary_cos.shape[1],
        HEAD_DIM=head_dim, BLOCK_D=block_d(head_dim), BLOCK_H=block_h, PER_ROW=per_row,
        INTERLEAVED=bool(rotary_interleaved), num_warps=4)
    return q_rot


def merge_states(outs: torch.Tensor, lses: torch.Tensor):
    """outs (N, P, S, H, D), lses (N, P, H, S) (any strides, unit inner stride for outs)
    -> (out (P, S, H, D) in outs' dtype, lse (P, H, S) fp32). See flashtriton.merge."""
    n, p, s, h, d = outs.shape
    out = memory.empty((p, s, h, d), outs.dtype, outs.device)
    lse = memory.empty((p, h, s), torch.float32, outs.device)
    if out.numel() == 0 and lse.numel() == 0:
        return out, lse
    block_s = 16  # rows per program: a larger tile spills (sm_90a compile: 3 KB at 64 x 128)
    plans.launch(merge_states_kernel, (p * h, _cdiv(s, block_s)),
        outs, lses, out, lse,
        outs.stride(0), outs.stride(1), outs.stride(2), outs.stride(3),
        lses.stride(0), lses.stride(1), lses.stride(2), lses.stride(3),
        out.stride(0), out.stride(1), out.stride(2),
        lse.stride(0), lse.stride(1), lse.stride(2),
        h, s, n,
        HEAD_DIM=d, BLOCK_D=block_d(d), BLOCK_S=block_s, num_warps=4)
    return out, lse
