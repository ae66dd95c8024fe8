"""Dropout of the CPU backend: a counter-based keep mask, a pure function of
(rng state, element position), so that any tile of it can be drawn on its own.

The forward pass draws tiles (rows = queries), the backward pass draws transposed
tiles (rows = keys) with other tile sizes, and dropout_mask() draws the whole
(B, H, Mq, Mk) mask; all three agree bit for bit because each element depends only
on its counter

    x = ((b * H + h) * Mq + i) * Mk + j        (Mq, Mk: the mask's padded dims)

and on two 32-bit keys derived from rng = [seed, offset]. The element is kept when
the top 24 bits of hash(x) are >= round(p * 2^24), so P(keep) = 1 - p to 2^-24.

The hash is an integer finaliser (xor-shift / multiply rounds, constant 0x45d9f3b)
applied twice, first to the low 32 bits of x mixed with key 0, then to that result
plus the high bits mixed with key 1. Everything is computed on int64 tensors holding
values < 2^32, and every product is < 2^59: no signed overflow, no reliance on
wrap-around. Not cryptographic; good enough that neighbouring rows, heads and
batches are independent (tests/test_cpu_features.py measures it).
"""
from __future__ import annotations

import torch

_M32 = 0xFFFFFFFF
_MUL = 0x45D9F3B  # < 2^27: (x < 2^32) * _MUL < 2^59 fits int64


def _mix_int(x: int) -> int:
    """The finaliser on a Python int in [0, 2^32)."""
    x ^= x >> 16
    x = (x * _MUL) & _M32
    x ^= x >> 16
    x = (x * _MUL) & _M32
    x ^= x >> 16
    return x


def _mix_(x: torch.Tensor) -> torch.Tensor:
    """The finaliser in place on an int64 tensor of values in [0, 2^32)."""
    x.bitwise_xor_(x >> 16)
    x.mul_(_MUL).bitwise_and_(_M32)
    x.bitwise_xor_(x >> 16)
    x.mul_(_MUL).bitwise_and_(_M32)
    x.bitwise_xor_(x >> 16)
    return x


class Dropout:
    """The keep-mask generator of one call: rng = [seed, offset] (int64 tensor)."""

    def __init__(self, p: float, rng: torch.Tensor, nheads: int, mq: int, mk: int):
        if rng is None:
            raise ValueError("rng_state: required when dropout_p > 0")
        seed, offset = (int(v) for v in rng.tolist())
        self.p = p
        self.scale = 1.0 / (1.0 - p)
        self.key0 = _mix_int((seed & _M32) ^ _mix_int((seed >> 32) & _M32))
        self.key1 = _mix_int((offset & _M32) ^ _mix_int(((offset >> 32) ^ 0x9E3779B9) & _M32))
        self.threshold = round(p * (1 << 24))
        self.nheads, self.mq, self.mk = nheads, mq, mk

    def keep(self, seq: int, h0: int, group: int, i0: int, i1: int, j0: int, j1: int) -> torch.Tensor:
        """(i1 - i0, G, j1 - j0) bool: the keep mask of queries [i0, i1) of heads
        h0 .. h0 + G - 1 against keys [j0, j1), for sequence `seq`."""
        h = torch.arange(h0, h0 + group, dtype=torch.int64)[None, :, None]
        i = torch.arange(i0, i1, dtype=torch.int64)[:, None, None]
        j = torch.arange(j0, j1, dtype=torch.int64)[None, None, :]
        x = (((seq * self.nheads + h) * self.mq + i) * self.mk) + j  # (bm, G, w) int64 counters
        hi = x >> 32
        x.bitwise_and_(_M32).bitwise_xor_(self.key0)
        _mix_(x)
        x.add_(hi).bitwise_and_(_M32).bitwise_xor_(self.key1)
        _mix_(x)
        return (x >> 8) >= self.threshold

    def full_mask(self, batch: int) -> torch.Tensor:
        """(B, H, Mq, Mk) bool: the whole mask, one (batch, head) slice at a time."""
        mask = torch.empty(batch, self.nheads, self.mq, self.mk, dtype=torch.bool)
        for b in range(batch):
            for h in range(self.nheads):
                mask[b, h] = self.keep(b, h, 1, 0, self.mq, 0, self.mk)[:, 0, :]
        return mask
