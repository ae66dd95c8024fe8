"""Host side of kernels/fwd_gluon.py (the hand-scheduled Gluon forward for Hopper):
validation of its narrow contract, descriptors, grid, launch.

    fwd_into(q, k, v, out, lse, scale, causal)  the library's route (launchers.forward, where
                                            launchers.policy.gluon_fwd accepts the call)
    attention_fwd_gluon(q, k, v, scale)     standalone: checks (ValueError before any
                                            launch), allocates, returns (o, lse)
    prepare(q, k, v, scale, ...)            the same, as a launch function (A/B timing)

persistent=True: the kernel's PERSISTENT variant, grid = num_programs CTAs (default: the
device's SM count), each looping over (query block, batch x head) tiles; the route
(fwd_into) takes it for non-causal calls (policy.GLUON_FWD_PERSISTENT, session 24).
scheduled=True (persistent causal; A/B only, not routed): the blocks dealt by the host
(launchers/schedule.py).

causal=True is the library's bottom-right causal mask (query i sees key j iff
j <= i + Nk - Nq; a row that sees no key, Nq > Nk, gets O = 0 and lse = +inf).

window=(left, right) (session 25, 2026-12-01; routed by policy.gluon_fwd_window's
GLUON_FWD_WINDOW_MIN_N): flash-attn's sliding window as the library uses it (reference.py): query i
sees key j iff i + Nk - Nq - left <= j <= i + Nk - Nq + right, -1 for an unbounded side;
any left, right >= -1 (window_args: edges reaching past every sequence become -1, (-1,
-1) is the plain kernel, (-1, 0) the CAUSAL one, the rest the kernel's WINDOW variant).
causal=True with a window: the right edge must be 0 or -1 (it is the diagonal); rows
that see no key get O = 0 and lse = +inf.

dropout_p, rng (prepare / attention_fwd_gluon / fwd_into; session 26, 2026-12-01; routed
where policy.gluon_fwd_dropout's GLUON_FWD_DROPOUT_MIN_N admits a call): the kernel's
DROPOUT variant, any of the above (plain, causal, window; one block a CTA or persistent),
with the library's dropout mask bitwise (kernels/common.py dropout_keep; rng the int64
(seed, offset) device tensor of the call, the counter layout rng_rows = B * Nq, rng_stride
= Nk as launchers/forward.py passes fwd_ws.py), so that the library's backward and
return_attn_probs' S_dmask (launchers.forward.dropout_mask) regenerate the same mask.
check_dropout validates them (ValueError naming the argument, before any launch).

num_consumers=3 (prepare / attention_fwd_gluon / fwd_into; session 29, routed at D = 64 by
policy.GLUON_FWD_CONSUMERS): the kernel's NUM_CONSUMERS = 3 variant, plain PERSISTENT only, at
a head dim of CONSUMERS3_CONFIG (D = 64: 192 query rows a CTA, 64 a consumer warpgroup). Nq
must be a multiple of 64 (BLOCK_M / 3), not of 192: the last query block of a sequence may
end inside the block (launch_geometry: n_m = cdiv(Nq, 192); the kernel's consumers past the
end store nothing). Also (session 29, a helper; routed at D = 64 from 4k since session 30 by
policy.GLUON_FWD_CAUSAL_CONSUMERS) the CAUSAL forward one block a CTA (persistent=False,
causal=True; grid (cdiv(Nq, 192), B * H), heaviest blocks first), with the same Nq rule.

head dim 256 (a session-31 helper; routed by policy.GLUON_FWD_MIN_N and GLUON_FWD_CAUSAL_MIN_N
since session 32, plain and causal from 512 since session 33): the kernel's D = 256 tile, DEFAULT_CONFIG[256] =
(BLOCK_M 128, BLOCK_N 64, 2 stages: Q 64 KB + 2 x (K + V) 128 KB of shared memory), plain or
causal, one block a CTA or persistent (pingpong one block a CTA); no window, dropout,
scheduled, early_q, lean_mask or num_consumers=3 (check_head_dim: ValueError). Nq % 128 == 0,
Nk % 64 == 0. split_empty (default: on at the head dims of fwd_gluon.SPLIT_EMPTY_DEFAULT, D =
256): the kernel's SPLIT_EMPTY, K's and V's ring stages released apart (bitwise the same
outputs; check_split_empty).

Gluon kernels have no interpreted form (Triton 3.6.0): nothing here runs under
TRITON_INTERPRET, and the policy never routes there.
"""
from __future__ import annotations

import functools
import math

import torch
from triton.experimental.gluon import language as gl

from .. import memory
from ..kernels.fwd_gluon import (CONSUMERS3_CONFIG, DEFAULT_CONFIG, PLAIN_CAUSAL_ONLY, SPLIT_EMPTY_DEFAULT,
                                 attn_fwd_gluon_kernel)
from . import plans, schedule
from .common import LOG2E, _cached_map, _cu_blocks, _heaviest_first, _stamp, sm_count

_DTYPES = {torch.float16: gl.float16, torch.bfloat16: gl.bfloat16}


def rows_view_ok(x: torch.Tensor) -> bool:
    """Whether x (B, N, heads, D) is, as it is, the rows of a (B * N, heads * D) matrix a 2-D
    TMA descriptor can read: unit inner stride, heads packed, batches consecutive, 16-byte
    aligned base and row stride."""
    b, n, h, d = x.shape
    es = x.element_size()
    return (x.stride(3) == 1 and x.stride(2) == d and x.stride(1) >= h * d
            and (b == 1 or x.stride(0) == n * x.stride(1))
            and (x.stride(1) * es) % 16 == 0 and x.data_ptr() % 16 == 0)


def _rows_view(x: torch.Tensor):
    """x (B, N, heads, D) as the rows of a (B * N, heads * D) matrix for a 2-D TMA
    descriptor: (x, shape, strides), x made contiguous when rows_view_ok fails."""
    b, n, h, d = x.shape
    if not rows_view_ok(x):
        x = x.contiguous() if x.data_ptr() % 16 == 0 else x.clone(memory_format=torch.contiguous_format)
    return x, [b * n, h * d], [x.stride(1), 1]


@functools.lru_cache(maxsize=None)
def _box_layout(rows: int, d: int, dtype: torch.dtype):
    """The shared layout of a (rows, d) box: get_default_for costs ~12 us a call on the CI CPU, and a launch
    that no plan replays (a plan's first call, CUDA-graph capture, FLASHTRITON_PLANS=0) builds four (session 49)."""
    return gl.NVMMASharedLayout.get_default_for([rows, d], _DTYPES[dtype])


def _desc(x: torch.Tensor, rows: int):
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    x, shape, strides = _rows_view(x)
    d = x.shape[-1]
    return x, TensorDescriptor(x, shape, strides, [rows, d], _box_layout(rows, d, x.dtype))


