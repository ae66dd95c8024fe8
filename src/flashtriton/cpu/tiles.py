"""Tile bookkeeping shared by the forward and backward passes: which key tiles a
block of query rows can see (causal / sliding-window skipping), the visibility mask
of a partially visible tile, and the ALiBi bias of a tile.

Coordinates are those of one sequence: query i in [0, n_q), key j in [0, n_k), and
query i sees key j when

    i + off - left <= j <= i + off + right,   off = n_k - n_q   (bottom-right aligned)

with a negative bound meaning unbounded (causal is right = 0), as in
flashtriton.reference. Scores are kept in log2 units (scale * log2(e) folded into q),
so the ALiBi bias is multiplied by log2(e) too.
"""
from __future__ import annotations

import functools
import math
from typing import Iterator, NamedTuple

import torch

LOG2E = 1.4426950408889634


class Band(NamedTuple):
    """The visibility band of one sequence."""
    n_q: int
    n_k: int
    left: int   # -1: unbounded
    right: int  # -1: unbounded

    @property
    def off(self) -> int:
        return self.n_k - self.n_q

    def key_range(self, i0: int, i1: int) -> tuple[int, int]:
        """[j_lo, j_hi): the keys that at least one query of rows [i0, i1) sees
        (empty when j_lo >= j_hi)."""
        j_lo = 0 if self.left < 0 else max(0, i0 + self.off - self.left)
        j_hi = self.n_k if self.right < 0 else min(self.n_k, i1 - 1 + self.off + self.right + 1)
        return j_lo, j_hi

    def query_range(self, j0: int, j1: int) -> tuple[int, int]:
        """[i_lo, i_hi): the queries that see at least one key of [j0, j1)."""
        i_lo = 0 if self.right < 0 else max(0, j0 - self.off - self.right)
        i_hi = self.n_q if self.left < 0 else min(self.n_q, j1 - 1 - self.off + self.left + 1)
        return i_lo, i_hi

    def full_keys(self, i0: int, i1: int, j0: int, j1: int) -> tuple[int, int]:
        """[f0, f1) within [j0, j1): the keys that every query of [i0, i1) sees
        (empty when f0 >= f1)."""
        f0 = j0 if self.left < 0 else max(j0, i1 - 1 + self.off - self.left)
        f1 = j1 if self.right < 0 else min(j1, i0 + self.off + self.right + 1)
        return f0, f1

    def full(self, i0: int, i1: int, j0: int, j1: int) -> bool:
        """True when every query of [i0, i1) sees every key of [j0, j1): no mask needed."""
        ok_left = self.left < 0 or j0 >= i1 - 1 + self.off - self.left
        ok_right = self.right < 0 or j1 - 1 <= i0 + self.off + self.right
        return ok_left and ok_right

    def steps(self, i0: int, i1: int, j0: int, j1: int, sub: int,
              diag_sub: int = 0) -> list[tuple[int, int, int, int]]:
        """The (a0, a1, k0, k1) pieces of rows [i0, i1) x keys [j0, j1) worth computing.

        One piece (the tile, masked where needed), unless the band is a sliding window
        narrower than the block: then most of the tile is invisible, so the keys every
        row sees form one piece with all the rows and the keys seen by some rows only
        are taken in row sub-blocks of `sub` rows, each over the keys it can see. The
        causal diagonal (or a one-sided window edge) is left whole: that wastes ~half of
        one rows x rows square per block, but measured faster on two threads than
        sub-blocks, whose small products parallelise badly (bench/NOTES.md).
        """
        narrow = self.left >= 0 and self.right >= 0 and self.left + self.right + 1 < i1 - i0
        if not narrow and diag_sub and not self.full(i0, i1, j0, j1):
            narrow, sub = True, diag_sub   # the diagonal (a window edge) in row sub-blocks
        if not narrow or i1 - i0 <= sub:
            return [(i0, i1, j0, j1)]
        # [f0, f1): keys every row sees, shrunk to multiples of 32 (aligned matmul widths)
        f0 = j0 if self.left < 0 else max(j0, min(j1, -(-(i1 - 1 + self.off - self.left) // 32) * 32))
        f1 = j1 if self.right < 0 else min(j1, max(j0, (i0 + self.off + self.right + 1) // 32 * 32))
        if f0 >= f1:  # no key is seen by every row
            f0 = f1 = j0
        if f0 == j0 and f1 == j1:
            return [(i0, i1, j0, j1)]
        out = [(i0, i1, f0, f1)] if f0 < f1 else []
        for lo, hi in ((j0, f0), (f1, j1)):  # the ragged key ranges left and right of it
            if lo >= hi:
                continue
            for a0 in range(i0, i1, sub):
                a1 = min(i1, a0 + sub)
                k0, k1 = self.key_range(a0, a1)
                k0, k1 = max(k0, lo), min(k1, hi)
                if k0 < k1:
                    out.append((a0, a1, k0, k1))
        return out


def tiles(lo: int, hi: int, size: int) -> Iterator[tuple[int, int, int]]:
    """(tile index, start, end) of the `size`-aligned tiles covering [lo, hi).
    Alignment to multiples of `size` lets per-head tile caches (V^T, K^T blocks) be
    built once and shared by every row block."""
    if lo >= hi:
        return
    for t in range(lo // size, (hi - 1) // size + 1):
        yield t, max(lo, t * size), min(hi, (t + 1) * size)


@functools.lru_cache(maxsize=16)  # <= 16 masks of <= FWD_ROWS x FWD_KEYS bytes
def hidden_mask(rows: int, cols: int, diag: int, left: int, right: int) -> torch.Tensor:
    """(rows, 1, cols) bool: True where query row r cannot see key column c, for a
    tile whose row 0 sits at diagonal offset diag = i0 + off - j0. It depends only
    on these numbers, which repeat from block to block and head to head: cached
    (and never written to)."""
    i = torch.arange(diag, diag + rows)[:, None, None]
    j = torch.arange(cols)[None, None, :]
    mask = torch.ones(rows, 1, cols, dtype=torch.bool)
    if left >= 0:
        mask &= j >= i - left
    if right >= 0:
        mask &= j <= i + right
    return ~mask


@functools.lru_cache(maxsize=8)  # <= 8 bounds of <= FWD_ROWS x FWD_KEYS floats (2 MiB each)
def visible_bound(rows: int, cols: int, diag: int, left: int, right: int) -> torch.Tensor:
    """(rows, 1, cols) float32: +inf where query row r sees key column c, -inf where
    it cannot (hidden_mask's layout). min(s, bound) masks a score tile in one
    vectorised pass: 11 us for a 512 x 512 tile against 74 us for masked_fill_ with
    the bool mask (bench/NOTES.md). Cached like hidden_mask, never written to."""
    hidden = hidden_mask(rows, cols, diag, left, right)
    return torch.full(hidden.shape, math.inf).masked_fill_(hidden, -math.inf)


def mask_(s3: torch.Tensor, band: Band, i0: int, i1: int, j0: int, j1: int, fast: bool = False,
          hidden: float = -math.inf) -> None:
    """Sets the scores (i1 - i0, G, j1 - j0) that rows [i0, i1) cannot see to `hidden`
    (-inf; +inf for unscaled scores that a negative scale multiplies later), touching
    only the columns that some row cannot see.

    fast: min(s, +-inf bound) instead of masked_fill_. Identical for every score but
    a hidden NaN, which stays NaN: callers that take it must detect a NaN result and
    recompute with fast=False (the forward does; a hidden NaN then costs a rerun)."""
    f0, f1 = band.full_keys(i0, i1, j0, j1)
    args = (i1 - i0, j1 - j0, i0 + band.off - j0, band.left, band.right)
    if fast:
        assert hidden == -math.inf, "mask_: fast takes -inf hidden scores only"
        bound = visible_bound(*args)

        def apply(part, sel):
            torch.minimum(part, bound[sel], out=part)
    else:
        hidden_at = hidden_mask(*args)

        def apply(part, sel):
            part.masked_fill_(hidden_at[sel], hidden)
    every = slice(None)
    if f0 >= f1:
        apply(s3, (every, every, every))
        return
    if f0 > j0:
        apply(s3[:, :, :f0 - j0], (every, every, slice(None, f0 - j0)))
    if f1 < j1:
        apply(s3[:, :, f1 - j0:], (every, every, slice(f1 - j0, None)))


def alibi_distance(band: Band, i0: int, i1: int, j0: int, j1: int) -> torch.Tensor:
    """(i1 - i0, 1, j1 - j0) float32: |max(i + off, 0) - j|, the ALiBi distance (the bias is
    -slope * distance) from the row's anchor (flashtriton/alibi_anchor.py: a row before every
    key is measured from key 0, a constant per row that softmax ignores)."""
    i = torch.arange(i0 + band.off, i1 + band.off, dtype=torch.float32).clamp_(min=0)[:, None, None]
    j = torch.arange(j0, j1, dtype=torch.float32)[None, None, :]
    return (i - j).abs_()


def alibi_slopes_log2(alibi: torch.Tensor | None, seq: int, h0: int, group: int) -> torch.Tensor | None:
    """(1, G, 1) float32: -slope * log2(e) of the G query heads h0 .. h0 + G - 1 of
    sequence `seq`; slopes are (H,) or (B, H)."""
    if alibi is None:
        return None
    s = alibi if alibi.dim() == 1 else alibi[seq]
    return (s[h0:h0 + group].to(torch.float32) * -LOG2E).view(1, group, 1)
