"""Host-made deals of query blocks to the CTAs of a persistent forward (kernels/fwd_gluon.py,
PERSISTENT with SCHEDULED).

Why (session 24, H200, 2026-12-01): the persistent Gluon forward deals its n_m x (B * H)
blocks round robin (CTA pid takes blocks pid, pid + P, ...). Non-causal blocks cost the
same, and that deal won +2-20% over one CTA a block. Causal blocks cost 1 .. n_m key tiles,
and the same deal lost 7-13% at 16k even in bands of heads that share the L2: every CTA
gets ~15 blocks of unequal total length, where one CTA a block gets the hardware's
dynamic deal (the next block to the first free SM). With every block's cost known before
the launch (its key-tile count), the host can deal longest-first to the least-loaded CTA
(LPT: within 4/3 of the optimum makespan, in practice within a block of it), and the
kernel reads its list.

Layout of a schedule: int32, (P + 1 + n_blocks,): entries [0, P] are each CTA's first
position in the block list (CSR offsets, the last = n_blocks), then the block list, each
block as pid_bh * n_m + pid_m, every block exactly once. Order inside a CTA's list: the
order dealt, band by band (bands of heads whose K / V fit the L2 share, as the banded
round robin), longest first inside a band: the CTAs running together read one band.
"""
from __future__ import annotations

import heapq

import torch

# A block's fixed cost in key tiles: the Q load the consumers wait for, the O store and
# the pipeline's fill (an estimate, 2026-12-01; the A/B's job to check the deal, not this).
BLOCK_OVERHEAD_TILES = 1.5


