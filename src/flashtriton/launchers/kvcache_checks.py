"""Layer 2: host launcher of kernels/kvcache_checks.py, the device side of
flash_attn_with_kvcache's value checks (flashtriton.kvcache._check_values).

value_rows returns the (5, B) int64 tensor the kernel fills (layout: the kernel module's
docstring), in ONE launch, which the API then copies to the host (its one sync).

Why a kernel: the same values built from torch ops took 2 CUDA launches a step on a
contiguous cache and 24 on a paged one (30 aten ops with the views; counted with a
TorchDispatchMode, 2026-12-01), each ~1.5 us of host time or more on the H200 machine. On
the H200 (s26/call4, a slow host hour), B = 1, L = 8k, checks on, eager: paged 16 99-118
us with this kernel against 416-607 with the torch ops, page 256 145-148 against 740-749,
contiguous 82-105 against 133-160 (bench/gpu/s26_decode_host_probe.py). The launch
goes through a launch plan (launchers/plans.py), so a step with a signature seen before
replays it through the compiled kernel's C launcher (a plain kernel[grid] call costs
40-85 us on that host): what is left per call is the plan lookup, one torch.empty and
the launch. (With plans off, FLASHTRITON_PLANS=0 or autotuning, it is kernel[grid].)
"""
from __future__ import annotations

import torch

from .. import memory
from . import plans
from ..kernels.kvcache_checks import kvcache_value_rows_kernel

MAX_BLOCK_C = 1024      # block-table columns a loop step scans (4 KB of int32)


def _pow2(n: int) -> int:
    return 1 << max(n - 1, 0).bit_length()


def block_c_for(max_blocks: int) -> int:
    return min(MAX_BLOCK_C, max(16, _pow2(max_blocks)))


def value_rows(cache_seqlens: torch.Tensor, cache_leftpad, cache_batch_idx, block_table, num_blocks: int,
               page_size: int, snew: int, signed=None, block_c: int = 0) -> torch.Tensor:
    """(5, B) int64 on cache_seqlens' device: seqlens, leftpad (or 0), batch idx (or 0),
    the first bad used block-table column (-1: none) and its entry (see the kernel).
    cache_seqlens (B,) int32; the others (B,) int32, (B, max_blocks) int32 or None.
    num_blocks: k_cache.shape[0] (of a paged cache; unused without block_table);
    page_size: > 0 with block_table. signed: a stand-in for plans.sign of the four
    tensors that is equal exactly when those signatures are (kvcache's structure memo
    entry, whose signature covers every argument of the call); None: signed here. block_c: the columns a
    loop step scans (0: block_c_for; tests pass small ones to cross many steps)."""
    inputs = (cache_seqlens, cache_leftpad, cache_batch_idx, block_table)
    max_blocks = block_table.shape[1] if block_table is not None else 0
    block_c = block_c or block_c_for(max_blocks)
    key = plan_key(inputs, num_blocks, page_size, snew, signed, block_c)
    return plans.run(key, inputs, lambda: (_value_rows(cache_seqlens, cache_leftpad, cache_batch_idx, block_table,
                                                       num_blocks, page_size, snew, block_c),))[0]


def plan_key(inputs, num_blocks: int, page_size: int, snew: int, signed=None, block_c: int = 0):
    """value_rows' launch plan key for inputs = (cache_seqlens, cache_leftpad,
    cache_batch_idx, block_table) (flashtriton.kvcache keeps the plan of a step seen
    before, found under this key)."""
    if not block_c:
        block_c = block_c_for(inputs[3].shape[1] if inputs[3] is not None else 0)
    return plans.plan_key("kvcache_checks", inputs, (num_blocks, page_size, snew, block_c), signed, policy=False)


def _value_rows(cache_seqlens, cache_leftpad, cache_batch_idx, block_table, num_blocks, page_size, snew, block_c):
    batch = cache_seqlens.shape[0]
    out = memory.empty((5, batch), torch.int64, cache_seqlens.device)
    has_table = block_table is not None
    dummy = cache_seqlens      # stands in for absent pointers (never read)
    plans.launch(kvcache_value_rows_kernel, (batch,),
        cache_seqlens, cache_leftpad if cache_leftpad is not None else dummy,
        cache_batch_idx if cache_batch_idx is not None else dummy, block_table if has_table else dummy, out,
        cache_seqlens.stride(0), cache_leftpad.stride(0) if cache_leftpad is not None else 0,
        cache_batch_idx.stride(0) if cache_batch_idx is not None else 0,
        block_table.stride(0) if has_table else 0, block_table.stride(1) if has_table else 0,
        batch, block_table.shape[1] if has_table else 0, num_blocks if has_table else 0, snew,
        HAS_LEFTPAD=cache_leftpad is not None, HAS_BATCH_IDX=cache_batch_idx is not None, HAS_TABLE=has_table,
        PAGE_SIZE=page_size if has_table else 1, BLOCK_C=block_c,
        num_warps=4 if block_c >= 512 else 1)
    return out
