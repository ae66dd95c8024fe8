"""Ragged dense calls on the Gluon VARLEN kernels (session 76).

The dense Gluon kernels (policy.gluon_fwd, gluon_bwd_fused) read whole tiles only: a flash_attn_func batch (B, N, H,
D) whose Nq or Nk is not a multiple of their tiles (a prompt of 1,000 or 2,100 tokens) runs the Triton kernels. The
same batch is B sequences of equal lengths packed, and the packed Gluon kernels (kernels/fwd_gluon.py VARLEN,
kernels/bwd_gluon_fused.py VARLEN) mask each sequence's last block. So where policy.dense_as_varlen allows it and
the packed route's own rule (policy.gluon_fwd_varlen / gluon_bwd_fused_varlen) takes the packed form, the call runs
there:
    q (B, Nq, H, D) -> (B * Nq, H, D) view, k / v likewise, cu_seqlens_q = [0, Nq, 2 Nq, .., B Nq] (int32),
    out (B * Nq, H, D) -> (B, Nq, H, D), lse (H, B * Nq) <-> (B, H, Nq) (a copy of B * H * Nq floats each way).
Same masks: a dense call's causal mask and window are bottom-right aligned per batch row, as a packed sequence's, and
_effective_window sees the same lengths (max_seqlen = Nq, Nk). Not with dropout: the dense and packed keep masks
draw their counters in layouts this route does not reconcile (policy.dense_as_varlen)."""
from __future__ import annotations

import torch

from .common import AttnParams, Varlen, _effective_window
from .policy import dense_as_varlen

# (device, batch, Nq, Nk) -> Varlen; a model calls few shapes, the tables built from cu_seqlens_q are remembered
# on that tensor (launchers/common._cached_map), so reusing it keeps them.
_VARLEN: dict = {}
_VARLEN_MAX = 256


def packed_varlen(batch: int, seqlen_q: int, seqlen_k: int, device) -> Varlen:
    """The Varlen of B equal sequences: cu_seqlens (B + 1,) int32 on device. Remembered by shape, except while a
    CUDA graph is captured (the arange would only be recorded then: the tensor would hold garbage outside it)."""
    def make():
        cu_q = torch.arange(0, (batch + 1) * seqlen_q, seqlen_q, dtype=torch.int32, device=device)
        cu_k = cu_q if seqlen_k == seqlen_q else \
            torch.arange(0, (batch + 1) * seqlen_k, seqlen_k, dtype=torch.int32, device=device)
        return Varlen(cu_q, cu_k, seqlen_q, seqlen_k)
    device = torch.device(device)
    if device.type == "cuda" and torch.cuda.is_current_stream_capturing():
        return make()
    key = (device, batch, seqlen_q, seqlen_k)
    varlen = _VARLEN.get(key)
    if varlen is None:
        if len(_VARLEN) >= _VARLEN_MAX:
            _VARLEN.clear()
        varlen = _VARLEN[key] = make()
    return varlen


def _packed(x: torch.Tensor) -> torch.Tensor:
    """(B, N, heads, D) -> (B * N, heads, D), a view where the strides allow it (rows_view_ok's layouts do)."""
    b, n, h, d = x.shape
    return x.reshape(b * n, h, d)


def lse_to_dense(lse: torch.Tensor, batch: int) -> torch.Tensor:
    """(H, B * Nq) -> (B, H, Nq), contiguous."""
    h, total = lse.shape
    return lse.view(h, batch, total // batch).transpose(0, 1).contiguous()


def lse_to_packed(lse: torch.Tensor) -> torch.Tensor:
    """(B, H, Nq) -> (H, B * Nq), contiguous."""
    b, h, n = lse.shape
    return lse.transpose(0, 1).reshape(h, b * n).contiguous()


def fwd(q, k, v, params: AttnParams, alibi, packed_route):
    """(out (B, Nq, H, D), lse (B, H, Nq)) from the Gluon VARLEN forward, or None where the route does not apply
    (then the caller runs the dense launchers). packed_route(q, k, v, params, alibi, rng, varlen):
    launchers/forward's packed Gluon route (policy.gluon_fwd_varlen's rule, then the kernel), None where that rule
    declines the call."""
    batch, seqlen_q = q.shape[:2]
    seqlen_k = k.shape[1]
    if not dense_as_varlen("fwd", q, _effective_window(params, seqlen_q, seqlen_k), seqlen_q, seqlen_k):
        return None
    varlen = packed_varlen(batch, seqlen_q, seqlen_k, q.device)
    routed = packed_route(_packed(q), _packed(k), _packed(v), params, alibi, None, varlen)
    if routed is None:
        return None
    out, lse = routed
    return out.view(q.shape), lse_to_dense(lse, batch)


def bwd(dout, q, k, v, out, lse, params: AttnParams, alibi, rng, packed_route):
    """(dq, dk, dv) shaped like q, k, v from the fused Gluon VARLEN backward, or None where the route does not
    apply. packed_route(dout, q, k, v, out, lse, params, alibi, rng, varlen): launchers/backward's fused packed
    route (policy.gluon_bwd_fused_varlen's rule, then its launch plan), None where that rule declines the call."""
    batch, seqlen_q = q.shape[:2]
    seqlen_k = k.shape[1]
    if not dense_as_varlen("bwd", q, _effective_window(params, seqlen_q, seqlen_k), seqlen_q, seqlen_k):
        return None
    varlen = packed_varlen(batch, seqlen_q, seqlen_k, q.device)
    grads = packed_route(_packed(dout), _packed(q), _packed(k), _packed(v), _packed(out), lse_to_packed(lse),
                         params, alibi, rng, varlen)
    if grads is None:
        return None
    dq, dk, dv = grads
    return dq.view(q.shape), dk.view(k.shape), dv.view(v.shape)
