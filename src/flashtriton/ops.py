"""Layer 3: the attention ops, registered with torch.library, and their autograd.

flashtriton::attn_fwd  (q, k, v, ...) -> (out, lse)
flashtriton::attn_bwd  (dout, q, k, v, out, lse, ...) -> (dq, dk, dv)

attn_fwd's lse, which its backward takes, is relative to the ALiBi anchor: it differs from
flash-attn's only with ALiBi on rows that sit before every key (flashtriton/alibi_anchor.py;
the public API converts it). The paged op returns flash-attn's lse.

Both carry fake (meta) implementations, so torch.compile traces them without a
graph break, and attn_fwd has its backward registered through
torch.library.register_autograd. The backend name is an argument, resolved by the
public API (flashtriton.backends.select) before the op is called.
"""
from __future__ import annotations

from typing import Optional, Tuple

import torch
from torch import Tensor

from . import backends, paged, validate
from .launchers.prefill import AttnParams, Varlen


def _varlen(cu_q, cu_k, max_q, max_k):
    return None if cu_q is None else Varlen(cu_q, cu_k, max_q, max_k)


def _check_varlen_values(q, k, varlen):
    """Kernels never see unvalidated input: the cu_seqlens values, which need a host
    read, are checked here rather than in the traced API layer."""
    if varlen is not None:
        validate.cu_seqlens_values("cu_seqlens_q", varlen.cu_seqlens_q, q.shape[0], varlen.max_seqlen_q)
        validate.cu_seqlens_values("cu_seqlens_k", varlen.cu_seqlens_k, k.shape[0], varlen.max_seqlen_k)


@torch.library.custom_op("flashtriton::attn_fwd", mutates_args=())
def attn_fwd(q: Tensor, k: Tensor, v: Tensor,
             cu_seqlens_q: Optional[Tensor], cu_seqlens_k: Optional[Tensor], max_seqlen_q: int, max_seqlen_k: int,
             softmax_scale: float, window_left: int, window_right: int, softcap: float,
             alibi_slopes: Optional[Tensor], dropout_p: float, rng_state: Optional[Tensor],
             backend: str, deterministic: bool = True) -> Tuple[Tensor, Tensor]:
    return _forward(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale, window_left,
                    window_right, softcap, alibi_slopes, dropout_p, rng_state, backend)


@attn_fwd.register_fake
def _(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale, window_left,
      window_right, softcap, alibi_slopes, dropout_p, rng_state, backend, deterministic=True):
    lse_dtype = torch.float64 if q.dtype == torch.float64 else torch.float32
    if cu_seqlens_q is None:
        lse = q.new_empty((q.shape[0], q.shape[2], q.shape[1]), dtype=lse_dtype)
    else:
        lse = q.new_empty((q.shape[1], q.shape[0]), dtype=lse_dtype)
    return torch.empty_like(q, memory_format=torch.contiguous_format), lse


@torch.library.custom_op("flashtriton::attn_bwd", mutates_args=())
def attn_bwd(dout: Tensor, q: Tensor, k: Tensor, v: Tensor, out: Tensor, lse: Tensor,
             cu_seqlens_q: Optional[Tensor], cu_seqlens_k: Optional[Tensor], max_seqlen_q: int, max_seqlen_k: int,
             softmax_scale: float, window_left: int, window_right: int, softcap: float,
             alibi_slopes: Optional[Tensor], dropout_p: float, rng_state: Optional[Tensor],
             backend: str, deterministic: bool = True) -> Tuple[Tensor, Tensor, Tensor]:
    # deterministic=False lets the Triton backend's fused Gluon backward (Hopper,
    # policy.gluon_bwd_fused) reduce dQ in fp32 in any order (flash-attn's meaning: dq's
    # last bits may vary run to run); the forward never depends on it.
    varlen = _varlen(cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k)
    params = AttnParams(softmax_scale, window_left, window_right, softcap, dropout_p, deterministic)
    return backends.get(backend).bwd(dout, q, k, v, out, lse, params, alibi_slopes, rng_state, varlen)


@attn_bwd.register_fake
def _(dout, q, k, v, out, lse, *args):
    return (torch.empty_like(q, memory_format=torch.contiguous_format),
            torch.empty_like(k, memory_format=torch.contiguous_format),
            torch.empty_like(v, memory_format=torch.contiguous_format))


_FWD_ARGS = ("cu_seqlens_q", "cu_seqlens_k", "max_seqlen_q", "max_seqlen_k", "softmax_scale", "window_left",
             "window_right", "softcap", "alibi_slopes", "dropout_p", "rng_state", "backend", "deterministic")