def check_kv_shapes(q, k, v, head_dims) -> tuple:
    """k and v against q (4-D tensors, checked before): equal shapes, q's batch and head
    dim, a head dim in head_dims, q's heads a multiple of k's (GQA). Returns (B, Nq, H, D,
    Nk, Hk). Shared with launchers/backward_gluon.py."""
    b, nq, h, d = q.shape
    if k.shape != v.shape:
        raise ValueError(f"k, v: shapes differ ({tuple(k.shape)}, {tuple(v.shape)})")
    bk, nk, hk, dk = k.shape
    if bk != b:
        raise ValueError(f"k: batch {bk} differs from q's {b}")
    if dk != d:
        raise ValueError(f"k: head dim {dk} differs from q's {d}")
    if d not in head_dims:
        raise ValueError(f"q: head dim {d} not supported (one of {sorted(head_dims)})")
    if hk == 0 or h % hk != 0:
        raise ValueError(f"q: {h} heads not a multiple of k's {hk} heads")
    return b, nq, h, d, nk, hk


def check_inputs(q, k, v, softmax_scale, block_m: int, block_n: int) -> None:
    """The narrow contract of attn_fwd_gluon_kernel; ValueError naming what is wrong.
    Needs no GPU (shapes, dtypes and strides only)."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
        if t.dim() != 4:
            raise ValueError(f"{name}: expected 4 dimensions (B, N, heads, D), got shape {tuple(t.shape)}")
        if t.dtype not in _DTYPES:
            raise ValueError(f"{name}: dtype {t.dtype} not supported (float16 or bfloat16)")
    if not (q.dtype == k.dtype == v.dtype):
        raise ValueError(f"q, k, v: dtypes differ ({q.dtype}, {k.dtype}, {v.dtype})")
    if not (q.device == k.device == v.device):
        raise ValueError(f"q, k, v: devices differ ({q.device}, {k.device}, {v.device})")
    b, nq, h, d, nk, hk = check_kv_shapes(q, k, v, DEFAULT_CONFIG)
    if nq == 0 or nq % block_m != 0:
        raise ValueError(f"q: sequence length {nq} not a positive multiple of BLOCK_M = {block_m}")
    if nk == 0 or nk % block_n != 0:
        raise ValueError(f"k: sequence length {nk} not a positive multiple of BLOCK_N = {block_n}")
    if b == 0:
        raise ValueError("q: batch size 0")
    if not isinstance(softmax_scale, (int, float)) or isinstance(softmax_scale, bool) \
            or not math.isfinite(softmax_scale) or softmax_scale == 0:
        raise ValueError(f"softmax_scale: expected a finite nonzero number, got {softmax_scale!r}")


def check_dropout(dropout_p, rng, device) -> float:
    """dropout_p (a real number in [0, 1)) and rng (None when dropout_p == 0, else an int64
    tensor of 2 elements, (seed, offset), on q's device); ValueError naming the argument.
    Returns dropout_p as a float. Needs no GPU."""
    if isinstance(dropout_p, bool) or not isinstance(dropout_p, (int, float)) or not math.isfinite(dropout_p) \
            or not 0.0 <= dropout_p < 1.0:
        raise ValueError(f"dropout_p: expected a number in [0, 1), got {dropout_p!r}")
    if dropout_p == 0:
        if rng is not None:
            raise ValueError("rng: only with dropout_p > 0")
        return 0.0
    if not isinstance(rng, torch.Tensor):
        raise ValueError(f"rng: dropout_p > 0 needs the (seed, offset) int64 tensor, got {type(rng).__name__}")
    if rng.dtype != torch.int64 or rng.numel() != 2 or not rng.is_contiguous():
        raise ValueError(f"rng: expected a contiguous int64 tensor of 2 elements (seed, offset), got "
                         f"{rng.dtype} of shape {tuple(rng.shape)}")
    if rng.device != device:
        raise ValueError(f"rng: on {rng.device}, q on {device}")
    return float(dropout_p)


def window_args(window, causal: bool, seqlen_q: int, seqlen_k: int) -> tuple[bool, bool, int, int]:
    """(causal, window, win_left, win_right) for the kernel from the caller's causal and
    window (None or (left, right), ints >= -1); ValueError naming `window` otherwise.
    Edges that reach past every sequence are no edges (left >= Nk - 1 or right >= Nq - 1:
    -1, as api._effective_window); then (-1, -1) is the plain kernel, (-1, 0) the CAUSAL
    one, anything else WINDOW with an unbounded side passed as Nq + Nk (past every key,
    and small enough for the kernel's int32 index arithmetic). Needs no GPU."""
    if window is None:
        return bool(causal), False, 0, 0
    if not (isinstance(window, (tuple, list)) and len(window) == 2
            and all(isinstance(w, int) and not isinstance(w, bool) and w >= -1 for w in window)):
        raise ValueError(f"window: expected a pair (left, right) of ints >= -1 (-1: unbounded), got {window!r}")
    left, right = int(window[0]), int(window[1])
    if causal:
        if right not in (-1, 0):
            raise ValueError(f"window: with causal=True the right edge is the diagonal (0, or -1), got {window!r}")
        right = 0
    left = -1 if left >= seqlen_k - 1 else left
    right = -1 if right >= seqlen_q - 1 else right
    if left < 0 and right < 0:
        return False, False, 0, 0
    if left < 0 and right == 0:
        return True, False, 0, 0
    unbounded = seqlen_q + seqlen_k
    return False, True, left if left >= 0 else unbounded, right if right >= 0 else unbounded


def launch_geometry(b: int, nq: int, h: int, block_m: int, persistent: bool, num_programs: int | None,
                    num_consumers: int = 2) -> tuple[int, tuple]:
    """(rows a consumer warpgroup = the Q / O descriptors' box rows, grid) of a launch.
    Query blocks a sequence: Nq / BLOCK_M with 2 consumers (the contract: Nq a multiple of
    BLOCK_M), cdiv(Nq, BLOCK_M) with 3 (Nq a multiple of BLOCK_M / 3: the last block may
    end inside). persistent: (min(num_programs, blocks),) CTAs, num_programs given (the
    caller resolves the SM count); else (blocks a sequence, B * H). Needs no GPU."""
    n_m = -(-nq // block_m) if num_consumers == 3 else nq // block_m
    if persistent:
        grid = (max(1, min(int(num_programs), n_m * b * h)),)
    else:
        if b * h > 65535:
            raise ValueError(f"q: B * H = {b * h} above 65535, the grid's second dimension (one block a CTA; "
                             "persistent launches have no such limit)")
        grid = (n_m, b * h)
    return block_m // num_consumers, grid


def _launch_into(q, k, v, o, lse, softmax_scale, block_m: int, block_n: int, num_stages: int, pingpong: bool,
                 causal: bool = False, persistent: bool = False, num_programs: int | None = None,
                 band: int | None = None, scheduled: bool = False, window=None, dropout_p: float = 0.0,
                 rng=None, num_consumers: int = 2, early_q: bool = False, lean_mask: bool = False,
                 split_empty: bool = False, own_tiles: bool = False, timeline=None,
                 o_stage: bool = False):
    """Descriptors over q, k, v, o (each viewed as (B * N, heads * D) rows) and the launch
    function writing o and lse. q, k, v are copied when their strides do not allow the
    view (the library's route never sends such tensors: rows_view_ok). persistent: grid
    (min(num_programs, tiles),), num_programs defaulting to the device's SM count; band
    (PERSISTENT CAUSAL's tile order, kernels/fwd_gluon.py _tile_of) defaulting to
    causal_band(). scheduled (persistent causal or windowed only): the host's longest-first deal
    (launchers/schedule.py causal_schedule / window_schedule) instead of the kernel's round robin. window: None or
    (left, right), through window_args (which may turn it into the plain or the CAUSAL
    kernel; prepare rejects scheduled for the plain one beforehand). dropout_p > 0: the DROPOUT
    variant with rng (check_dropout's contract), the counter layout of launchers/forward.py
    (rng_rows = B * Nq, rng_stride = Nk). num_consumers: the kernel's NUM_CONSUMERS (3: plain
    persistent or causal one block a CTA, prepare checks; the Q / O boxes are BLOCK_M / 3 rows, launch_geometry).
    early_q: the kernel's EARLY_Q (persistent, 2 consumers, no dropout: check_early_q; o must
    have packed rows, stride(1) == H * D, which the kernel's O stores assume). lean_mask: the
    kernel's LEAN_MASK (WINDOW's masked tiles with one compare a score, check_lean_mask), passed
    only where window_args leaves the WINDOW kernel (a window that is plain or causal has none).
    split_empty: the kernel's SPLIT_EMPTY (2 consumers; K's and V's stages released apart).
    o_stage: the kernel's O_STAGE (persistent, 2 consumers, BLOCK_N == BLOCK_M, without early_q / split_empty /
    dropout: check_o_stage). timeline: an int64 (blocks, 8) buffer for the kernel's TIMELINE stamps (a probe, bench/gpu/
    s42_timeline_probe.py; not with scheduled, whose SCHED argument it takes).
    own_tiles: the kernel's OWN_TILES (causal one block a CTA, 2 consumers: check_own_tiles), passed
    only where window_args leaves the CAUSAL kernel."""
    b, nq, h, d = q.shape
    nk, hk = k.shape[1], k.shape[2]
    causal, windowed, win_left, win_right = window_args(window, causal, nq, nk)
    if persistent and num_programs is None:
        num_programs = torch.cuda.get_device_properties(o.device).multi_processor_count
    wg_rows, grid = launch_geometry(b, nq, h, block_m, persistent, num_programs, num_consumers)
    q, q_desc = _desc(q, wg_rows)
    k, k_desc = _desc(k, block_n)
    v, v_desc = _desc(v, block_n)
    o_view, o_desc = _desc(o, wg_rows)
    assert o_view is o, "o must be a (B, N, H, D) contiguous buffer"
    if band is None:
        band = causal_band(o.device, nk, d, h // hk, q.element_size(), b * h) if persistent and causal else 1
    # (review, session 24) a band wider than B * H deals the same order; capped, n_m * band
    # stays far below 2^31 in the kernel's int32 arithmetic (band = 2^28 wrapped it: a
    # negative pid_bh and an lse store before the buffer)
    band = min(band, b * h)
    qk_scale = float(softmax_scale) * LOG2E
    # SCHED: the schedule when scheduled, else any pointer the kernel never reads (lse). A schedule not yet on the
    # device cannot be copied there during a CUDA graph capture: the kernel's banded deal then (the same outputs,
    # bitwise; only the order of the blocks differs)
    if windowed:
        # a window's deal (schedule.window_schedule; written in session 42, routed in session 43): no bands
        deal_args = (o.device, nq, nk, b * h, grid[0], win_left, win_right, block_m, block_n)
        deal, deal_cached = schedule.window_schedule, schedule.window_cached
    else:
        deal_args = (o.device, nq, nk, b * h, grid[0], band, block_m, block_n)
        deal, deal_cached = schedule.causal_schedule, schedule.cached
    if scheduled and torch.cuda.is_current_stream_capturing() and not deal_cached(*deal_args):
        scheduled = False
    # (the deal is a cached tensor that outlives the call: a launch plan passes it as it is; unmarked, the plan
    # could not place it and every eager call ran this host path: causal 1k / 2k at 90 / 195 TFLOP/s, s42 call 5)
    sched = plans.persistent(deal(*deal_args)) if scheduled else lse
    dropout = dropout_p > 0
    # RNG: the call's (seed, offset) with dropout, else any pointer the kernel never reads
    rng_arg = rng if dropout else lse
    # NUM_CONSUMERS only when 3: the 2-consumer launches stay as they were (the default)
    extra = dict(NUM_CONSUMERS=3) if num_consumers == 3 else {}
    if early_q:
        # the kernel stores O at row stride H * D (fwd_gluon: o_rs = nheads * HEAD_DIM)
        assert o.stride(1) == h * d and o.stride(3) == 1, "early_q: o needs packed (B * N, H * D) rows"
        extra["EARLY_Q"] = True
    if lean_mask and windowed:
        extra["LEAN_MASK"] = True
    if split_empty:
        assert num_consumers == 2, "split_empty: 2 consumers only"
        extra["SPLIT_EMPTY"] = True
    if own_tiles and causal and not windowed:
        extra["OWN_TILES"] = True
    if o_stage:
        # O through the last tile's K stage, Q freed before the last P V (kernels/fwd_gluon.py O_STAGE; prepare and
        # fwd_into check the rule first)
        assert persistent and num_consumers == 2 and not (early_q or split_empty or dropout_p) and block_n == block_m
        extra["O_STAGE"] = True
    if timeline is not None:
        # the TIMELINE probe (sessions 41-42): an int64 (blocks, 8) buffer of the kernel's stamps, passed as SCHED
        assert not scheduled and timeline.dtype == torch.int64
        sched = timeline
        extra["TIMELINE"] = True

    def launch():
        with torch.cuda.device(o.device):
            plans.launch(attn_fwd_gluon_kernel, grid,
                q_desc, k_desc, v_desc, o_desc, lse, nq, nk, h, h // hk, qk_scale, b, band, sched, win_left,
                win_right, rng_arg, float(dropout_p), b * nq, nk, o, HEAD_DIM=d, BLOCK_M=block_m, BLOCK_N=block_n,
                NUM_STAGES=num_stages, NEG_SCALE=softmax_scale <= 0, PINGPONG=pingpong, CAUSAL=bool(causal),
                PERSISTENT=bool(persistent), SCHEDULED=bool(scheduled), WINDOW=windowed, DROPOUT=dropout,
                num_warps=4, **extra)
        return o, lse
    return launch


# PERSISTENT CAUSAL: the share of the L2 one band of batch x heads' K / V may fill (the rest
# holds Q / O traffic and the next band's first tiles). 2026-12-01, an estimate; the A/B
# (bench/gpu/s24_gluon_persistent_ab.py) times 1/4, 1/2 and 1 against it.
CAUSAL_BAND_L2_SHARE = 0.5


def causal_band(device, seqlen_k: int, head_dim: int, group: int, elt: int, n_bh: int) -> int:
    """Batch x heads a band of the PERSISTENT CAUSAL tile order: as many as keep the band's
    K / V (2 * Nk * D * elt bytes per KV head; a GQA group of `group` query heads shares
    one) within CAUSAL_BAND_L2_SHARE of the L2; at least 1, at most n_bh."""
    l2 = _l2_bytes(device)
    per_head = 2 * seqlen_k * head_dim * elt / group
    return int(max(1, min(n_bh, (l2 * CAUSAL_BAND_L2_SHARE) // per_head)))


_L2: dict = {}


def _l2_bytes(device) -> int:
    index = device.index if device.index is not None else torch.cuda.current_device()
    if index not in _L2:
        _L2[index] = int(torch.cuda.get_device_properties(index).L2_cache_size)
    return _L2[index]


def fwd_into(q, k, v, out, lse, softmax_scale, causal: bool = False, persistent: bool = False,
             scheduled: bool = False, window=None, dropout_p: float = 0.0, rng=None,
             num_consumers: int = 2, early_q: bool = False, lean_mask: bool = False,
             split_empty: bool | None = None, own_tiles: bool = False, o_stage: bool = False) -> None:
    """The library's route (launchers.forward, where policy.gluon_fwd accepts the call):
    the whole forward (bottom-right causal when causal) into out (B, Nq, H, D) and lse
    (B, H, Nq), already allocated, at DEFAULT_CONFIG's tile. The kernel's descriptors are
    Gluon TensorDescriptors over q, k, v and out, which a launch plan rebinds to the next
    call's tensors since session 25 (launchers/plans.py; before, every call ran this host
    path: 250-520 us a call on the H200 machine, measured 2026-12-01 by
    bench/gpu/s25_route_probe.py, against 56-174 us for the replayed fwd_ws.py route).
    persistent: the PERSISTENT kernel on the SM count's CTAs
    (policy.GLUON_FWD_PERSISTENT says when). window: (left, right) for policy.gluon_fwd_window's
    sliding-window calls (the WINDOW kernel), else None. dropout_p, rng: the DROPOUT
    variant (policy.gluon_fwd_dropout's calls; rng the call's (seed, offset)). num_consumers:
    3 takes the NUM_CONSUMERS = 3 kernel at CONSUMERS3_CONFIG's tile where it applies (plain
    persistent, or causal one block a CTA; no window, no dropout, the head dim in the table;
    policy.gluon_fwd_consumers decides), anything else the 2-consumer kernel. early_q: the
    PERSISTENT kernel's EARLY_Q variant (policy.gluon_fwd_window_early_q says when; taken only
    where check_early_q allows it and out has packed rows, else the call runs as without).
    lean_mask: the WINDOW kernel's LEAN_MASK (policy.gluon_fwd_window_lean_mask says when;
    check_lean_mask's rule, a ValueError if the route asks for it elsewhere). own_tiles: the CAUSAL
    one-block kernel's OWN_TILES (policy.gluon_fwd_own_tiles says when; taken only where
    check_own_tiles allows it, else the call runs as without). o_stage: the PERSISTENT kernel's O_STAGE
    (policy.gluon_fwd_o_stage says when; taken only where check_o_stage allows it, else the call runs as without:
    bitwise the same outputs)."""
    d = q.shape[-1]
    if (num_consumers == 3 and bool(persistent) != bool(causal) and window is None and dropout_p == 0
            and d in CONSUMERS3_CONFIG):
        block_m, block_n, stages = CONSUMERS3_CONFIG[d]
    else:
        num_consumers = 2
        block_m, block_n, stages = DEFAULT_CONFIG[d]
    early_q = bool(early_q) and persistent and num_consumers == 2 and dropout_p == 0 \
        and out.stride(1) == out.shape[2] * d and out.stride(3) == 1 and d not in PLAIN_CAUSAL_ONLY
    check_lean_mask(lean_mask, window, dropout_p, num_consumers, d)
    # (D = 256: policy routes plain / causal calls only, PLAIN_CAUSAL_ONLY; split_empty None: SPLIT_EMPTY_DEFAULT)
    split_empty = (d in SPLIT_EMPTY_DEFAULT if split_empty is None else bool(split_empty)) and num_consumers == 2
    own_tiles = (bool(own_tiles) and causal and not persistent and num_consumers == 2 and window is None
                 and dropout_p == 0)
    o_stage = bool(o_stage) and persistent and num_consumers == 2 and block_n == block_m and not early_q \
        and not split_empty and dropout_p == 0
    _launch_into(q, k, v, out, lse, softmax_scale, block_m, block_n, stages, False, causal, persistent,
                 scheduled=scheduled and persistent and (causal or window is not None) and dropout_p == 0
                 and d not in PLAIN_CAUSAL_ONLY,
                 window=window, dropout_p=dropout_p, rng=rng if dropout_p > 0 else None, num_consumers=num_consumers,
                 **(dict(early_q=True) if early_q else {}), **(dict(lean_mask=True) if lean_mask else {}),
                 **(dict(split_empty=True) if split_empty else {}), **(dict(own_tiles=True) if own_tiles else {}),
                 **(dict(o_stage=True) if o_stage else {}))()


# The VARLEN kernel's plain (non-causal) calls dispatched longest sequence first too (a block's cost is its
# sequence's key count; session 49's A/B, bench/gpu/s49_varlen_ab.py: bench/NOTES.md "Session 49").
VARLEN_PLAIN_ORDER = True
# The VARLEN kernel's VARLEN_FAST: the peeled tile unmasked when it is whole (plain calls) and full blocks' O by TMA
# (session 49, the same A/B).
VARLEN_FAST = True
# The VARLEN kernel's VARLEN_TAIL (session 50), by kind: the second consumer of a block whose rows all lie past its
# sequence's end only releases the ring (kernels/fwd_gluon._fwd_consume_tail). Measured (H200, 2026-12-04, bf16,
# D = 128, H = 16, 16k tokens, forward alone, five rotated rounds; bench/gpu/s50_varlen_tail_ab.py, s50 call 3), on
# / off: causal 128..4096 1.031 (467 / 453 TFLOP/s), 128..512 1.040, 512..2048 1.029; plain 1.004, 1.000, 0.983.
# The pre-registered rule (median >= 1.00 at 128..4096 both kinds, no range below 0.99) failed on plain's
# 512..2048: plain stays off; causal, where all three ranges gained 3-4%, takes it (a split decided after the run).
VARLEN_TAIL = frozenset({"causal"})
# The VARLEN kernel PERSISTENT (session 50), by kind (plain only: the kernel has no persistent causal VARLEN): one CTA
# an SM walking the (slots, H) blocks, the next block's first K / V tile and Q loaded under this one's last tile and
# epilogue (EARLY_Q: O by masked register stores). Measured (H200, 2026-12-04, bf16, D = 128, H = 16, 16k tokens,
# forward alone, five rotated rounds; bench/gpu/s50_varlen_persistent_ab.py, s50 call 4), persistent / one block:
# 128..4096 0.857 (464 / 542 TFLOP/s), 128..512 1.000, 512..2048 0.983, 1024..8192 0.845; outputs bitwise equal.
# The static round-robin deal gives some CTAs several of the longest sequences' blocks (a block costs its
# sequence's key count: 1 to 64 tiles), where one block a CTA is dealt longest first by the hardware as CTAs
# retire. Not routed (empty); kept as a tested option for a dynamic deal.
VARLEN_PERSISTENT: frozenset = frozenset()
# The VARLEN kernel's VARLEN_HALF (session 51; plain only: KEY_BOUND): a block's last key tile, when it holds at most
# BLOCK_N / 2 of the sequence's keys, computed BLOCK_N / 2 keys wide (kernels/fwd_gluon._consume_last_half). Measured
# (H200, 2026-12-04, bf16, D = 128, H = 16, 16k tokens, forward alone, five rotated rounds; bench/gpu/
# s51_varlen_half_ab.py, s51 call 1), on / off: 128..4096 1.021 (551 / 540 TFLOP/s) and 1.023 (a second draw),
# 512..2048 1.015, 1024..8192 1.012; outputs bitwise equal (the half tile's other columns were exact zeros, summed
# last). Routed by the pre-registered rule on the ranges this kernel serves (128..512 and D = 64 are below
# policy.GLUON_FWD_VARLEN_MIN_N: both arms ran the same other kernel there, 0.989 / 1.000). D = 64 (routed from 250
# since s51 call 4; s51 call 7, S51_HALF_D64=1): 128..4096 1.027 and 1.011 (two draws), 128..512 1.031, 512..2048
# 1.023, 1024..8192 1.014, outputs bitwise: the same rule holds, kept for both head dims.
VARLEN_HALF = frozenset({"plain"})


def varlen_tables(varlen, block_m: int, causal: bool, n_slots: int, order: bool = True) -> torch.Tensor:
    """The VARLEN kernel's SCHED: int32 [cumulative query-block counts (B + 1), cu_seqlens_q (B + 1),
    cu_seqlens_k (B + 1)] and, with order, the n_slots slots' dispatch order, heaviest first
    (launchers/common._heaviest_first: fwd.py's for causal, by the sequence's keys for plain calls). Built on
    the device without a host sync and remembered on cu_seqlens_q with cu_seqlens_k's stamp
    (launchers/common._cached_map)."""
    cu_q, cu_k = varlen.cu_seqlens_q, varlen.cu_seqlens_k

    def make():
        cu_blocks = _cu_blocks(cu_q, block_m)
        parts = [cu_blocks, cu_q.to(torch.int32), cu_k.to(torch.int32)]
        if order:
            parts.append(_heaviest_first(varlen, cu_blocks, n_slots, block_m, causal))
        return torch.cat(parts).contiguous()
    return _cached_map(cu_q, ("gluon_varlen", block_m, causal, n_slots, order, _stamp(cu_k)), make)


def _rows_desc(x: torch.Tensor, rows: int):
    """A descriptor over x (total, heads, D) read as (total, heads * D) rows, with x itself as its base (so that a
    launch plan rebinds it to the next call's tensor: launchers/plans.py places a descriptor by its base). x has
    packed, 16-byte aligned rows (the route's rows_view_ok)."""
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor
    total, h, d = x.shape
    return TensorDescriptor(x, [total, h * d], [x.stride(0), 1], [rows, d], _box_layout(rows, d, x.dtype))


def fwd_varlen(q, k, v, varlen, softmax_scale, causal: bool = False, dropout_p: float = 0.0, rng=None,
               window=None):
    """The VARLEN kernel (kernels/fwd_gluon.py, session 49) over a packed batch: q (total_q, H, D), k, v (total_k,
    Hk, D); returns (out like q, lse (H, total_q) fp32). DEFAULT_CONFIG's tile, one query block of one sequence a
    CTA, grid (cdiv(total_q, BLOCK_M) + B, H) (an upper bound: spare CTAs return at once), blocks heaviest first
    across the batch (varlen_tables). The route (launchers.forward, where policy.gluon_fwd_varlen accepts the call)
    guarantees packed, 16-byte aligned rows (rows_view_ok of the (1, total, H, D) views), bf16 / fp16, D in {64,
    128}, total_q, total_k > 0, unit-stride cu_seqlens.
    The call replays a launch plan (launchers/plans.py) keyed on q, k, v and the SCHED table as inputs: the table
    holds everything the launch reads of cu_seqlens (its values never reach the host here), so unlike the other
    varlen launchers this one is replayable. Measured why (s49 calls 4-5): without it the route's host time (four
    descriptors, Triton's binder for ~40 arguments) passed the kernel's ~0.25 ms on the device machine.
    dropout_p > 0 (session 51; one block a CTA, VARLEN_HALF off): the kernel's DROPOUT with the call's rng state
    (an int64 (seed, offset) device tensor, an input of the plan) in the packed counter layout (rng_rows = total_q,
    rng_stride = max(max_seqlen_k, 1): launchers/forward.dropout_mask's for a packed batch).
    window (session 51): None, or a sliding window (win_left >= 0, 0) per sequence (the kernel's VARLEN WINDOW; not
    with causal or dropout): the effective window of the call (launchers.common._effective_window over max_seqlen),
    which the plan's key holds."""
    dropout = dropout_p > 0
    if dropout and rng is None:
        raise ValueError("rng: dropout_p > 0 needs the call's rng state (an int64 (seed, offset) tensor)")
    batch, n_slots, order, table = _varlen_launch_table(q, varlen, causal, window, dropout)
    inputs = (q, k, v, table, rng if dropout else None)
    kind = "window" if window is not None else ("causal" if causal else "plain")
    persistent = kind == "plain" and not dropout and "plain" in VARLEN_PERSISTENT
    tail = not persistent and kind in VARLEN_TAIL
    half = not persistent and kind == "plain" and not dropout and "plain" in VARLEN_HALF
    drop = (float(dropout_p), max(int(varlen.max_seqlen_k), 1)) if dropout else None
    win = None if window is None else (int(window[0]), 0)
    key = plans.plan_key("fwd_varlen_gluon", inputs, (float(softmax_scale), bool(causal), order, bool(VARLEN_FAST),
                                                      tail, persistent, half, drop, win))
    return plans.run(key, inputs, lambda: _fwd_varlen_body(q, k, v, table, batch, n_slots, softmax_scale, causal,
                                                           order, tail, persistent, half, drop, rng, window=win))


def _varlen_launch_table(q, varlen, causal: bool, window, dropout: bool):
    """fwd_varlen / fwd_varlen_paged's common start: the window's rule (None, or (win_left >= 0, 0) without causal
    or dropout: ValueError), then (batch, n_slots, order, SCHED table) of the call."""
    if window is not None and (causal or dropout or len(window) != 2 or window[0] < 0 or window[1] != 0):
        raise ValueError(f"window: expected (win_left >= 0, 0) without causal or dropout, got {window!r}")
    total_q, _, d = q.shape
    batch = varlen.cu_seqlens_q.numel() - 1
    block_m = DEFAULT_CONFIG[d][0]
    n_slots = -(-total_q // block_m) + batch
    order = bool(causal) or VARLEN_PLAIN_ORDER
    return batch, n_slots, order, varlen_tables(varlen, block_m, causal, n_slots, order)


def fwd_varlen_paged(q, k_cache, v_cache, block_table, varlen, softmax_scale, causal: bool = False, window=None):
    """The VARLEN kernel's VARLEN_PAGED variant (session 51): fwd_varlen with k, v in a paged cache (num_blocks,
    page, Hk, D) read in place through block_table (B, max_blocks) int32 (flash_attn_varlen_func(...,
    block_table=)); cu_seqlens_k holds the key lengths. K / V tiles by TMA from descriptors over the caches'
    (num_blocks * page, Hk * D) views, each tile's page looked up by the loader; the last tile's V rows past the
    sequence zeroed in shared memory (a page's rest may hold NaN). The route (launchers/forward_paged, where
    policy.gluon_fwd_paged accepts the call) guarantees what fwd_varlen's does for q, and contiguous, 16-byte
    aligned caches, page a multiple of BLOCK_N, block_table with unit column stride, no dropout. A launch plan keyed
    on q, the caches, the SCHED table and block_table as inputs (the table's values never reach the host). window:
    fwd_varlen's (a sliding window (left, 0), the plan's key holding it)."""
    batch, n_slots, order, table = _varlen_launch_table(q, varlen, causal, window, False)
    inputs = (q, k_cache, v_cache, table, block_table)
    kind = "window" if window is not None else ("causal" if causal else "plain")
    tail = kind in VARLEN_TAIL
    half = kind == "plain" and "plain" in VARLEN_HALF
    page = k_cache.shape[1]
    win = None if window is None else (int(window[0]), 0)
    key = plans.plan_key("fwd_varlen_paged_gluon", inputs, (float(softmax_scale), bool(causal), order,
                                                            bool(VARLEN_FAST), tail, half, page, win))
    return plans.run(key, inputs, lambda: _fwd_varlen_body(q, k_cache, v_cache, table, batch, n_slots, softmax_scale,
                                                           causal, order, tail, False, half,
                                                           paged=(block_table, page), window=win))


def _fwd_varlen_body(q, k, v, table, batch: int, n_slots: int, softmax_scale, causal: bool, order: bool,
                     tail: bool = False, persistent: bool = False, half: bool = False, drop=None, rng=None,
                     paged=None, window=None):
    total_q, h, d = q.shape
    block_m, block_n, stages = DEFAULT_CONFIG[d]
    out = memory.empty(q.shape, q.dtype, q.device)
    lse = memory.empty((h, total_q), torch.float32, q.device)
    wg_rows = block_m // 2
    q_desc, o_desc = _rows_desc(q, wg_rows), _rows_desc(out, wg_rows)
    if paged is not None:
        # (VARLEN_PAGED: k, v are the caches (num_blocks, page, Hk, D), read as (num_blocks * page, Hk * D) rows)
        from triton.experimental.gluon.nvidia.hopper import TensorDescriptor
        nb, page, hk = k.shape[0], k.shape[1], k.shape[2]
        total_k = nb * page
        k_desc, v_desc = (TensorDescriptor(x, [total_k, hk * d], [hk * d, 1], [block_n, d],
                                           _box_layout(block_n, d, x.dtype)) for x in (k, v))
    else:
        total_k, hk = k.shape[0], k.shape[1]
        k_desc, v_desc = _rows_desc(k, block_n), _rows_desc(v, block_n)
    if persistent:
        # (one CTA an SM over the (slots, H) blocks; EARLY_Q: the PERSISTENT kernel's Q-early order)
        grid = (min(sm_count(q.device), n_slots * h),)
        extra = dict(PERSISTENT=True, EARLY_Q=True)
    else:
        grid = (n_slots, h)
        extra = dict(VARLEN_TAIL=True) if tail else {}
        if half:
            extra["VARLEN_HALF"] = True
    if drop is not None:
        extra["DROPOUT"] = True
        drop_args = (rng, drop[0], total_q, drop[1])       # RNG, dropout_p, rng_rows, rng_stride
    else:
        drop_args = (lse, 0.0, 0, 0)
    if paged is not None:
        extra.update(BLOCK_TABLE=paged[0], bt_stride=paged[0].stride(0), PAGE_SIZE=paged[1])
    if window is not None:
        extra["WINDOW"] = True
        win_args = window                                  # win_left, win_right (0)
    else:
        win_args = (0, 0)
    with torch.cuda.device(out.device):
        plans.launch(attn_fwd_gluon_kernel, grid,
                     q_desc, k_desc, v_desc, o_desc, lse, total_q, total_k, h, h // hk,
                     float(softmax_scale) * LOG2E, batch, 1, table, *win_args, *drop_args, out,
                     HEAD_DIM=d, BLOCK_M=block_m, BLOCK_N=block_n, NUM_STAGES=stages,
                     NEG_SCALE=softmax_scale <= 0, PINGPONG=False, CAUSAL=bool(causal), VARLEN=True,
                     VARLEN_ORDER=order, VARLEN_FAST=bool(VARLEN_FAST), **extra, num_warps=4)
    return out, lse


def check_consumers(num_consumers, d, persistent, causal, window, dropout_p, scheduled, pingpong) -> None:
    """num_consumers: 2, or 3 for the plain PERSISTENT forward or the CAUSAL forward one block a
    CTA (persistent=False), without window / dropout / scheduled / pingpong, at a head dim of
    CONSUMERS3_CONFIG; ValueError naming it otherwise. Needs no GPU."""
    if type(num_consumers) is not int or num_consumers not in (2, 3):
        raise ValueError(f"num_consumers: expected 2 or 3, got {num_consumers!r}")
    if num_consumers == 2:
        return
    # (the 3-consumer kernel has no persistent causal and no one-block plain variant: persistent
    # causal lost to one block a CTA in session 24, and the plain forward is routed persistent)
    if bool(persistent) == bool(causal) or window is not None or dropout_p != 0 or scheduled or pingpong:
        raise ValueError("num_consumers=3: the plain persistent forward or the causal one-block forward only "
                         "(persistent=True without causal, or causal=True without persistent; no window, dropout, "
                         "scheduled or pingpong)")
    if d not in CONSUMERS3_CONFIG:
        raise ValueError(f"num_consumers=3: head dim {d} not supported (one of {sorted(CONSUMERS3_CONFIG)})")


def check_head_dim(d, window, dropout_p, scheduled, early_q, lean_mask, num_consumers) -> None:
    """Head dims of fwd_gluon.PLAIN_CAUSAL_ONLY (D = 256, a session-31 helper): the plain or causal
    forward only, one block a CTA or persistent, 2 consumers; ValueError naming what the kernel
    does not have there (its static_assert: no WINDOW, DROPOUT, EARLY_Q, LEAN_MASK, 3 consumers;
    SCHEDULED not compiled offline). Needs no GPU."""
    if d not in PLAIN_CAUSAL_ONLY:
        return
    for name, bad in (("window", window is not None), ("dropout_p", dropout_p != 0), ("scheduled", bool(scheduled)),
                      ("early_q", early_q is True), ("lean_mask", lean_mask is True),
                      ("num_consumers", num_consumers != 2)):
        if bad:
            raise ValueError(f"{name}: not supported at head dim {d} (the plain or causal forward, one block a CTA "
                             "or persistent, 2 consumers)")


def check_own_tiles(own_tiles, causal, window, persistent, num_consumers, pingpong, dropout_p) -> None:
    """own_tiles (the kernel's OWN_TILES, session 38): a bool, True only for the causal forward one
    block a CTA (causal=True, no window, persistent=False) with 2 consumers, without pingpong or
    dropout; ValueError naming it otherwise. Needs no GPU."""
    if not isinstance(own_tiles, bool):
        raise ValueError(f"own_tiles: expected a bool, got {own_tiles!r}")
    if own_tiles and not (causal and window is None and not persistent and num_consumers == 2 and not pingpong
                          and dropout_p == 0):
        raise ValueError("own_tiles=True: the causal forward one block a CTA only (causal=True without window, "
                         "persistent, pingpong or dropout; 2 consumers)")


def check_split_empty(split_empty, num_consumers) -> None:
    """split_empty (the kernel's SPLIT_EMPTY): None (the default for the head dim, SPLIT_EMPTY_DEFAULT)
    or a bool, True only with 2 consumers; ValueError naming it otherwise. Needs no GPU."""
    if split_empty is not None and not isinstance(split_empty, bool):
        raise ValueError(f"split_empty: expected None or a bool, got {split_empty!r}")
    if split_empty and num_consumers != 2:
        raise ValueError("split_empty=True: the 2-consumer kernel only (num_consumers=3 releases K and V together)")


def check_early_q(early_q, persistent, num_consumers, dropout_p, pingpong) -> None:
    """early_q (the kernel's EARLY_Q, session 29 helper): a bool, True only with persistent=True,
    2 consumers, no dropout and no pingpong; ValueError naming it otherwise. Needs no GPU."""
    if not isinstance(early_q, bool):
        raise ValueError(f"early_q: expected a bool, got {early_q!r}")
    if early_q and not (persistent and num_consumers == 2 and dropout_p == 0 and not pingpong):
        raise ValueError("early_q=True: the persistent 2-consumer forward only (persistent=True; no dropout, "
                         "num_consumers=3 or pingpong)")


def check_o_stage(o_stage, persistent, num_consumers, early_q, split_empty, d, dropout_p=0.0) -> None:
    """o_stage (the kernel's O_STAGE, session 42): a bool, True only with persistent=True, 2 consumers, a head dim
    whose tile has BLOCK_N == BLOCK_M (DEFAULT_CONFIG: D = 64 / 128; O goes out through the last K stage, which
    must hold the block's BLOCK_M rows), without early_q (which stores O from registers instead), split_empty or
    dropout (never measured with it); ValueError naming it otherwise. Needs no GPU."""
    if not isinstance(o_stage, bool):
        raise ValueError(f"o_stage: expected a bool, got {o_stage!r}")
    if not o_stage:
        return
    if not (persistent and num_consumers == 2 and not early_q and not split_empty and not dropout_p):
        raise ValueError("o_stage=True: the persistent 2-consumer forward without dropout only (persistent=True; "
                         "not with num_consumers=3, early_q=True, split_empty=True or dropout_p > 0)")
    if d is not None and (d not in DEFAULT_CONFIG or DEFAULT_CONFIG[d][0] != DEFAULT_CONFIG[d][1]):
        raise ValueError(f"o_stage=True: head dim {d} has no square tile (BLOCK_N == BLOCK_M) to carry O; "
                         f"one of {sorted(x for x, c in DEFAULT_CONFIG.items() if c[0] == c[1])}")


def check_lean_mask(lean_mask, window, dropout_p, num_consumers, d) -> None:
    """lean_mask (the kernel's LEAN_MASK, a session-30 helper): a bool, True only with a window
    (window=(left, right)), no dropout, 2 consumers and head dim 128; ValueError naming it
    otherwise. (A window that window_args turns into the plain or the causal kernel runs
    without it: those have no WINDOW mask.) Needs no GPU."""
    if not isinstance(lean_mask, bool):
        raise ValueError(f"lean_mask: expected a bool, got {lean_mask!r}")
    if lean_mask and not (window is not None and dropout_p == 0 and num_consumers == 2 and d == 128):
        raise ValueError("lean_mask=True: the 2-consumer sliding-window forward at head dim 128 only "
                         "(window=(left, right); no dropout, num_consumers=3 or another head dim)")


def prepare(q, k, v, softmax_scale, *, block_n: int | None = None, num_stages: int | None = None,
            pingpong: bool = False, causal: bool = False, persistent: bool = False,
            num_programs: int | None = None, band: int | None = None, scheduled: bool = False, window=None,
            dropout_p: float = 0.0, rng=None, num_consumers: int = 2, early_q: bool = False,
            lean_mask: bool = False, split_empty: bool | None = None, own_tiles: bool = False,
            o_stage: bool = False):
    """Checks the call, allocates o and lse, makes the descriptors; returns launch(),
    which runs the kernel (again, into the same o and lse) and returns (o, lse). For
    timing the kernel without the host work (bench/gpu/s23_gluon_fwd_ab.py).
    persistent: the PERSISTENT kernel on min(num_programs, tiles) CTAs (num_programs:
    default the SM count; a positive int, e.g. small in tests so that every CTA loops);
    scheduled: (persistent causal) the host's longest-first deal of the blocks
    (launchers/schedule.py; the same result bitwise, another order);
    band: PERSISTENT CAUSAL's batch x heads a band (default causal_band(); any positive
    int gives the same result, only the order of the blocks changes). window: (left, right)
    sliding window (window_args; ValueError before any launch when malformed). dropout_p,
    rng: dropout with the library's mask (check_dropout: p in [0, 1), rng the int64 (seed,
    offset) tensor on q's device when p > 0; e.g. flashtriton's own rng state, or
    tests/helpers.dropout_rng). num_consumers: 2 (default) or 3, the NUM_CONSUMERS = 3 kernel
    (check_consumers: plain persistent or causal one block a CTA, a head dim of
    CONSUMERS3_CONFIG, Nq a multiple of 64). early_q: the PERSISTENT kernel's EARLY_Q variant
    (check_early_q; the next block's Q loads under this block's last tile, O leaves by global
    stores: bitwise the same outputs). lean_mask: the WINDOW kernel's LEAN_MASK (check_lean_mask;
    the masked tiles with one compare a score: bitwise the same outputs). split_empty: the
    kernel's SPLIT_EMPTY (None: on at SPLIT_EMPTY_DEFAULT's head dims, D = 256; check_split_empty;
    bitwise the same outputs). own_tiles: the CAUSAL one-block kernel's OWN_TILES (check_own_tiles; each
    consumer computes only its rows' key tiles: bitwise the same outputs). o_stage: the PERSISTENT kernel's
    O_STAGE (check_o_stage; Q freed before the last P V, O out through the last K stage: bitwise the same
    outputs). Head dim 256: plain / causal only (check_head_dim)."""
    d = q.shape[-1] if isinstance(q, torch.Tensor) and q.dim() == 4 else None
    check_split_empty(split_empty, num_consumers)
    check_own_tiles(own_tiles, causal, window, persistent, num_consumers, pingpong, dropout_p)
    check_early_q(early_q, persistent, num_consumers, dropout_p, pingpong)
    check_o_stage(o_stage, persistent, num_consumers, early_q, split_empty, d, dropout_p)
    check_lean_mask(lean_mask, window, dropout_p, num_consumers, d)
    check_consumers(num_consumers, d, persistent, causal, window, dropout_p, scheduled, pingpong)
    table = CONSUMERS3_CONFIG if num_consumers == 3 else DEFAULT_CONFIG
    block_m, bn, stages = table.get(d, (128, 128, 2))
    block_n = block_n or bn
    num_stages = num_stages or stages
    # 3 consumers: Nq a multiple of the 64 rows of one consumer (launch_geometry)
    check_inputs(q, k, v, softmax_scale, block_m // 3 if num_consumers == 3 else block_m, block_n)
    w_causal, w_window, _, _ = window_args(window, causal, q.shape[1], k.shape[1])   # ValueError when malformed
    # (D = 256: a window is refused unless window_args made it the plain or the causal mask)
    check_head_dim(d, window if w_window else None, dropout_p, scheduled, early_q, lean_mask, num_consumers)
    dropout_p = check_dropout(dropout_p, rng, q.device)
    if persistent and pingpong:
        raise ValueError("persistent=True does not support pingpong=True")
    if num_programs is not None and (isinstance(num_programs, bool) or not isinstance(num_programs, int)
                                     or num_programs < 1):
        raise ValueError(f"num_programs: expected a positive int or None, got {num_programs!r}")
    if band is not None and (isinstance(band, bool) or not isinstance(band, int) or band < 1):
        raise ValueError(f"band: expected a positive int or None, got {band!r}")
    if not persistent and (num_programs is not None or band is not None):
        raise ValueError("num_programs, band: only with persistent=True")
    if band is not None and not w_causal:      # (review, session 24) the kernel's causal, after window_args
        raise ValueError("band: only with causal=True (the causal tile order)")
    if scheduled and not (persistent and (causal or window is not None)):
        raise ValueError("scheduled=True needs persistent=True and causal=True or a window (a deal of causal or "
                         "windowed blocks)")
    if scheduled and not (w_window or w_causal):
        raise ValueError(f"scheduled=True does not support window={window!r}: a deal of causal or windowed "
                         "blocks (the plain kernel's blocks cost the same: its round robin)")
    if q.device.type != "cuda":
        raise ValueError(f"q: on {q.device}; attention_fwd_gluon needs a CUDA (Hopper) device")
    cap = torch.cuda.get_device_capability(q.device)
    if cap[0] != 9:
        raise ValueError(f"attention_fwd_gluon needs compute capability 9.x (Hopper), {q.device} has {cap}")
    b, nq, h, d = q.shape
    o = memory.empty((b, nq, h, d), q.dtype, q.device)             # NaN under memory.poison_outputs()
    lse = memory.empty((b, h, nq), torch.float32, q.device)
    split_empty = d in SPLIT_EMPTY_DEFAULT if split_empty is None else split_empty
    return _launch_into(q, k, v, o, lse, softmax_scale, block_m, block_n, num_stages, pingpong, causal,
                        persistent, num_programs, band, scheduled, window, dropout_p, rng, num_consumers, early_q,
                        lean_mask, split_empty and num_consumers == 2, own_tiles, o_stage=o_stage)


def attention_fwd_gluon(q, k, v, softmax_scale, *, block_n: int | None = None, num_stages: int | None = None,
                        pingpong: bool = False, causal: bool = False, persistent: bool = False,
                        num_programs: int | None = None, band: int | None = None, scheduled: bool = False,
                        window=None, dropout_p: float = 0.0, rng=None, num_consumers: int = 2,
                        early_q: bool = False, lean_mask: bool = False, split_empty: bool | None = None,
                        own_tiles: bool = False, o_stage: bool = False):
    """Attention forward by attn_fwd_gluon_kernel, non-causal or (causal=True) with the
    library's bottom-right causal mask, or (window=(left, right)) with a sliding window
    (flash-attn's window_size, -1 unbounded; window_args). q (B, Nq, H, D), k / v
    (B, Nk, Hk, D), fp16 or bf16, D in {64, 128, 256} (256: plain / causal only), Nq % 128 == 0,
    Nk % block_n == 0 (64 at D = 256)
    (else ValueError, before any launch). Returns (o (B, Nq, H, D) contiguous, lse
    (B, H, Nq) fp32, natural log). block_n / num_stages / pingpong override
    DEFAULT_CONFIG (A/B runs); persistent / num_programs / band / scheduled pick the PERSISTENT kernel
    (prepare); dropout_p / rng: dropout with the library's mask (prepare); num_consumers=3 the
    three-consumer kernel (plain persistent or causal one-block, D = 64, Nq % 64 == 0; prepare). Needs a Hopper
    GPU (sm_90)."""
    return prepare(q, k, v, softmax_scale, block_n=block_n, num_stages=num_stages, pingpong=pingpong,
                   causal=causal, persistent=persistent, num_programs=num_programs, band=band,
                   scheduled=scheduled, window=window, dropout_p=dropout_p, rng=rng, num_consumers=num_consumers,
                   early_q=early_q, lean_mask=lean_mask, split_empty=split_empty, own_tiles=own_tiles,
                   o_stage=o_stage)()