def causal_tiles(pid_m: int, seqlen_q: int, seqlen_k: int, block_m: int, block_n: int) -> int:
    """Key tiles a causal (bottom-right) block loads: kernels/fwd_gluon.py _tile_coords'
    n_load (at least 1: a block whose rows see no key still loads and masks tile 0)."""
    diag = pid_m * block_m + seqlen_k - seqlen_q
    reach = max(diag + block_m, 0)
    return min(max(-(-reach // block_n), 1), seqlen_k // block_n)


def window_tiles(pid_m: int, seqlen_q: int, seqlen_k: int, win_left: int, win_right: int, block_m: int,
                 block_n: int) -> int:
    """Key tiles a sliding-window block loads: kernels/fwd_gluon.py _tile_coords' WINDOW n_load (win_left /
    win_right as the kernel gets them: window_args' non-negative sides; at least 1)."""
    n_tiles = seqlen_k // block_n
    diag = pid_m * block_m + seqlen_k - seqlen_q
    lo, hi = diag - win_left, diag + win_right
    t_lo = min(max(lo, 0) // block_n, n_tiles - 1)
    t_hi = min(-(-max(hi + block_m, 0) // block_n), n_tiles)
    return max(t_hi - t_lo, 1)


def lpt_deal(costs_m: list, n_bh: int, n_prog: int, band: int) -> list:
    """Each CTA's list of blocks (pid_bh * n_m + pid_m), dealt longest first to the least
    loaded CTA (ties: the lower CTA), band by band of `band` batch x heads. costs_m[m]: the
    cost of query block m (the same for every batch x head)."""
    n_m = len(costs_m)
    order_m = sorted(range(n_m), key=lambda m: -costs_m[m])          # longest first (stable)
    heap = [(0.0, p) for p in range(n_prog)]
    lists: list = [[] for _ in range(n_prog)]
    for first in range(0, n_bh, band):
        heads = range(first, min(first + band, n_bh))
        for m in order_m:
            for bh in heads:
                load, p = heapq.heappop(heap)
                lists[p].append(bh * n_m + m)
                heapq.heappush(heap, (load + costs_m[m], p))
    return lists


def pack(lists: list) -> torch.Tensor:
    """The kernel's int32 layout (module docstring), on the CPU."""
    offsets = [0]
    for lst in lists:
        offsets.append(offsets[-1] + len(lst))
    flat = [b for lst in lists for b in lst]
    return torch.tensor(offsets + flat, dtype=torch.int32)


_CACHE: dict = {}
_CACHE_MAX = 64


def causal_schedule(device, seqlen_q: int, seqlen_k: int, n_bh: int, n_prog: int, band: int,
                    block_m: int, block_n: int) -> torch.Tensor:
    """The SCHEDULED causal deal on `device`, made once per shape and kept (a few KB to a
    few hundred KB: one int32 per block). The first call of a shape copies it to the device:
    not capturable in a CUDA graph (forward_gluon._launch_into takes the kernel's banded deal instead when a
    capture meets a shape not yet here: `cached`)."""
    key = _key("causal", device, seqlen_q, seqlen_k, n_bh, n_prog, band, block_m, block_n)
    sched = _CACHE.get(key)
    if sched is None:
        if len(_CACHE) >= _CACHE_MAX:       # a few shapes in a run; never grows without bound
            _CACHE.clear()
        n_m = seqlen_q // block_m
        costs = [causal_tiles(m, seqlen_q, seqlen_k, block_m, block_n) + BLOCK_OVERHEAD_TILES for m in range(n_m)]
        sched = pack(lpt_deal(costs, n_bh, n_prog, band)).to(device)
        _CACHE[key] = sched
    return sched


def window_schedule(device, seqlen_q: int, seqlen_k: int, n_bh: int, n_prog: int, win_left: int, win_right: int,
                    block_m: int, block_n: int) -> torch.Tensor:
    """The SCHEDULED deal of a sliding-window forward (written offline in session 42, routed in session 43 with
    O_STAGE: +5% at 4k / 16k, bench/gpu/s43_window_sched_ab.py): longest first to the least-loaded CTA, all batch x heads in one band (a window's K / V working set is a few
    tiles a head: the L2 holds every head's). Same layout and cache as causal_schedule."""
    key = _key("window", device, seqlen_q, seqlen_k, n_bh, n_prog, win_left, win_right, block_m, block_n)
    sched = _CACHE.get(key)
    if sched is None:
        if len(_CACHE) >= _CACHE_MAX:
            _CACHE.clear()
        n_m = seqlen_q // block_m
        costs = [window_tiles(m, seqlen_q, seqlen_k, win_left, win_right, block_m, block_n) + BLOCK_OVERHEAD_TILES
                 for m in range(n_m)]
        sched = pack(lpt_deal(costs, n_bh, n_prog, n_bh)).to(device)
        _CACHE[key] = sched
    return sched


def window_cached(device, seqlen_q: int, seqlen_k: int, n_bh: int, n_prog: int, win_left: int, win_right: int,
                  block_m: int, block_n: int) -> bool:
    """Whether window_schedule has this shape's deal on `device` already (cached's rule)."""
    return _key("window", device, seqlen_q, seqlen_k, n_bh, n_prog, win_left, win_right, block_m, block_n) in _CACHE


def cached(device, seqlen_q: int, seqlen_k: int, n_bh: int, n_prog: int, band: int, block_m: int,
           block_n: int) -> bool:
    """Whether causal_schedule has this shape's deal on `device` already (then a call needs no copy to the device,
    and may run inside a CUDA graph capture)."""
    return _key("causal", device, seqlen_q, seqlen_k, n_bh, n_prog, band, block_m, block_n) in _CACHE


def _key(kind: str, device, *shape) -> tuple:
    """A deal's cache key: its kind ("causal" / "window"), the device, the shape arguments and the cost model's
    block overhead."""
    return (kind, str(device), *shape, BLOCK_OVERHEAD_TILES)


def makespan(lists: list, costs_m: list, n_m: int) -> float:
    """The largest CTA load of a deal (for tests and the A/B's printout)."""
    return max((sum(costs_m[b % n_m] for b in lst) for lst in lists), default=0.0)
