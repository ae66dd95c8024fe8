"""Layer 4: the public API, with flash-attn 2.x's names, signatures and return values.

    from flashtriton import flash_attn_func      # instead of: from flash_attn import ...

Each function validates its arguments (flashtriton.validate), picks the backend
(flashtriton.backends.select), and calls the registered op (flashtriton.ops).
"""
from __future__ import annotations

import math
import os

import torch

from . import alibi_anchor, backends, ops, paged, validate
from .probs import attention_probs

_RNG_HIGH = 2 ** 62


@torch._dynamo.assume_constant_result
def _select_when_compiling(device, override, env):
    return backends.select(device)


def _select_backend(device) -> str:
    """backends.select(device), also inside torch.compile. Dynamo refuses to trace
    flashtriton/backends.py (its skip rule "triton/backends" matches that path), which
    would be a graph break; so under compile the choice runs eagerly at trace time as a
    constant, and the state it depends on is read here, where dynamo guards on it."""
    if torch.compiler.is_compiling():
        return _select_when_compiling(device, tuple(backends._override), os.environ.get("FLASHTRITON_BACKEND"))
    return backends.select(device)


def _check_varlen_structure(q, k, varlen):
    """cu_seqlens_* and max_seqlen_* of a varlen call (no host sync); returns the batch size.
    k: the keys' tensor whose dim 0 cu_seqlens_k indexes (None: a paged cache, lengths only)."""
    cu_q, cu_k, max_q, max_k = varlen
    validate.cu_seqlens("cu_seqlens_q", cu_q, q.shape[0], q.device, None)
    batch = cu_q.numel() - 1
    validate.cu_seqlens("cu_seqlens_k", cu_k, None if k is None else k.shape[0], q.device, batch)
    for name, m in (("max_seqlen_q", max_q), ("max_seqlen_k", max_k)):
        if not isinstance(m, int) or m < 0:
            raise ValueError(f"{name}: must be an int >= 0, got {m!r}")
    return batch


def _check_flags(causal, deterministic):
    if not isinstance(causal, bool):
        raise TypeError(f"causal: must be a bool, got {type(causal).__name__}")
    if not isinstance(deterministic, bool):
        raise TypeError(f"deterministic: must be a bool, got {type(deterministic).__name__}")


def _attention_paged(q, k_cache, v_cache, block_table, varlen, dropout_p, softmax_scale, causal, window_size,
                     softcap, alibi_slopes, deterministic, return_attn_probs):
    """flash_attn_varlen_func with block_table (flashtriton.paged): the forward only."""
    validate._tensor("q", q)
    backend = _select_backend(q.device)
    if q.dim() != 3:
        raise ValueError(f"q: expected 3 dims (total, nheads, headdim), got shape {tuple(q.shape)}")
    batch = _check_varlen_structure(q, None, varlen)
    paged.check_structure(q, k_cache, v_cache, block_table, batch)
    # q, k, v's dtype, device, head dim, head counts and unit inner strides, on one page's
    # (page_block_size, nheads_k, headdim) view of the caches
    validate.attention_inputs(q, k_cache[0], v_cache[0], varlen=True, backend=backend)
    validate.options(softmax_scale=softmax_scale, window_size=window_size, softcap=softcap,
                     dropout_p=dropout_p, alibi_slopes=alibi_slopes, q=q, batch=batch)
    _check_flags(causal, deterministic)
    if dropout_p > 0:
        raise NotImplementedError("flash_attn_varlen_func with block_table: dropout_p > 0 is not implemented "
                                  "(paged KV is forward-only here, as in flash-attn: inference has no dropout)")
    scale = float(softmax_scale) if softmax_scale is not None else 1.0 / math.sqrt(q.shape[-1])
    window_left, window_right = int(window_size[0]), int(window_size[1])
    if causal:
        window_right = 0
    cu_q, cu_k, max_q, max_k = varlen
    out, lse = ops.attention_paged(q, k_cache, v_cache, block_table, cu_q, cu_k, max_q, max_k, scale, window_left,
                                   window_right, float(softcap), alibi_slopes, backend)
    if not return_attn_probs:
        return out
    k, _ = paged.gather_kv(k_cache, v_cache, block_table, cu_k)
    probs = attention_probs(q, k, lse, backend, scale, window_left, window_right, float(softcap), alibi_slopes, 0.0,
                            None, varlen)
    return out, lse, probs


