"""Where the prefill kernels anchor the ALiBi bias, and the lse conversion that goes with it.

flash-attn's bias is -slope * |p - j|, where p = i + Nk - Nq is the key that query row i sits
on (bottom-right alignment). When Nq > Nk and the call is not causal, the first Nq - Nk rows sit
before every key (p < 0). Each of their biases is -slope * (|p| + j), and at long sequences that
is hundreds of units. A float32 lse of such a row carries this constant and is rounded at its
size (2^-24 |lse|). The backward's P = exp(s - lse) inherits that rounding, while PyTorch's
softmax subtracts the row max first. Session 66 measured fp32 gradients at 1.1-3.5x the
criterion's bound with 17 keys and up to ~40x with one key, on the CPU and Triton alike.

Softmax ignores a constant per row. So the prefill kernels, forward and backward, use

    bias'(i, j) = -slope * |max(p, 0) - j| = bias(i, j) - slope * min(p, 0)

(Triton: kernels/common.scores_log2, for the calls that needed() admits; CPU: cpu/tiles.alibi_distance,
cpu/native_prefill's row setup and cpu/backward._log2_alibi_weight, always). Rows with p >= 0,
every row when Nq <= Nk, get the bias they had: bit for bit on the CPU and on the Triton calls
that needed() leaves plain (the anchored Triton form takes the same distances another way). The
masks keep p.

The lse that the backends' fwd return, and that the attn_fwd op returns and saves for its
backward, is therefore the anchored one:

    lse' = lse - slope * min(p, 0)

api._attention converts it back for the user (to_public) only when return_attn_probs asks for
it. That is one float32 rounding, as flash-attn's own lse has. The reference backend computes
the plain lse and anchors it (to_anchored), so that every backend's op returns the same quantity.

The forward-only kernels return flash-attn's lse themselves, so they move an anchored lse back
before it leaves them (session 68: before, they kept the plain bias, and fp32 rows before every
key read up to 2.6x PyTorch's error):
- Triton decode (flash_attn_with_kvcache; kernels/decode.py, HAS_ALIBI = 2 when not causal and
  Sq > 1): _store_final adds _anchor_shift, after the combine where the call splits; the
  separate combine finds the shift in LSE, left there by the split kernel.
- Triton paged prefill (kernels/fwd_paged.py, the decode kernel's tiles; needed() as varlen).
- CPU decode: the compiled kernel (cpu/native.py: item()'s anchor, the merge's shift) and the
  torch-ops paths (tiles.alibi_distance, then to_public in cpu/decode.kvcache_fwd). The paged
  op of the CPU converts fwd's lse (cpu/__init__.fwd_paged).
The one-row route, which runs a prefill call with Nq = 1 on the decode kernels, has p = Nk - 1
>= 0, and keeps the plain bias.
"""
from __future__ import annotations

import torch
from torch import Tensor


def needed(nq: int, nk: int, window_right: int, is_varlen: bool) -> bool:
    """Whether some row may sit before every key and still see one: only then do the Triton kernels
    take the max (HAS_ALIBI = 2; kernels/common.scores_log2 says why that has its own form; H100,
    session 67: forward level, forward + backward ~2.4% slower than the plain form). Elsewhere
    i + Nk - Nq is the anchor already. With varlen the lengths are on the device, so
    every call pays. With window_right = 0 (causal) such a row sees no key, and its lse is +inf
    either way."""
    return window_right != 0 and (is_varlen or nq > nk)


def _row_offsets(lse: Tensor, alibi: Tensor, nq: int, nk: int, varlen) -> Tensor | None:
    """slope * min(p, 0) in lse's layout ((B, H, Nq), or (H, total_q) with varlen =
    (cu_seqlens_q, cu_seqlens_k, ...)), or None where no row sits before every key."""
    dev = lse.device
    if varlen is None:
        if nq <= nk:
            return None
        p = torch.arange(nq, device=dev) + (nk - nq)                                  # (Nq,)
        slopes = alibi.view(1, -1, 1) if alibi.dim() == 1 else alibi.view(alibi.shape[0], -1, 1)  # (B|1, H, 1)
        return slopes.to(lse.dtype) * p.clamp(max=0).to(lse.dtype)                    # (B|1, H, Nq)
    cu_q, cu_k = varlen[0].long(), varlen[1].long()
    total_q = lse.shape[1]
    rows = torch.arange(total_q, device=dev)
    seq = torch.searchsorted(cu_q[1:], rows, right=True)                             # (total_q,) sequence of row
    p = rows - cu_q[seq] + (cu_k[seq + 1] - cu_k[seq]) - (cu_q[seq + 1] - cu_q[seq])  # (total_q,)
    slopes = alibi.view(-1, 1) if alibi.dim() == 1 else alibi[seq].t()               # (H, 1 | total_q)
    return slopes.to(lse.dtype) * p.clamp(max=0).to(lse.dtype)                        # (H, total_q)


def to_public(lse: Tensor, alibi: Tensor | None, nq: int, nk: int, varlen=None) -> Tensor:
    """flash-attn's lse from the anchored one (a new tensor where any row moves; rows that see no
    key keep +inf)."""
    off = None if alibi is None else _row_offsets(lse, alibi, nq, nk, varlen)
    return lse if off is None else lse + off


def to_anchored(lse: Tensor, alibi: Tensor | None, nq: int, nk: int, varlen=None) -> Tensor:
    """The anchored lse from flash-attn's (the reference backend's fwd)."""
    off = None if alibi is None else _row_offsets(lse, alibi, nq, nk, varlen)
    return lse if off is None else lse - off
