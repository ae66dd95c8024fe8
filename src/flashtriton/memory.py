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


def poisoning() -> bool:
    """Whether poison_outputs() is active (workspaces then stay fresh and poisoned)."""
    return _poison


# Set by flashtriton.launchers.plans: told of every allocation made here, so that a
# recorded call can be replayed (make() allocates the same again).
alloc_hook = None


def _empty(shape, dtype, device) -> torch.Tensor:
    if not _poison:
        return torch.empty(shape, dtype=dtype, device=device)
    if dtype.is_floating_point:
        return torch.full(shape, float("nan"), dtype=dtype, device=device)
    return torch.full(shape, torch.iinfo(dtype).max, dtype=dtype, device=device)


def empty(shape, dtype, device) -> torch.Tensor:
    t = _empty(shape, dtype, device)
    if alloc_hook is not None:
        alloc_hook(t, "empty", (shape, dtype, device))
    return t


def empty_like(t: torch.Tensor) -> torch.Tensor:
    """empty(t.shape, t.dtype, t.device), contiguous, by torch.empty_like: the same tensor, but right after other
    work (cold caches) ~25-30 us where torch.empty with shape / dtype / device took ~55-60 (session 54, the CPU
    decode's output: bench/cpu/s54_cold_alloc_probe.py). The hook sees empty()'s spec, so a replay makes the same."""
    if _poison:
        return empty(t.shape, t.dtype, t.device)
    out = torch.empty_like(t, memory_format=torch.contiguous_format)
    if alloc_hook is not None:
        alloc_hook(out, "empty", (t.shape, t.dtype, t.device))
    return out


def arange_i32(n: int, device) -> torch.Tensor:
    """0, 1, ..., n - 1 as int32 (a kernel's row indices)."""
    t = torch.arange(n, dtype=torch.int32, device=device)
    if alloc_hook is not None:
        alloc_hook(t, "arange", (n, device))
    return t


def make(kind: str, spec) -> torch.Tensor:
    """Allocate again what empty() or arange_i32() made from `spec`."""
    return empty(*spec) if kind == "empty" else arange_i32(*spec)