def _attention(q, k, v, varlen, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes,
               deterministic, return_attn_probs):
    """Shared body of every prefill entry point. varlen is None or
    (cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k)."""
    validate._tensor("q", q)
    backend = _select_backend(q.device)
    validate.attention_inputs(q, k, v, varlen=varlen is not None, backend=backend)
    if varlen is None:
        batch = q.shape[0]
        cu_q = cu_k = None
        max_q = max_k = 0
    else:
        cu_q, cu_k, max_q, max_k = varlen
        batch = _check_varlen_structure(q, k, varlen)
    validate.options(softmax_scale=softmax_scale, window_size=window_size, softcap=softcap,
                     dropout_p=dropout_p, alibi_slopes=alibi_slopes, q=q, batch=batch)
    _check_flags(causal, deterministic)
    scale = float(softmax_scale) if softmax_scale is not None else 1.0 / math.sqrt(q.shape[-1])
    # ints from here on (validate.options admits bools, as ints: True is an edge of 1; the
    # ops' schemas and forward_gluon.window_args take ints only; review, session 25)
    window_left, window_right = int(window_size[0]), int(window_size[1])
    if causal:
        window_right = 0  # flash-attn: causal is a window whose right edge is the diagonal
    rng_state = None
    if dropout_p > 0:
        # Seeded from torch's generator on q's device: torch.manual_seed reproduces it.
        rng_state = torch.randint(0, _RNG_HIGH, (2,), dtype=torch.int64, device=q.device)
    # torch.use_deterministic_algorithms(True) makes every call deterministic, as it does
    # for torch's own attention
    deterministic = deterministic or torch.are_deterministic_algorithms_enabled()
    out, lse = ops.attention(q, k, v, cu_q, cu_k, max_q, max_k, scale, window_left, window_right,
                             float(softcap), alibi_slopes, float(dropout_p), rng_state, backend, deterministic)
    if not return_attn_probs:
        return out
    # the op's lse is relative to the ALiBi anchor (alibi_anchor.py); the user gets flash-attn's
    lse = alibi_anchor.to_public(lse, alibi_slopes, q.shape[1], k.shape[1], varlen)
    probs = attention_probs(q, k, lse, backend, scale, window_left, window_right, float(softcap),
                            alibi_slopes, float(dropout_p), rng_state, varlen)
    return out, lse, probs


def flash_attn_func(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1),
                    softcap=0.0, alibi_slopes=None, deterministic=False, return_attn_probs=False):
    """Exact attention. q (B, Nq, H, D), k and v (B, Nk, Hk, D) with H % Hk == 0.

    Returns out (B, Nq, H, D); with return_attn_probs=True, (out, softmax_lse (B, H, Nq),
    S_dmask (B, H, Nq, Nk)), where S_dmask holds the softmax probabilities, negated where
    dropout dropped them (it materialises Nq x Nk: for testing only, as in flash-attn).
    deterministic=True makes the backward bitwise reproducible. With False (the default,
    as in flash-attn) a Hopper GPU's dense bf16 / fp16 calls at D = 64 / 128 from 512-8k
    tokens (causal from 512, sliding windows from 2k; policy.GLUON_BWD_FUSED_MIN_N) take
    the fused Gluon backward, whose dq is reduce-added in fp32 in whatever order its key
    blocks run (its last bits may vary run to run; dk and dv do not);
    every other call is bitwise reproducible either way.
    """
    return _attention(q, k, v, None, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes,
                      deterministic, return_attn_probs)


def _unpack(name, t, index_dim, count):
    validate._tensor(name, t)
    if t.dim() <= index_dim or t.shape[index_dim] != count:
        raise ValueError(f"{name}: dim {index_dim} must have size {count}, got shape {tuple(t.shape)}")
    return t.unbind(index_dim)  # views: no copy


