"""Output allocation for every backend, with a poison switch for the tests.

Under `poison_outputs()`, outputs are filled with NaN (or the dtype's max for
integers) instead of left uninitialised, so an element that no kernel writes is
caught by the comparison against the reference.
"""
from __future__ import annotations

import contextlib

import torch

# Process-wide rather than thread-local: autograd runs CUDA backward passes on a
# thread of its own, and those outputs must be poisoned too.
_poison = False


@contextlib.contextmanager
def poison_outputs():
    global _poison
    previous, _poison = _poison, True
    try:
        yield
    finally:
        _poison = previous


def empty(shape, dtype, device) -> torch.Tensor:
    if not _poison:
        return torch.empty(shape, dtype=dtype, device=device)
    if dtype.is_floating_point:
        return torch.full(shape, float("nan"), dtype=dtype, device=device)
    return torch.full(shape, torch.iinfo(dtype).max, dtype=dtype, device=device)