def _setup_context(ctx, inputs, output):
    q, k, v, cu_q, cu_k, max_q, max_k, scale, wl, wr, softcap, alibi, dropout_p, rng, backend, *rest = inputs
    out, lse = output
    # The backward pass has no lse term: lse is returned for inspection (flash-attn's
    # return_attn_probs), so it does not require grad rather than get a silent zero.
    ctx.mark_non_differentiable(lse)
    ctx.save_for_backward(q, k, v, out, lse, cu_q, cu_k, alibi, rng)
    ctx.scalars = (max_q, max_k, scale, wl, wr, softcap, dropout_p)
    ctx.backend = backend
    ctx.deterministic = rest[0] if rest else True


def _backward(ctx, dout, dlse):
    q, k, v, out, lse, cu_q, cu_k, alibi, rng = ctx.saved_tensors
    max_q, max_k, scale, wl, wr, softcap, dropout_p = ctx.scalars
    dq, dk, dv = attn_bwd(dout, q, k, v, out, lse, cu_q, cu_k, max_q, max_k, scale, wl, wr, softcap,
                          alibi, dropout_p, rng, ctx.backend, ctx.deterministic)
    return (dq, dk, dv) + (None,) * len(_FWD_ARGS)


attn_fwd.register_autograd(_backward, setup_context=_setup_context)


class _EagerAttention(torch.autograd.Function):
    """The same forward and backward as the registered ops, without torch.library's
    per-call schema handling (~75 us a call on the CI CPU, measured 2026-11-29: more
    than the kernels themselves at short sequences). Used only for plain eager calls;
    see attention(). Everything but q, k, v comes as one tuple (rest: attn_fwd's
    arguments after v): autograd.Function.apply walks each argument (functorch's
    unwrap_dead_wrappers, ~11 of the ~140 us of host time a forward took on the H200
    machine, bench/gpu/s13_host.py), and none of the others needs a gradient."""

    @staticmethod
    def forward(ctx, q, k, v, rest):
        out, lse = _forward(q, k, v, *rest)
        _setup_context(ctx, (q, k, v) + rest, (out, lse))
        return out, lse

    @staticmethod
    def backward(ctx, dout, dlse):
        q, k, v, out, lse, cu_q, cu_k, alibi, rng = ctx.saved_tensors
        max_q, max_k, scale, wl, wr, softcap, dropout_p = ctx.scalars
        params = AttnParams(scale, wl, wr, softcap, dropout_p, ctx.deterministic)
        dq, dk, dv = backends.get(ctx.backend).bwd(dout, q, k, v, out, lse, params, alibi, rng,
                                                   _varlen(cu_q, cu_k, max_q, max_k))
        return dq, dk, dv, None


def _forward(q, k, v, cu_q, cu_k, max_q, max_k, scale, wl, wr, softcap, alibi, dropout_p, rng, backend,
             deterministic=True):
    """The forward of attn_fwd's arguments, outside torch.library and autograd (the op's
    body too; deterministic only concerns the backward)."""
    varlen = _varlen(cu_q, cu_k, max_q, max_k)
    _check_varlen_values(q, k, varlen)
    params = AttnParams(scale, wl, wr, softcap, dropout_p)
    return backends.get(backend).fwd(q, k, v, params, alibi, rng, varlen)


from torch.utils._python_dispatch import _get_current_dispatch_mode  # noqa: E402

_is_wrapped = torch._C._functorch.is_functorch_wrapped_tensor


def _plain_eager(q, k, v) -> bool:
    """True outside torch.compile, dispatch/function modes and functorch transforms,
    with plain tensors: then nothing needs the op's registration. (q, k, v spelled out,
    and the import at module level: ~1 us of a replayed eager call's host time, CI CPU.)"""
    T = torch.Tensor
    return (type(q) is T and type(k) is T and type(v) is T
            and not torch.compiler.is_compiling() and _get_current_dispatch_mode() is None
            and not torch._C._is_torch_function_mode_enabled()
            and not _is_wrapped(q) and not _is_wrapped(k) and not _is_wrapped(v))


def _function_base_apply():
    """_EagerAttention's autograd node maker without torch.autograd.Function.apply's Python
    wrapper (torch 2.x: it binds default arguments only for a Function with its own
    setup_context, which _EagerAttention has not, and passes the arguments through
    functorch's unwrap_dead_wrappers, a no-op for the plain, unwrapped q, k, v that
    _plain_eager admits and for the `rest` tuple, not a tensor, before
    torch._C._FunctionBase.apply). None (use _EagerAttention.apply) when this torch does
    not look like that. Only taken while no functorch transform is active, as the wrapper."""
    base = getattr(torch._C, "_FunctionBase", None)
    raw = getattr(base, "__dict__", {}).get("apply")
    if raw is None or not hasattr(raw, "__get__"):
        return None
    from torch.autograd import function as _function
    if _function._is_setup_context_defined(_EagerAttention.setup_context):
        return None
    return raw.__get__(None, _EagerAttention)


try:
    _eager_apply = _function_base_apply()