def flash_attn_qkvpacked_func(qkv, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1),
                              softcap=0.0, alibi_slopes=None, deterministic=False, return_attn_probs=False):
    """qkv (B, N, 3, H, D). As flash_attn_func."""
    if isinstance(qkv, torch.Tensor) and qkv.dim() != 5:
        raise ValueError(f"qkv: expected 5 dims (batch, seqlen, 3, nheads, headdim), got shape {tuple(qkv.shape)}")
    q, k, v = _unpack("qkv", qkv, 2, 3)
    return flash_attn_func(q, k, v, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes,
                           deterministic, return_attn_probs)


def flash_attn_kvpacked_func(q, kv, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1),
                             softcap=0.0, alibi_slopes=None, deterministic=False, return_attn_probs=False):
    """q (B, Nq, H, D), kv (B, Nk, 2, Hk, D). As flash_attn_func."""
    if isinstance(kv, torch.Tensor) and kv.dim() != 5:
        raise ValueError(f"kv: expected 5 dims (batch, seqlen, 2, nheads_k, headdim), got shape {tuple(kv.shape)}")
    k, v = _unpack("kv", kv, 2, 2)
    return flash_attn_func(q, k, v, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes,
                           deterministic, return_attn_probs)


def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p=0.0,
                           softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0,
                           alibi_slopes=None, deterministic=False, return_attn_probs=False, block_table=None):
    """Variable-length batch without padding: q (total_q, H, D), k and v (total_k, Hk, D),
    cu_seqlens_* (B + 1,) int32 cumulative offsets from 0. Causal masks align bottom-right
    per sequence. Returns out (total_q, H, D); lse is (H, total_q).

    block_table (B, max_blocks_per_seq) int32: k and v are a paged cache (num_blocks,
    page_block_size, Hk, D), page_block_size a power of two; key position p of sequence b
    is row p % page_block_size of page block_table[b, p // page_block_size], and
    cu_seqlens_k gives the key lengths only. Forward only, as in flash-attn: a backward
    through it raises NotImplementedError, and so does dropout_p > 0 (flashtriton.paged)."""
    if block_table is not None:
        return _attention_paged(q, k, v, block_table, (cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k),
                                dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes, deterministic,
                                return_attn_probs)
    return _attention(q, k, v, (cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k), dropout_p,
                      softmax_scale, causal, window_size, softcap, alibi_slopes, deterministic, return_attn_probs)


def flash_attn_varlen_qkvpacked_func(qkv, cu_seqlens, max_seqlen, dropout_p=0.0, softmax_scale=None, causal=False,
                                     window_size=(-1, -1), softcap=0.0, alibi_slopes=None, deterministic=False,
                                     return_attn_probs=False):
    """qkv (total, 3, H, D). As flash_attn_varlen_func."""
    if isinstance(qkv, torch.Tensor) and qkv.dim() != 4:
        raise ValueError(f"qkv: expected 4 dims (total, 3, nheads, headdim), got shape {tuple(qkv.shape)}")
    q, k, v = _unpack("qkv", qkv, 1, 3)
    return flash_attn_varlen_func(q, k, v, cu_seqlens, cu_seqlens, max_seqlen, max_seqlen, dropout_p,
                                  softmax_scale, causal, window_size, softcap, alibi_slopes, deterministic,
                                  return_attn_probs)


def flash_attn_varlen_kvpacked_func(q, kv, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p=0.0,
                                    softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0,
                                    alibi_slopes=None, deterministic=False, return_attn_probs=False):
    """q (total_q, H, D), kv (total_k, 2, Hk, D). As flash_attn_varlen_func."""
    if isinstance(kv, torch.Tensor) and kv.dim() != 4:
        raise ValueError(f"kv: expected 4 dims (total, 2, nheads_k, headdim), got shape {tuple(kv.shape)}")
    k, v = _unpack("kv", kv, 1, 2)
    return flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p,
                                  softmax_scale, causal, window_size, softcap, alibi_slopes, deterministic,
                                  return_attn_probs)
