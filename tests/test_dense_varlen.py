"""Ragged dense calls on the packed Gluon kernels (session 76): launchers/dense_varlen.py, rule
launchers.policy.dense_as_varlen (DENSE_AS_VARLEN).

CPU: the rule (ragged lengths only, no dropout, never on CPU tensors or under the interpreter), the lse layouts'
round trip, the packed Varlen of B equal sequences, and the route's glue (views, cu_seqlens, lse layouts) with the
packed Triton launchers standing in for the Gluon ones, against the dense launchers. GPU (Hopper): flash_attn_func
on ragged batches against float64 with the repo criterion (out, lse, dq / dk / dv, the probabilities; outputs
poisoned first, conftest), causal with Nq < Nk and Nq > Nk (rows that see no key), a window (left, 0), GQA,
D = 64 / 128, bf16 / fp16; the routes taken (spies); bitwise the explicit packed call; forward bitwise repeatable;
aligned, dropout and deterministic calls keep the dense routes.
"""
import pytest
import torch

import flashtriton
from flashtriton.launchers import backward_gluon_varlen, dense_varlen, forward_gluon, policy
from flashtriton.launchers.common import AttnParams

from conftest import DEVICE
from helpers import check_attention, rand_qkv, spy
from test_fwd_gluon import hopper


# ---------------------------------------------------------------------------------------
# CPU
# ---------------------------------------------------------------------------------------
class _Cuda4D:
    """A stand-in for a bf16 CUDA q of the given shape (the rule reads dim(), is_cuda, dtype and shape only)."""
    is_cuda = True

    def __init__(self, *shape, dtype=torch.bfloat16):
        self.shape, self.dtype = shape, dtype

    def dim(self):
        return len(self.shape)


ALL_ON = {kernel: {kind: {128: 1, 64: 1} for kind in ("plain", "causal", "window")} for kernel in ("fwd", "bwd")}


@pytest.mark.parametrize("kernel", ["fwd", "bwd"])
def test_dense_as_varlen_rule(monkeypatch, kernel):
    monkeypatch.setattr(policy, "interpreting", lambda: False)
    monkeypatch.setattr(policy, "DENSE_AS_VARLEN", ALL_ON)
    p = AttnParams(0.1)
    rule = policy.dense_as_varlen
    q = _Cuda4D(2, 1000, 4, 128)
    assert rule(kernel, q, p, 1000, 1000)                 # ragged both
    assert rule(kernel, q, p, 2048, 2100)                 # ragged keys only
    assert rule(kernel, q, p, 1000, 2048)                 # ragged queries only
    assert rule(kernel, q, AttnParams(0.1, window_left=300, window_right=0), 1000, 1000)
    assert not rule(kernel, q, p, 2048, 2048)             # aligned: the dense routes
    assert not rule(kernel, q, AttnParams(0.1, dropout_p=0.1), 1000, 1000)
    assert not rule(kernel, q, p, 0, 1000) and not rule(kernel, q, p, 1000, 0)
    assert not rule(kernel, _Cuda4D(2, 1000, 4, 96), p, 1000, 1000)     # no packed Gluon kernel at D = 96
    assert not rule(kernel, _Cuda4D(2, 1000, 4, 256), p, 1000, 1000)
    assert not rule(kernel, _Cuda4D(2000, 4, 128), p, 1000, 1000)       # packed q: not a dense call
    assert rule(kernel, _Cuda4D(2, 1000, 4, 128, dtype=torch.float16), p, 1000, 1000)
    assert not rule(kernel, _Cuda4D(2, 1000, 4, 128, dtype=torch.float32), p, 1000, 1000)