except Exception:  # noqa: BLE001  (another torch: the public apply)
    _eager_apply = None
_transforms_active = torch._C._are_functorch_transforms_active


def attention(q, k, v, cu_q, cu_k, max_q, max_k, scale, wl, wr, softcap, alibi, dropout_p, rng, backend,
              deterministic=True):
    """The forward op with autograd: flashtriton::attn_fwd when traced or under a mode
    (FakeTensor, vmap, ...), the lean eager path otherwise. Both run the same backend.
    deterministic only concerns the backward (see attn_bwd)."""
    args = (q, k, v, cu_q, cu_k, max_q, max_k, scale, wl, wr, softcap, alibi, dropout_p, rng, backend,
            deterministic)
    if _plain_eager(q, k, v):
        if torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad):
            if _eager_apply is not None and not _transforms_active():
                return _eager_apply(q, k, v, args[3:])
            return _EagerAttention.apply(q, k, v, args[3:])
        return _forward(*args)          # nothing to differentiate: no autograd node
    return attn_fwd(*args)


# ---- flash_attn_varlen_func with block_table (paged KV): the forward only --------------------

_PAGED_NO_BACKWARD = ("flash_attn_varlen_func with block_table: the backward pass is not implemented (paged KV is "
                      "forward-only, as in flash-attn); run the call under torch.no_grad() or pass unpaged k, v")


def _forward_paged(q, k_cache, v_cache, block_table, cu_q, cu_k, max_q, max_k, scale, wl, wr, softcap, alibi,
                   backend):
    """The paged forward outside torch.library and autograd: the values of cu_seqlens_q,
    cu_seqlens_k and the used block-table entries are checked here, before any launch."""
    varlen = Varlen(cu_q, cu_k, max_q, max_k)
    validate.cu_seqlens_values("cu_seqlens_q", cu_q, q.shape[0], max_q)
    paged.check_values(cu_k, block_table, k_cache.shape[0], k_cache.shape[1], max_k)
    params = AttnParams(scale, wl, wr, softcap)
    return backends.get(backend).fwd_paged(q, k_cache, v_cache, block_table, params, alibi, varlen)


@torch.library.custom_op("flashtriton::attn_fwd_paged", mutates_args=())
def attn_fwd_paged(q: Tensor, k_cache: Tensor, v_cache: Tensor, block_table: Tensor, cu_seqlens_q: Tensor,
                   cu_seqlens_k: Tensor, max_seqlen_q: int, max_seqlen_k: int, softmax_scale: float,
                   window_left: int, window_right: int, softcap: float, alibi_slopes: Optional[Tensor],
                   backend: str) -> Tuple[Tensor, Tensor]:
    return _forward_paged(q, k_cache, v_cache, block_table, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                          softmax_scale, window_left, window_right, softcap, alibi_slopes, backend)


@attn_fwd_paged.register_fake
def _(q, k_cache, v_cache, block_table, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale,
      window_left, window_right, softcap, alibi_slopes, backend):
    lse_dtype = torch.float64 if q.dtype == torch.float64 else torch.float32
    return (torch.empty_like(q, memory_format=torch.contiguous_format),
            q.new_empty((q.shape[1], q.shape[0]), dtype=lse_dtype))


def _paged_setup_context(ctx, inputs, output):
    ctx.mark_non_differentiable(output[1])


def _paged_backward(ctx, dout, dlse):
    raise NotImplementedError(_PAGED_NO_BACKWARD)


attn_fwd_paged.register_autograd(_paged_backward, setup_context=_paged_setup_context)


class _EagerPaged(torch.autograd.Function):
    """The paged forward with an autograd node whose backward raises (see _PAGED_NO_BACKWARD):
    a model may run it with parameters that require grad; only a backward through it fails."""

    @staticmethod
    def forward(ctx, q, k_cache, v_cache, rest):
        out, lse = _forward_paged(q, k_cache, v_cache, *rest)
        ctx.mark_non_differentiable(lse)
        return out, lse

    @staticmethod
    def backward(ctx, dout, dlse):
        raise NotImplementedError(_PAGED_NO_BACKWARD)


def attention_paged(q, k_cache, v_cache, block_table, cu_q, cu_k, max_q, max_k, scale, wl, wr, softcap, alibi,
                    backend):
    """The paged forward: flashtriton::attn_fwd_paged when traced or under a mode, the lean
    eager path otherwise (as attention())."""
    args = (q, k_cache, v_cache, block_table, cu_q, cu_k, max_q, max_k, scale, wl, wr, softcap, alibi, backend)
    if _plain_eager(q, k_cache, v_cache):
        if torch.is_grad_enabled() and (q.requires_grad or k_cache.requires_grad or v_cache.requires_grad):
            return _EagerPaged.apply(q, k_cache, v_cache, args[3:])
        return _forward_paged(*args)
    return attn_fwd_paged(*args)
