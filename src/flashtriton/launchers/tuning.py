"""A small tile tuner: times the pruned candidates once per key and remembers the best.

Used only when FLASHTRITON_AUTOTUNE=1 (see kernels/configs.py). A key is
(kernel, BLOCK_D, dtype, mask kind, sequence-length bucket); the whole first call
in a new key is capped at TUNE_BUDGET_S seconds, compile time included.
"""
from __future__ import annotations

import time

from ..kernels import configs

TUNE_BUDGET_S = 6.0  # per kernel: a first fwd+bwd call tunes three kernels
_best: dict = {}
last_tuning_seconds: dict = {}  # key -> seconds the first call spent tuning (reported by bench)


def pick(kernel: str, key: tuple, block_d: int, elem: int, run) -> configs.Tile:
    """The tile for `key`: cached, or tuned now by timing run(tile) for each candidate."""
    full_key = (kernel, block_d) + key
    if full_key in _best:
        return _best[full_key]
    import torch
    from triton.runtime.errors import OutOfResources
    from triton.testing import do_bench

    start = time.perf_counter()
    masked = key[1] or key[2]           # a left or right window edge (causal included)
    # key[0]: (dtype, dot precision); float32 on the tensor cores has its own tiles
    dots = key[0][1]
    best, best_ms = configs.default_tile(kernel, block_d, key[-1], elem, masked=masked, fp32_dots=dots), float("inf")
    for tile in configs.tuner_candidates(kernel, block_d, key[-1], elem, masked=masked, fp32_dots=dots):
        if time.perf_counter() - start > TUNE_BUDGET_S:
            break
        try:
            ms = do_bench(lambda: run(tile), warmup=5, rep=20, return_mode="median")
        except OutOfResources:  # a config the compiler cannot fit is skipped
            continue
        if ms < best_ms:
            best, best_ms = tile, ms
    torch.cuda.synchronize()
    last_tuning_seconds[full_key] = time.perf_counter() - start
    _best[full_key] = best
    return best