def test_dense_as_varlen_default_table(monkeypatch):
    """The measured table (policy.DENSE_AS_VARLEN, session 76): D = 128 forward plain / causal from 1000, D = 64
    forward plain only from 2100; the backward D = 128 plain from 1000, causal from 700, D = 64 from 2100; windows
    (left, 0) at D = 128 (session 80's width sweep): the forward from N 4000 and left 2048, the backward from N 2100
    and left 512; at D = 64 (session 81's) the backward only, from N 4000 and left 512; no right edges."""
    monkeypatch.setattr(policy, "interpreting", lambda: False)
    rule, p, causal = policy.dense_as_varlen, AttnParams(0.1), AttnParams(0.1, window_right=0)
    window = AttnParams(0.1, window_left=300, window_right=0)
    q128, q64 = _Cuda4D(1, 1000, 4, 128), _Cuda4D(1, 1000, 4, 64)
    assert rule("fwd", q128, p, 1000, 1000) and rule("fwd", q128, causal, 1000, 1000)
    assert not rule("fwd", q128, causal, 999, 4000) and not rule("fwd", q128, causal, 700, 700)
    assert rule("bwd", q128, causal, 700, 700) and not rule("bwd", q128, p, 700, 700)
    assert rule("fwd", q64, p, 2100, 2100) and not rule("fwd", q64, causal, 2100, 2100)
    assert rule("bwd", q64, causal, 2100, 2100) and not rule("bwd", q64, p, 1100, 1100)
    assert not rule("fwd", q128, window, 2100, 2100) and not rule("bwd", q128, window, 2100, 2100)
    w = {left: AttnParams(0.1, window_left=left, window_right=0) for left in (511, 512, 2047, 2048)}
    assert rule("fwd", q128, w[2048], 4000, 4000) and not rule("fwd", q128, w[2047], 8000, 8000)
    assert not rule("fwd", q128, w[2048], 3999, 3999)
    assert rule("bwd", q128, w[512], 2100, 2100) and not rule("bwd", q128, w[511], 2100, 2100)
    assert not rule("bwd", q128, w[512], 2099, 2099)
    assert not rule("bwd", q128, AttnParams(0.1, window_left=1024, window_right=16), 4000, 4000)
    assert not rule("fwd", q64, w[2048], 4000, 4000) and not rule("fwd", q64, w[2048], 8000, 8000)
    assert rule("bwd", q64, w[512], 4000, 4000) and rule("bwd", q64, w[2048], 8000, 8001)
    assert not rule("bwd", q64, w[511], 4000, 4000) and not rule("bwd", q64, w[512], 3999, 3999)
    assert not rule("bwd", q64, AttnParams(0.1, window_left=1024, window_right=16), 4000, 4000)


@pytest.mark.parametrize("kernel", ["fwd", "bwd"])
def test_dense_as_varlen_window_width_entry(monkeypatch, kernel):
    """A window's entry (shortest, narrowest) takes windows (left, 0) with left >= narrowest at min(Nq, Nk) >=
    shortest only: not narrower bands, not right edges, not shorter sequences; causal and plain calls keep their own
    entries (none here)."""
    monkeypatch.setattr(policy, "interpreting", lambda: False)
    monkeypatch.setattr(policy, "DENSE_AS_VARLEN", {kernel: {"window": {128: (4000, 1024)}}})
    rule, q = policy.dense_as_varlen, _Cuda4D(1, 4000, 4, 128)

    def window(left, right=0):
        return AttnParams(0.1, window_left=left, window_right=right)
    assert rule(kernel, q, window(1024), 4000, 4000) and rule(kernel, q, window(3000), 8000, 8100)
    assert not rule(kernel, q, window(1023), 4000, 4000)                 # narrower than the entry
    assert not rule(kernel, q, window(1024), 3999, 4000)                 # shorter than the entry
    assert not rule(kernel, q, window(1024, 5), 4000, 4000)              # a right edge: not measured
    assert not rule(kernel, q, window(-1, 1024), 4000, 4000)
    assert not rule(kernel, q, AttnParams(0.1, window_right=0), 4000, 4000)   # causal: its own entry
    assert not rule(kernel, _Cuda4D(1, 4000, 4, 64), window(2048), 4000, 4000)


def test_dense_as_varlen_rule_backward_tiles(monkeypatch):
    """The backward's tiles are the fused kernel's (64 query rows): Nq = 1088 is aligned there, not in the forward."""
    monkeypatch.setattr(policy, "interpreting", lambda: False)
    q, p = _Cuda4D(1, 1088, 4, 128), AttnParams(0.1)
    assert policy.dense_as_varlen("fwd", q, p, 1088, 2048)
    assert not policy.dense_as_varlen("bwd", q, p, 1088, 2048)


def test_dense_as_varlen_never_on_cpu_or_interpreted(monkeypatch):
    q = torch.randn(1, 1000, 2, 128)
    assert not policy.dense_as_varlen("fwd", q, AttnParams(0.1), 1000, 1000)       # a CPU tensor
    monkeypatch.setattr(policy, "interpreting", lambda: True)
    assert not policy.dense_as_varlen("fwd", _Cuda4D(1, 1000, 2, 128), AttnParams(0.1), 1000, 1000)
    monkeypatch.setattr(policy, "interpreting", lambda: False)
    assert policy.dense_as_varlen("fwd", _Cuda4D(1, 1000, 2, 128), AttnParams(0.1), 1000, 1000)


def test_lse_layouts_round_trip():
    lse = torch.randn(3, 4, 17)                                   # (B, H, Nq)
    packed = dense_varlen.lse_to_packed(lse)
    assert packed.shape == (4, 51) and packed.is_contiguous()
    assert torch.equal(packed[:, 17:34], lse[1])                  # sequence 1's rows, every head
    back = dense_varlen.lse_to_dense(packed, 3)
    assert back.is_contiguous() and torch.equal(back, lse)


