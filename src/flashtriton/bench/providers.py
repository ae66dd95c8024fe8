"""The attention implementations a benchmark compares, on the same inputs.

Every provider takes q, k, v in flash-attn's layout (B, N, H, D) and returns the
output in that layout. SDPA and FlexAttention get transposed views (B, H, N, D) of
the very same storage: no copy, and their kernels accept the strides.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

import flashtriton


def ours(q, k, v, causal):
    return flashtriton.flash_attn_func(q, k, v, causal=causal)


def _sdpa(backend):
    from torch.nn.attention import sdpa_kernel

    def run(q, k, v, causal):
        with sdpa_kernel([backend]):
            out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                                 is_causal=causal, enable_gqa=k.shape[2] != q.shape[2])
        return out.transpose(1, 2)
    return run


_flex_cache: dict = {}


def _flex(q, k, v, causal):
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    if "fn" not in _flex_cache:
        # The benchmark times backward passes with retain_graph=True, which compiled
        # backwards with donated buffers refuse (torch 2.11): keep buffers undonated.
        torch._functorch.config.donated_buffer = False
        # One static compile per shape. With the default (automatic dynamic shapes after a
        # recompile, and dynamo's limit of 8 recompiles) the grid's later shapes ran
        # Flex's unfused eager fallback on 2026-11-29: 3-49 TFLOP/s and out-of-memory
        # errors (bench/NOTES.md). The grid has 36 shapes.
        torch._dynamo.config.cache_size_limit = max(torch._dynamo.config.cache_size_limit, 128)
        torch._dynamo.config.accumulated_cache_size_limit = max(
            torch._dynamo.config.accumulated_cache_size_limit, 1024)
        _flex_cache["fn"] = torch.compile(flex_attention, dynamic=False)
    nq, nk = q.shape[1], k.shape[1]
    key = (nq, nk, causal, q.device)
    if key not in _flex_cache:
        if causal:
            def causal_mask(b, h, i, j):
                return j <= i + (nk - nq)
            _flex_cache[key] = create_block_mask(causal_mask, None, None, nq, nk, device=q.device)
        else:
            _flex_cache[key] = None
    out = _flex_cache["fn"](q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), block_mask=_flex_cache[key],
                            enable_gqa=k.shape[2] != q.shape[2])
    return out.transpose(1, 2)


def gpu_providers(include_flex: bool = True) -> dict:
    from torch.nn.attention import SDPBackend
    p = {"flashtriton": ours,
         "sdpa-flash (FA2 CUDA)": _sdpa(SDPBackend.FLASH_ATTENTION),
         "sdpa-cudnn": _sdpa(SDPBackend.CUDNN_ATTENTION)}
    if include_flex:
        p["flex (compiled)"] = _flex
    return p
