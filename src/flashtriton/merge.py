"""merge_attention_states: combine partial attention results by their logsumexp.

Attention over a key set K = K_1 + ... + K_N (disjoint) can be computed per part and
merged exactly: with out_i, lse_i the output and logsumexp over K_i,
    lse = log(sum_i exp(lse_i)),    out = sum_i exp(lse_i - lse) * out_i.
This is what the split-KV decode kernels do internally; exposed, it serves prefix
sharing (cascade decoding: attend once over a shared prefix cache, once over each
sequence's own suffix, then merge) and ring attention (merge the blocks that arrive
from other devices).

    out_prefix, lse_prefix = flash_attn_with_kvcache(q, prefix_k, prefix_v, ..., return_softmax_lse=True)
    out_suffix, lse_suffix = flash_attn_with_kvcache(q, k_cache, v_cache, ..., return_softmax_lse=True)
    out, lse = merge_attention_states([out_prefix, out_suffix], [lse_prefix, lse_suffix])

Layouts are flash-attn's: out (..., S, H, D) with lse (..., H, S) float32, where "..."
is any number of leading dims: (B, S, H, D) with (B, H, S) for batched calls,
(total, H, D) with (H, total) for variable-length ones.
"""
from __future__ import annotations

import math

import torch

from . import backends, validate


def _stacked(name, x):
    """A tensor (N, ...) from a tensor, or a list / tuple of N same-shaped tensors."""
    if isinstance(x, torch.Tensor):
        if x.dim() == 0 or x.shape[0] == 0:
            raise ValueError(f"{name}: a stacked tensor needs a leading parts dim N >= 1, got shape {tuple(x.shape)}")
        return x
    if not isinstance(x, (list, tuple)) or len(x) == 0:
        raise TypeError(f"{name}: expected a non-empty list or tuple of tensors, or one stacked tensor, "
                        f"got {type(x).__name__}" + (" of length 0" if isinstance(x, (list, tuple)) else ""))
    for i, t in enumerate(x):
        validate._tensor(f"{name}[{i}]", t)
        if t.shape != x[0].shape:
            raise ValueError(f"{name}[{i}]: shape {tuple(t.shape)} differs from {name}[0]'s {tuple(x[0].shape)}")
        if t.dtype != x[0].dtype:
            raise TypeError(f"{name}[{i}]: dtype {t.dtype} differs from {name}[0]'s {x[0].dtype}")
        if t.device != x[0].device:
            raise ValueError(f"{name}[{i}]: on {t.device} but {name}[0] is on {x[0].device}")
    return torch.stack(list(x))


def merge_attention_states(outs, lses):
    """Merge N partial attention results by their logsumexp.

    outs: N tensors (..., S, H, D) as a list / tuple, or one stacked tensor (N, ..., S, H, D);
    lses: likewise N tensors (..., H, S) float32 (flash-attn's softmax_lse layout).
    Returns (out (..., S, H, D) in outs' dtype, lse (..., H, S) float32). A part with
    lse = +inf or -inf saw no key and has weight 0; a row where all parts are empty
    outputs 0 with lse = +inf (the kernels' convention).
    """
    if isinstance(outs, (list, tuple)) and isinstance(lses, (list, tuple)) and len(outs) != len(lses):
        raise ValueError(f"lses: {len(lses)} parts, but outs has {len(outs)}; give one lse per output")
    outs = _stacked("outs", outs)
    lses = _stacked("lses", lses)
    if outs.shape[0] != lses.shape[0]:
        raise ValueError(f"lses: {lses.shape[0]} parts, but outs has {outs.shape[0]}; give one lse per output")
    backend = backends.select(outs.device)
    allowed = validate.KERNEL_DTYPES if backend != "reference" else validate.KERNEL_DTYPES + (torch.float64,)
    if outs.dtype not in allowed:
        names = ", ".join(str(d).replace("torch.", "") for d in allowed)
        raise TypeError(f"outs: dtype {outs.dtype} is not supported by the {backend} backend (supported: {names})")
    lse_ok = (torch.float32,) if backend != "reference" else (torch.float32, torch.float64)
    if lses.dtype not in lse_ok:
        raise TypeError(f"lses: dtype must be float32, got {lses.dtype}")
    if lses.device != outs.device:
        raise ValueError(f"lses: on {lses.device} but outs is on {outs.device}")
    if outs.dim() < 4:
        raise ValueError(f"outs: each part must have >= 3 dims (..., seqlen, nheads, headdim), "
                         f"got {tuple(outs.shape[1:])}")
    lead = outs.shape[1:-3]
    s, h, d = outs.shape[-3:]
    expected = (outs.shape[0],) + tuple(lead) + (h, s)
    if tuple(lses.shape) != expected:
        raise ValueError(f"lses: each part must have shape (..., nheads, seqlen) = {expected[1:]} to match outs' "
                         f"{tuple(outs.shape[1:])}, got {tuple(lses.shape[1:])}")
    if outs.stride(-1) != 1 and outs.numel() > 0:
        raise ValueError(f"outs: the last (headdim) dimension must have stride 1, got stride {outs.stride(-1)}")
    n = outs.shape[0]
    p = math.prod(lead)
    outs5 = outs.reshape(n, p, s, h, d)
    lses4 = lses.reshape(n, p, h, s)
    if backend == "triton":
        from .launchers.decode import merge_states
        out, lse = merge_states(outs5, lses4)
    else:
        # The reference and cpu backends: the same math in vectorised PyTorch.
        from .reference_decode import merge_states
        out, lse = merge_states(outs5, lses4.transpose(2, 3))          # (P, S, H, D), (P, S, H)
        lse = lse.transpose(1, 2).contiguous()
    return out.reshape(tuple(lead) + (s, h, d)), lse.reshape(tuple(lead) + (h, s))