def test_packed_varlen_of_equal_sequences():
    v = dense_varlen.packed_varlen(3, 5, 7, "cpu")
    assert v.cu_seqlens_q.dtype == torch.int32 and v.cu_seqlens_q.tolist() == [0, 5, 10, 15]
    assert v.cu_seqlens_k.tolist() == [0, 7, 14, 21] and (v.max_seqlen_q, v.max_seqlen_k) == (5, 7)
    assert dense_varlen.packed_varlen(3, 5, 7, "cpu") is v        # remembered: its SCHED tables stay cached
    same = dense_varlen.packed_varlen(2, 9, 9, "cpu")
    assert same.cu_seqlens_k is same.cu_seqlens_q


@pytest.mark.skipif(DEVICE != "cpu", reason="the glue check: the packed route stood in by the Triton varlen path")
@pytest.mark.parametrize("causal", [False, True])
def test_dense_varlen_glue_matches_the_dense_launchers(monkeypatch, causal):
    """dense_varlen.fwd / bwd's views, cu_seqlens and lse layouts, with the packed Gluon route replaced by the packed
    Triton launchers (the interpreter: the Gluon kernels have no interpreted form) and the rule forced: the results
    equal the dense launchers' on the same ragged batch (GQA, Nq != Nk)."""
    from flashtriton.launchers import backward, forward

    def packed_fwd(q, k, v, params, alibi, rng, varlen):
        return forward.fwd(q, k, v, params, alibi, rng, varlen)

    def packed_bwd(dout, q, k, v, out, lse, params, alibi, rng, varlen):
        return backward.bwd(dout, q, k, v, out, lse, params, alibi, rng, varlen)

    monkeypatch.setattr(dense_varlen, "dense_as_varlen", lambda *a: True)
    params = AttnParams(0.2, window_right=0 if causal else -1, deterministic=True)
    q, k, v = rand_qkv(2, 17, 23, 4, 2, 32, torch.float32, DEVICE)
    dout = torch.randn_like(q)
    out, lse = dense_varlen.fwd(q, k, v, params, None, packed_fwd)
    want_out, want_lse = forward.fwd(q, k, v, params)
    assert out.shape == q.shape and lse.shape == (2, 4, 17) and lse.is_contiguous()
    torch.testing.assert_close(out, want_out, rtol=0, atol=1e-6)
    torch.testing.assert_close(lse, want_lse, rtol=0, atol=1e-6)
    grads = dense_varlen.bwd(dout, q, k, v, out, lse, params, None, None, packed_bwd)
    for g, w, t in zip(grads, backward.bwd(dout, q, k, v, want_out, want_lse, params), (q, k, v)):
        assert g.shape == t.shape
        torch.testing.assert_close(g, w, rtol=0, atol=1e-5)


# ---------------------------------------------------------------------------------------
# GPU
# ---------------------------------------------------------------------------------------
CASES = [
    # B, Nq, Nk, (H, Hk), D, mask: "plain", "causal" or a window (left, 0)
    (2, 1000, 1000, (4, 2), 128, "plain"),
    (2, 1000, 1000, (4, 2), 128, "causal"),
    (1, 700, 1500, (4, 1), 128, "causal"),           # Nq < Nk
    (2, 1500, 700, (4, 4), 128, "causal"),           # Nq > Nk: rows that see no key (O = 0, lse = +inf)
    (1, 2048, 2100, (2, 1), 128, "plain"),           # aligned queries, ragged keys
    (1, 2100, 2100, (4, 2), 128, (300, 0)),          # the packed WINDOW variants (backward from 1706)
    (2, 1100, 1100, (4, 2), 64, "plain"),
    (1, 1500, 3000, (4, 2), 64, "causal"),
]


def _mask_kw(mask):
    if mask == "plain":
        return dict(causal=False)
    if mask == "causal":
        return dict(causal=True)
    return dict(window_size=mask)


