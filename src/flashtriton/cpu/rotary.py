"""Rotary position embedding for the KV-cache path (flash_attn_with_kvcache).

Pair j of the first R = 2 * cos.shape[1] features of a vector at position p turns by
the angle with cosine cos[p, j] and sine sin[p, j]:

    (x1, x2) -> (x1 * c - x2 * s, x2 * c + x1 * s)

interleaved=True (GPT-J) pairs features (2j, 2j + 1); False (GPT-NeoX) pairs
(j, j + R / 2). Computed in float32 and rounded to x's dtype, as the kernels do;
features past R are untouched.
"""
from __future__ import annotations

import torch


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, positions: torch.Tensor,
           interleaved: bool) -> torch.Tensor:
    """x (B, S, H, D), positions (B, S) int64 -> rotated copy of x, same dtype."""
    half = cos.shape[1]
    r = 2 * half
    c = cos[positions].to(torch.float32)[:, :, None, :]   # (B, S, 1, R/2)
    s = sin[positions].to(torch.float32)[:, :, None, :]
    xr = x[..., :r].to(torch.float32)
    if interleaved:
        x1, x2 = xr[..., 0::2], xr[..., 1::2]
    else:
        x1, x2 = xr[..., :half], xr[..., half:]
    y1 = x1 * c - x2 * s
    y2 = x2 * c + x1 * s
    res = x.clone()
    if interleaved:
        res[..., 0:r:2] = y1
        res[..., 1:r:2] = y2
    else:
        res[..., :half] = y1
        res[..., half:r] = y2
    return res
