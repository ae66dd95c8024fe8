"""Inputs and the error criterion shared by the tests.

Criterion (flash-attn's): the error of the kernel against a float64 reference is at
most `factor` times the error of the same computation done by plain PyTorch in the
input dtype, plus a tiny absolute floor. factor = 2 for outputs, 3 for gradients.
"""
import torch

from flashtriton import reference

ATOL_FLOOR = {torch.float16: 2e-5, torch.bfloat16: 1e-4, torch.float32: 1e-6}


def rand_qkv(batch, seqlen_q, seqlen_k, nheads, nheads_k, head_dim, dtype, device, requires_grad=False):
    """Fresh random normal inputs (never zeros)."""
    q = torch.randn(batch, seqlen_q, nheads, head_dim, dtype=dtype, device=device)
    k = torch.randn(batch, seqlen_k, nheads_k, head_dim, dtype=dtype, device=device)
    v = torch.randn(batch, seqlen_k, nheads_k, head_dim, dtype=dtype, device=device)
    return [t.requires_grad_(requires_grad) for t in (q, k, v)]


def max_err(a, b):
    a, b = a.double(), b.double()
    finite = torch.isfinite(b)
    if not torch.equal(torch.isfinite(a), finite):
        return float("inf")  # NaN or inf where the reference is finite (or the reverse)
    if not finite.any():
        return 0.0
    return (a[finite] - b[finite]).abs().max().item()


def assert_close(name, ours, ref64, ref_lowp, factor, dtype):
    err = max_err(ours, ref64)
    base = max_err(ref_lowp, ref64)
    assert err <= factor * base + ATOL_FLOOR[dtype], (
        f"{name}: error {err:.3e} exceeds {factor} x PyTorch's same-dtype error {base:.3e} (+{ATOL_FLOOR[dtype]:.0e})")


def reference_pair(q, k, v, dout=None, varlen=None, **kw):
    """(float64 truth, same-dtype PyTorch math): each a dict with out, lse and, when
    dout is given, dq, dk, dv."""
    res = []
    for cast in (torch.float64, q.dtype):
        args = [t.detach().to(cast) for t in (q, k, v)]
        if varlen is None:
            out, lse = reference.attention(*args, **kw)
        else:
            out, lse = reference.attention_varlen(*args, *varlen, **kw)
        r = dict(out=out, lse=lse)
        if dout is not None:
            r["dq"], r["dk"], r["dv"] = reference.attention_grad(dout.to(cast), *args, varlen_args=varlen, **kw)
        res.append(r)
    return res