@pytest.fixture
def routes(monkeypatch):
    """Every ragged D = 64 / 128 call routed (policy.DENSE_AS_VARLEN's lengths lowered to 1, windows listed); the
    packed routes' calls: (forward, backward)."""
    monkeypatch.setattr(policy, "DENSE_AS_VARLEN", ALL_ON)
    return (spy(monkeypatch, forward_gluon, "fwd_varlen"),
            spy(monkeypatch, backward_gluon_varlen, "fused_varlen_into"))


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("b,nq,nk,heads,d,mask", CASES)
def test_dense_ragged_matches_reference_gpu(routes, dtype, b, nq, nk, heads, d, mask):
    q, k, v = rand_qkv(b, nq, nk, *heads, d, dtype, DEVICE)
    check_attention("triton", q, k, v, **_mask_kw(mask))
    assert len(routes[0]) == 1, "the forward did not take the packed Gluon kernel"
    assert len(routes[1]) == 1, "the backward did not take the fused packed Gluon kernel"


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("mask", ["plain", "causal", (300, 0)])
def test_dense_ragged_is_the_packed_call_gpu(routes, mask):
    """Bitwise the explicit flash_attn_varlen_func on the same rows (dq to summation order: the fused kernel's
    reduce-adds arrive in any order), and the forward bitwise repeatable."""
    b, n, h, hk, d = 2, 2100, 4, 2, 128
    q, k, v = rand_qkv(b, n, n, h, hk, d, torch.bfloat16, DEVICE, requires_grad=True)
    dout = torch.randn_like(q)
    out, lse, _ = flashtriton.flash_attn_func(q, k, v, return_attn_probs=True, **_mask_kw(mask))
    dq, dk, dv = torch.autograd.grad(out, (q, k, v), dout)
    again = flashtriton.flash_attn_func(q, k, v, **_mask_kw(mask))
    assert torch.equal(out, again)
    qp, kp, vp = (t.detach().reshape(b * n, -1, d).requires_grad_() for t in (q, k, v))
    cu = torch.arange(0, (b + 1) * n, n, dtype=torch.int32, device=DEVICE)
    out_p, lse_p, _ = flashtriton.flash_attn_varlen_func(qp, kp, vp, cu, cu, n, n, return_attn_probs=True,
                                                         **_mask_kw(mask))
    dq_p, dk_p, dv_p = torch.autograd.grad(out_p, (qp, kp, vp), dout.reshape(b * n, h, d))
    assert len(routes[0]) == 3 and len(routes[1]) == 2
    assert torch.equal(out.reshape(b * n, h, d), out_p)
    assert torch.equal(lse, lse_p.view(h, b, n).transpose(0, 1))
    assert torch.equal(dk.reshape(b * n, hk, d), dk_p) and torch.equal(dv.reshape(b * n, hk, d), dv_p)
    torch.testing.assert_close(dq.reshape(b * n, h, d), dq_p, rtol=1e-2, atol=1e-3)


@pytest.mark.gpu
@hopper
def test_dense_aligned_dropout_and_deterministic_keep_their_routes_gpu(routes):
    q, k, v = rand_qkv(1, 2048, 2048, 4, 2, 128, torch.bfloat16, DEVICE, requires_grad=True)
    flashtriton.flash_attn_func(q, k, v, causal=True).sum().backward()          # aligned: the dense Gluon kernels
    assert routes == ([], [])
    q, k, v = rand_qkv(1, 1000, 1000, 4, 2, 128, torch.bfloat16, DEVICE, requires_grad=True)
    flashtriton.flash_attn_func(q, k, v, dropout_p=0.1).sum().backward()        # dropout: not reconciled
    assert routes == ([], [])
    flashtriton.flash_attn_func(q, k, v, deterministic=True).sum().backward()   # the forward only
    assert len(routes[0]) == 1 and routes[1] == []


@pytest.mark.gpu
@hopper
def test_dense_route_by_default_gpu(monkeypatch):
    """The default table: a ragged D = 128 call of 1000 tokens takes both packed kernels; a causal one of 700 only the
    backward (its forward measured 0.77x there); a window (512, 0) of 2100 only the backward (session 80's sweep); at
    D = 64 a window (512, 0) of 4000 only the backward (session 81's)."""
    fwd_calls = spy(monkeypatch, forward_gluon, "fwd_varlen")
    bwd_calls = spy(monkeypatch, backward_gluon_varlen, "fused_varlen_into")
    q, k, v = rand_qkv(2, 1000, 1000, 4, 2, 128, torch.bfloat16, DEVICE, requires_grad=True)
    flashtriton.flash_attn_func(q, k, v).sum().backward()
    assert (len(fwd_calls), len(bwd_calls)) == (1, 1)
    q, k, v = rand_qkv(2, 700, 700, 4, 2, 128, torch.bfloat16, DEVICE, requires_grad=True)
    flashtriton.flash_attn_func(q, k, v, causal=True).sum().backward()
    assert (len(fwd_calls), len(bwd_calls)) == (1, 2)
    q, k, v = rand_qkv(1, 2100, 2100, 4, 2, 128, torch.bfloat16, DEVICE, requires_grad=True)
    flashtriton.flash_attn_func(q, k, v, window_size=(512, 0)).sum().backward()
    assert (len(fwd_calls), len(bwd_calls)) == (1, 3)
    q, k, v = rand_qkv(1, 4000, 4000, 4, 2, 64, torch.bfloat16, DEVICE, requires_grad=True)
    flashtriton.flash_attn_func(q, k, v, window_size=(512, 0)).sum().backward()
    assert (len(fwd_calls), len(bwd_calls)) == (1, 4)
