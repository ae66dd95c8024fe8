"""kernels/bwd_gluon.py: the hand-scheduled Gluon dK/dV pass of the backward, and
kernels/bwd_gluon_fused.py: the fused backward (dQ too, reduce-added in fp32 by TMA; its
dq is non-deterministic) (host side launchers/backward_gluon.py; not routed into the library). Its kernel needs a Hopper GPU:
Gluon kernels do not run under the Triton interpreter, so the numeric tests are GPU-only
(sm_90) and skip under TRITON_INTERPRET=1; the launcher's validation needs no GPU and runs
everywhere.

Criterion (tests/helpers.py, the library's gradient criterion): dK and dV against float64
at most 3x PyTorch's same-dtype error, outputs poisoned (NaN) before the call by the
autouse fixture (memory.empty). The kernel's inputs: out and lse from the float64
reference (lse as fp32: +inf for rows that see no key), out cast to the dtype, and delta =
rowsum(dO * O) by the library's own preprocess kernel (backward_gluon.delta_of).
"""
import math
import os

import pytest
import torch

from flashtriton import reference
from flashtriton.kernels import bwd_gluon
from flashtriton.launchers import backward_gluon
from flashtriton.kernels import bwd_gluon_fused
from flashtriton.launchers.backward_gluon import dkdv_gluon, fused_gluon, prepare_dkdv, prepare_fused

from conftest import DEVICE, HAS_CUDA
from helpers import assert_close, rand_qkv

IS_HOPPER = HAS_CUDA and torch.cuda.get_device_capability()[0] == 9
INTERPRETING = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")
hopper = pytest.mark.skipif(not IS_HOPPER or INTERPRETING,
                            reason="needs a Hopper GPU (compute capability 9.x), not the interpreter")


def inputs(b, nq, nk, h, hk, d, dtype, causal=False, scale=None):
    """Fresh random q, k, v, dout and the kernel's other inputs: (q, k, v, dout, lse, delta,
    scale, truth, lowp) with truth / lowp the float64 / same-dtype reference gradients."""
    q, k, v = rand_qkv(b, nq, nk, h, hk, d, dtype, "cuda")
    dout = torch.randn_like(q)
    scale = d ** -0.5 if scale is None else scale
    kw = dict(softmax_scale=scale, window_right=0 if causal else -1)
    out64, lse64 = reference.attention(*(t.double() for t in (q, k, v)), **kw)
    lse = lse64.float().contiguous()
    delta = backward_gluon.delta_of(out64.to(dtype), dout)
    truth = reference.attention_grad(dout.double(), *(t.double() for t in (q, k, v)), **kw)
    lowp = reference.attention_grad(dout, q, k, v, **kw)
    return q, k, v, dout, lse, delta, scale, truth, lowp


def check(b, nq, nk, h, hk, d, dtype, causal=False, scale=None, **kw):
    q, k, v, dout, lse, delta, scale, truth, lowp = inputs(b, nq, nk, h, hk, d, dtype, causal, scale)
    dk, dv = dkdv_gluon(q, k, v, dout, lse, delta, scale, causal, **kw)
    assert dk.shape == k.shape and dv.shape == v.shape and dk.dtype == k.dtype and dv.dtype == v.dtype
    assert torch.isfinite(dk).all() and torch.isfinite(dv).all(), "unwritten (NaN-poisoned) or non-finite output"
    assert_close("dk", dk, truth[1], lowp[1], 3, dtype)
    assert_close("dv", dv, truth[2], lowp[2], 3, dtype)
    return dk, dv


# ---------------------------------------------------------------------------------------
# GPU (Hopper): numerics
# ---------------------------------------------------------------------------------------
@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("d", [128, 64])
@pytest.mark.parametrize("h, hk", [(4, 4), (8, 2)])
@pytest.mark.parametrize("n", [128, 1024])
def test_matches_reference_gpu(dtype, d, h, hk, n):
    check(2, n, n, h, hk, d, dtype)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("d", [128, 64])
@pytest.mark.parametrize("h, hk", [(4, 4), (8, 2)])
@pytest.mark.parametrize("nq, nk", [(256, 1024), (1024, 256), (64, 128), (192, 384)])
def test_nq_differs_from_nk_gpu(d, h, hk, nq, nk):
    check(2, nq, nk, h, hk, d, torch.bfloat16)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("num_stages", [1, 2, 3, 4])
def test_stages_gpu(num_stages):
    """Ring depths from 1 (every tile waits for the previous one's release) up: the phases
    wrap at every depth (group x tiles = 2 x 16 ring tiles)."""
    check(1, 1024, 256, 4, 2, 128, torch.bfloat16, num_stages=num_stages)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("d", [128, 64])
@pytest.mark.parametrize("nq, nk", [(1024, 1024), (256, 1024), (1024, 256)])
def test_tma_vectors_gpu(causal, d, nq, nk):
    """vec_ptr=False: lse / delta through the ring by 1-D TMA (the default reads them by
    pointer loads); GQA, both orders of Nq and Nk."""
    check(2, nq, nk, 8, 2, d, torch.bfloat16, causal=causal, vec_ptr=False)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("vec_ptr", [True, False])
@pytest.mark.parametrize("num_stages", [2, 3, 4])
@pytest.mark.parametrize("nq, nk, h, hk", [(1024, 1024, 8, 2), (256, 1024, 4, 4), (64, 128, 2, 1)])
def test_overlap_gpu(vec_ptr, num_stages, nq, nk, h, hk):
    """overlap=True (D = 64, its target): tile g's dV / dK wgmmas retire under tile g + 1's
    S^T / dP^T and stage g is released there; a single tile (Nq = 64) only by the final wait."""
    check(2, nq, nk, h, hk, 64, torch.bfloat16, vec_ptr=vec_ptr, num_stages=num_stages, overlap=True)


@pytest.mark.gpu
@hopper
def test_overlap_d128_gpu():
    """overlap=True at D = 128 (ptxas serializes its wgmmas: slow, but right)."""
    check(2, 512, 512, 4, 2, 128, torch.float16, overlap=True)


@pytest.mark.gpu
@hopper
def test_negative_and_large_scale_gpu():
    check(1, 512, 1024, 4, 4, 128, torch.bfloat16, scale=-0.1)
    check(1, 512, 1024, 4, 4, 128, torch.bfloat16, scale=0.5)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_repeatable_gpu(causal, dtype):
    """Bitwise the same dk / dv from two launches of one prepare (fresh barriers every
    launch) and from a second prepare."""
    q, k, v, dout, lse, delta, scale, _, _ = inputs(2, 1024, 1024, 8, 2, 128, dtype, causal)
    launch = prepare_dkdv(q, k, v, dout, lse, delta, scale, causal)
    dk1, dv1 = (t.clone() for t in launch())
    dk2, dv2 = launch()
    dk3, dv3 = dkdv_gluon(q, k, v, dout, lse, delta, scale, causal)
    assert torch.equal(dk1, dk2) and torch.equal(dv1, dv2)
    assert torch.equal(dk1, dk3) and torch.equal(dv1, dv3)
    # the other ways of reading lse / delta and of scheduling compute the same sums in the
    # same order (expected bitwise equal; held to a few 16-bit ulps, as ptxas may contract
    # a multiply-add differently in another kernel)
    others = [dkdv_gluon(q, k, v, dout, lse, delta, scale, causal, vec_ptr=False)]
    if not causal:
        others.append(dkdv_gluon(q, k, v, dout, lse, delta, scale, causal, overlap=True))
    for dk4, dv4 in others:
        for ours, ref in ((dk4, dk1), (dv4, dv1)):
            diff = (ours.float() - ref.float()).abs().max().item()
            assert diff <= 1e-2 * ref.float().abs().max().item(), diff


@pytest.mark.gpu
@hopper
def test_strided_inputs_gpu():
    """q / k / v views of a packed qkv (heads contiguous: the descriptor view without a
    copy), a (B, H, N, D) dout (copied by the launcher), lse / delta non-contiguous."""
    b, n, h, d = 2, 512, 4, 128
    qkv = torch.randn(b, n, 3, h, d, dtype=torch.bfloat16, device="cuda")
    q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]
    dout = torch.randn(b, h, n, d, dtype=torch.bfloat16, device="cuda").transpose(1, 2)
    kw = dict(softmax_scale=d ** -0.5)
    out64, lse64 = reference.attention(*(t.double() for t in (q, k, v)), **kw)
    lse = lse64.float().transpose(1, 2).contiguous().transpose(1, 2)
    delta = backward_gluon.delta_of(out64.to(q.dtype), dout).transpose(1, 2).contiguous().transpose(1, 2)
    assert not lse.is_contiguous()
    dk, dv = dkdv_gluon(q, k, v, dout, lse, delta, d ** -0.5)
    truth = reference.attention_grad(dout.double(), *(t.double() for t in (q, k, v)), **kw)
    lowp = reference.attention_grad(dout, q, k, v, **kw)
    assert_close("dk", dk, truth[1], lowp[1], 3, q.dtype)
    assert_close("dv", dv, truth[2], lowp[2], 3, q.dtype)


@pytest.mark.gpu
@hopper
def test_against_library_backward_gpu():
    """The library's own forward lse / out and its deterministic backward's dk / dv
    (flash_attn_func; the default would take the fused Gluon kernel): the same criterion,
    and close to the library's gradients."""
    import flashtriton

    q, k, v = rand_qkv(2, 1024, 1024, 8, 2, 128, torch.bfloat16, "cuda", requires_grad=True)
    out, lse, _ = flashtriton.flash_attn_func(q, k, v, return_attn_probs=True, deterministic=True)
    dout = torch.randn_like(out)
    _, dk_lib, dv_lib = torch.autograd.grad(out, (q, k, v), dout)
    delta = backward_gluon.delta_of(out.detach(), dout)
    dk, dv = dkdv_gluon(q.detach(), k.detach(), v.detach(), dout, lse.detach().float().contiguous(), delta,
                        128 ** -0.5)
    truth = reference.attention_grad(dout.double(), *(t.detach().double() for t in (q, k, v)),
                                     softmax_scale=128 ** -0.5)
    lowp = reference.attention_grad(dout, *(t.detach() for t in (q, k, v)), softmax_scale=128 ** -0.5)
    assert_close("dk", dk, truth[1], lowp[1], 3, q.dtype)
    assert_close("dv", dv, truth[2], lowp[2], 3, q.dtype)
    # within 3x the library's own error against float64 (both are fp32-accumulating tiles
    # on the same lse and delta)
    assert_close("dk vs library", dk, truth[1], dk_lib, 3, q.dtype)
    assert_close("dv vs library", dv, truth[2], dv_lib, 3, q.dtype)


# ---------------------------------------------------------------------------------------
# GPU (Hopper): causal (bottom-right; per warpgroup hidden tiles released unread, the
# diagonal tile masked, the rest unmasked)
# ---------------------------------------------------------------------------------------
@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("d", [128, 64])
@pytest.mark.parametrize("h, hk", [(4, 4), (8, 2)])
@pytest.mark.parametrize("nq, nk", [(128, 128), (1024, 1024), (256, 1024), (1024, 256), (192, 384)])
def test_causal_matches_reference_gpu(dtype, d, h, hk, nq, nk):
    check(2, nq, nk, h, hk, d, dtype, causal=True)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("d", [128, 64])
@pytest.mark.parametrize("nq, nk", [(2048, 1024), (1024, 128), (384, 128)])
def test_causal_rows_without_keys_gpu(d, nq, nk):
    """Nq > Nk: the first Nq - Nk query rows see no key (lse = +inf): they add nothing, and
    key blocks whose first visible query tile lies deep in the sequence skip the rest."""
    check(2, nq, nk, 4, 2, d, torch.bfloat16, causal=True)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("num_stages", [1, 2])
def test_causal_stages_gpu(num_stages):
    check(2, 1024, 1536, 8, 2, 128, torch.bfloat16, causal=True, num_stages=num_stages)


def test_regression_dkdv_causal_d128_three_stages_refused():
    """First GPU run (2026-12-01): 3 stages, causal, D = 128 gave dk off by 0.94 (PyTorch's
    error 0.011); refused before any launch since."""
    q, k, v = (torch.randn(1, 256, 2, 128, dtype=torch.bfloat16) for _ in range(3))
    lse = torch.randn(1, 2, 256)
    with pytest.raises(ValueError, match="num_stages: 3 stages with causal=True at D = 128"):
        dkdv_gluon(q, k, v, torch.randn_like(q), lse, lse.clone(), 0.1, True, num_stages=3)


@pytest.mark.gpu
@hopper
def test_causal_negative_scale_gpu():
    check(1, 512, 1024, 4, 4, 128, torch.bfloat16, causal=True, scale=-0.1)


# ---------------------------------------------------------------------------------------
# GPU (Hopper): the fused backward (dq, dk, dv in one kernel; dq by fp32 TMA reduce-add,
# non-deterministic)
# ---------------------------------------------------------------------------------------
def check_fused(b, nq, nk, h, hk, d, dtype, causal=False, scale=None, **kw):
    q, k, v, dout, lse, delta, scale, truth, lowp = inputs(b, nq, nk, h, hk, d, dtype, causal, scale)
    dq, dk, dv = fused_gluon(q, k, v, dout, lse, delta, scale, causal, **kw)
    assert dq.shape == q.shape and dq.dtype == q.dtype and dk.shape == k.shape and dv.shape == v.shape
    assert dk.dtype == k.dtype and dv.dtype == v.dtype
    for name, t in (("dq", dq), ("dk", dk), ("dv", dv)):
        assert torch.isfinite(t).all(), f"{name}: unwritten (NaN-poisoned) or non-finite output"
    assert_close("dq", dq, truth[0], lowp[0], 3, dtype)
    assert_close("dk", dk, truth[1], lowp[1], 3, dtype)
    assert_close("dv", dv, truth[2], lowp[2], 3, dtype)
    return (q, k, v, dout, lse, delta, scale), (dq, dk, dv)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("d", [128, 64])
@pytest.mark.parametrize("h, hk", [(4, 4), (8, 2)])
@pytest.mark.parametrize("n", [128, 1024])
def test_fused_matches_reference_gpu(dtype, d, h, hk, n):
    check_fused(2, n, n, h, hk, d, dtype)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("d", [128, 64])
@pytest.mark.parametrize("h, hk", [(4, 4), (8, 2), (6, 1)])
@pytest.mark.parametrize("nq, nk", [(256, 1024), (1024, 256), (64, 128), (192, 384), (64, 1024)])
def test_fused_nq_differs_from_nk_gpu(d, h, hk, nq, nk):
    """Nq != Nk both ways, GQA (the group's heads reduce into their own dq rows); Nq = 64:
    one ring tile a head (the dS^T buffers and ds_free's last phase with T = group)."""
    check_fused(2, nq, nk, h, hk, d, torch.bfloat16)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("d, num_stages", [(128, 1), (128, 2), (128, 3), (64, 1), (64, 2), (64, 3), (64, 4)])
@pytest.mark.parametrize("rotate", [True, False])
def test_fused_stages_and_rotation_gpu(d, num_stages, rotate):
    """Every ring depth that fits, with and without ROTATE; an odd tile count a CTA
    (group x tiles = 3 x 5 = 15: the dS^T buffers' parities end mid-pair)."""
    check_fused(1, 320, 256, 6, 2, d, torch.bfloat16, num_stages=num_stages, rotate=rotate)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("d", [128, 64])
@pytest.mark.parametrize("h, hk", [(4, 4), (8, 2)])
@pytest.mark.parametrize("nq, nk", [(128, 128), (1024, 1024), (256, 1024), (1024, 256), (192, 384)])
def test_fused_causal_matches_reference_gpu(dtype, d, h, hk, nq, nk):
    """causal (bottom-right): one tile body, the mask where a tile crosses the diagonal;
    the upper WG's hidden first tile computed with P = 0 (a zero dS^T half for the other
    WG's dQ)."""
    check_fused(2, nq, nk, h, hk, d, dtype, causal=True)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("d", [128, 64])
@pytest.mark.parametrize("nq, nk", [(2048, 1024), (1024, 128), (384, 128), (128, 1024)])
def test_fused_causal_rows_without_keys_gpu(d, nq, nk):
    """Nq > Nk: the first Nq - Nk query rows see no key (lse = +inf): their dq is 0 (tiles
    never loaded keep dq_accum's zeros; rows of loaded tiles add P = 0)."""
    _, (dq, _, _) = check_fused(2, nq, nk, 4, 2, d, torch.bfloat16, causal=True)
    if nq > nk:
        assert not dq[:, :nq - nk].any(), "rows that see no key must get dq = 0"


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("d, num_stages", [(128, 1), (128, 2), (64, 4)])   # (128, 3) spills: refused
def test_fused_causal_stages_gpu(d, num_stages):
    check_fused(2, 1024, 1536, 8, 2, d, torch.bfloat16, causal=True, num_stages=num_stages)


@pytest.mark.gpu
@hopper
def test_fused_causal_negative_scale_gpu():
    check_fused(1, 512, 1024, 4, 4, 128, torch.bfloat16, causal=True, scale=-0.1)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("d", [128, 64])
def test_fused_dkdv_bitwise_and_repeated_launches_gpu(causal, dtype, d):
    """dk / dv bitwise those of the dK/dV kernel (the same sums in the same order); a second
    launch of one prepare gives the same dk / dv bitwise and the same dq up to fp32
    summation order (dq_accum zeroed by every launch: no accumulation across launches);
    a third launch after the outputs were overwritten writes them all again."""
    q, k, v, dout, lse, delta, scale, truth, lowp = inputs(2, 1024, 1024, 8, 2, d, dtype, causal)
    launch = prepare_fused(q, k, v, dout, lse, delta, scale, causal)
    dq1, dk1, dv1 = (t.clone() for t in launch())
    dq2, dk2, dv2 = (t.clone() for t in launch())
    assert torch.equal(dk1, dk2) and torch.equal(dv1, dv2)
    # not bitwise (reduction order), but 2 x dq would be off by |dq| itself
    diff = (dq2.float() - dq1.float()).abs().max().item()
    assert diff <= 2e-2 * dq1.float().abs().max().item(), diff
    assert_close("dq (2nd launch)", dq2, truth[0], lowp[0], 3, dtype)
    # (causal: the dK/dV kernel skips a hidden tile where this one adds exact zeros).
    # Bitwise only with ROTATE off: ROTATE (non-causal, the default) starts each key block's
    # walk at another query tile, so dk / dv sum the same terms in another order (first
    # GPU run, 2026-12-01: max difference 2.4e-4..9.8e-4, both within the f64 criterion).
    dk_ref, dv_ref = dkdv_gluon(q, k, v, dout, lse, delta, scale, causal)
    _, dk_nr, dv_nr = prepare_fused(q, k, v, dout, lse, delta, scale, causal, rotate=False)()
    assert torch.equal(dk_nr, dk_ref), (dk_nr.float() - dk_ref.float()).abs().max().item()
    assert torch.equal(dv_nr, dv_ref), (dv_nr.float() - dv_ref.float()).abs().max().item()
    if causal:      # ROTATE is off for causal launches: the default is the same walk
        assert torch.equal(dk1, dk_ref) and torch.equal(dv1, dv_ref)
    assert_close("dk", dk1, truth[1], lowp[1], 3, dtype)
    assert_close("dv", dv1, truth[2], lowp[2], 3, dtype)
    for t in launch():
        t.fill_(float("nan"))
    dq3, dk3, dv3 = launch()
    assert torch.isfinite(dq3).all() and torch.equal(dk3, dk1) and torch.equal(dv3, dv1)
    assert_close("dq (3rd launch)", dq3, truth[0], lowp[0], 3, dtype)


@pytest.mark.gpu
@hopper
def test_fused_negative_and_large_scale_gpu():
    check_fused(1, 512, 1024, 4, 4, 128, torch.bfloat16, scale=-0.1)
    check_fused(1, 512, 1024, 4, 4, 64, torch.bfloat16, scale=0.5)


@pytest.mark.gpu
@hopper
def test_fused_strided_inputs_gpu():
    """q / k / v views of a packed qkv, a (B, H, N, D) dout (copied by the launcher),
    lse / delta non-contiguous (copied)."""
    b, n, h, d = 2, 512, 4, 128
    qkv = torch.randn(b, n, 3, h, d, dtype=torch.bfloat16, device="cuda")
    q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]
    dout = torch.randn(b, h, n, d, dtype=torch.bfloat16, device="cuda").transpose(1, 2)
    kw = dict(softmax_scale=d ** -0.5)
    out64, lse64 = reference.attention(*(t.double() for t in (q, k, v)), **kw)
    lse = lse64.float().transpose(1, 2).contiguous().transpose(1, 2)
    delta = backward_gluon.delta_of(out64.to(q.dtype), dout).transpose(1, 2).contiguous().transpose(1, 2)
    dq, dk, dv = fused_gluon(q, k, v, dout, lse, delta, d ** -0.5)
    truth = reference.attention_grad(dout.double(), *(t.double() for t in (q, k, v)), **kw)
    lowp = reference.attention_grad(dout, q, k, v, **kw)
    for i, (name, t) in enumerate((("dq", dq), ("dk", dk), ("dv", dv))):
        assert_close(name, t, truth[i], lowp[i], 3, q.dtype)


@pytest.mark.gpu
@hopper
def test_fused_against_library_backward_gpu():
    """The library's forward lse / out and its whole deterministic backward (flash_attn_func
    + autograd, deterministic=True: the default would be this fused kernel itself): the
    fused dq / dk / dv within 3x the library's own error against float64."""
    import flashtriton

    q, k, v = rand_qkv(2, 1024, 1024, 8, 2, 128, torch.bfloat16, "cuda", requires_grad=True)
    out, lse, _ = flashtriton.flash_attn_func(q, k, v, return_attn_probs=True, deterministic=True)
    dout = torch.randn_like(out)
    lib = torch.autograd.grad(out, (q, k, v), dout)
    delta = backward_gluon.delta_of(out.detach(), dout)
    ours = fused_gluon(q.detach(), k.detach(), v.detach(), dout, lse.detach().float().contiguous(), delta,
                       128 ** -0.5)
    truth = reference.attention_grad(dout.double(), *(t.detach().double() for t in (q, k, v)),
                                     softmax_scale=128 ** -0.5)
    for i, name in enumerate(("dq", "dk", "dv")):
        assert_close(f"{name} vs library", ours[i], truth[i], lib[i], 3, q.dtype)


# ---------------------------------------------------------------------------------------
# Validation: no launch happens, so these run on any device (CPU included)
# ---------------------------------------------------------------------------------------
def args(b=1, nq=128, nk=256, h=4, hk=2, d=128, dtype=torch.bfloat16):
    q, k, v = rand_qkv(b, nq, nk, h, hk, d, dtype, DEVICE)
    dout = torch.randn_like(q)
    lse = torch.zeros(b, h, nq, device=DEVICE)
    delta = torch.zeros(b, h, nq, device=DEVICE)
    return [q, k, v, dout, lse, delta]


def call(a, scale=0.1, **kw):
    return dkdv_gluon(*a, scale, **kw)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int8])
def test_rejects_dtype(dtype):
    a = args()
    a[:4] = [t.to(dtype) for t in a[:4]]
    with pytest.raises(ValueError, match=r"^q: dtype .* not supported \(float16 or bfloat16\)"):
        call(a)


def test_rejects_mixed_dtypes():
    a = args()
    a[3] = a[3].half()
    with pytest.raises(ValueError, match=r"^q, k, v, dout: dtypes differ"):
        call(a)


@pytest.mark.parametrize("which", [4, 5])
def test_rejects_vector_dtype_and_shape(which):
    name = ("lse", "delta")[which - 4]
    a = args()
    a[which] = a[which].half()
    with pytest.raises(ValueError, match=rf"^{name}: dtype .* not supported \(float32\)"):
        call(a)
    a = args()
    a[which] = a[which][:, :, :64]
    with pytest.raises(ValueError, match=rf"^{name}: shape .* expected \(B, H, Nq\)"):
        call(a)
    a = args()
    a[which] = a[which][0]
    with pytest.raises(ValueError, match=rf"^{name}: expected 3 dimensions"):
        call(a)


@pytest.mark.parametrize("d", [32, 96, 256])
def test_rejects_head_dim(d):
    with pytest.raises(ValueError, match=rf"^q: head dim {d} not supported"):
        call(args(d=d))


def test_rejects_shapes():
    q, k, v, dout, lse, delta = args()
    with pytest.raises(ValueError, match=r"^q: expected 4 dimensions"):
        call([q[0], k, v, dout, lse, delta])
    with pytest.raises(ValueError, match=r"^k, v: shapes differ"):
        call([q, k, v[:, :128], dout, lse, delta])
    with pytest.raises(ValueError, match=r"^dout: shape .* differs from q's"):
        call([q, k, v, dout[:, :64], lse, delta])
    with pytest.raises(ValueError, match=r"^k: head dim 64 differs from q's 128"):
        call([q, k[..., :64], v[..., :64], dout, lse, delta])
    with pytest.raises(ValueError, match=r"^k: batch 2 differs from q's 1"):
        call([q, torch.cat([k, k]), torch.cat([v, v]), dout, lse, delta])
    with pytest.raises(ValueError, match=r"^q: 4 heads not a multiple of k's 3 heads"):
        call([q, *(torch.cat([t, t[:, :, :1]], 2) for t in (k, v)), dout, lse, delta])
    with pytest.raises(ValueError, match=r"^k: expected a torch.Tensor, got NoneType"):
        call([q, None, v, dout, lse, delta])


@pytest.mark.parametrize("nq, nk, what", [(100, 256, "q: sequence length 100 not a positive multiple of BLOCK_M"),
                                          (128, 192, "k: sequence length 192 not a positive multiple of BLOCK_N"),
                                          (0, 256, "q: sequence length 0"), (128, 0, "k: sequence length 0")])
def test_rejects_sequence_lengths(nq, nk, what):
    with pytest.raises(ValueError, match=rf"^{what}"):
        call(args(nq=nq, nk=nk))


def test_regression_grid_rows_checked():
    """(review, session 24) B * Hk above 65535 (the grid's second dimension) raised at the
    launch, not here: now a ValueError first. Expanded views: no memory."""
    b, n, d = 65536, 128, 64
    q, k, v, dout = (torch.empty(1, n, 1, d, dtype=torch.bfloat16, device=DEVICE).expand(b, n, 1, d)
                     for _ in range(4))
    lse, delta = (torch.empty(1, 1, n, device=DEVICE).expand(b, 1, n) for _ in range(2))
    with pytest.raises(ValueError, match=r"^k: B \* Hk = 65536 above 65535"):
        call([q, k, v, dout, lse, delta])


@pytest.mark.parametrize("scale", [0.0, math.nan, math.inf, "0.1", True])
def test_rejects_scale(scale):
    with pytest.raises(ValueError, match=r"^softmax_scale: expected a finite nonzero number"):
        call(args(), scale)


@pytest.mark.parametrize("num_stages", [0, -1, 2.0, True])
def test_rejects_num_stages(num_stages):
    with pytest.raises(ValueError, match=r"^num_stages: expected a positive int or None"):
        call(args(), num_stages=num_stages)


def test_rejects_flags():
    with pytest.raises(ValueError, match=r"^causal: expected a bool"):
        call(args(), causal=1)
    with pytest.raises(ValueError, match=r"^vec_ptr: expected a bool"):
        call(args(), vec_ptr=None)
    with pytest.raises(ValueError, match=r"^overlap: expected a bool"):
        call(args(), overlap="yes")
    with pytest.raises(ValueError, match=r"^overlap=True: not implemented with causal=True"):
        call(args(), causal=True, overlap=True)
    with pytest.raises(ValueError, match=r"^num_stages: overlap=True needs at least 2 stages"):
        call(args(), overlap=True, num_stages=1)


@pytest.mark.skipif(IS_HOPPER, reason="a Hopper GPU launches instead")
def test_rejects_non_hopper_device():
    """Valid shapes on a CPU (or a non-Hopper GPU): a clear error instead of a launch."""
    a = args()
    if HAS_CUDA:
        a = [t.cuda() for t in a]
    with pytest.raises(ValueError, match=r"needs a CUDA \(Hopper\) device|needs compute capability 9"):
        call(a)


def test_default_configs_fit_shared_memory():
    """K and V (BLOCK_N x D) plus NUM_STAGES x (Q and dO, BLOCK_M x D, and two BLOCK_M fp32
    vectors), 16-bit, within the H100 / H200's 227 KB per block."""
    for d, (bm, bn, stages) in bwd_gluon.DEFAULT_CONFIG.items():
        assert 2 * d * 2 * bn + stages * (2 * 2 * d * bm + 2 * 4 * bm) + 1024 <= 227 * 1024, d
        assert bn == 128 and bm == 64, "two consumer warpgroups of 64 keys; S^T tiles of 64 x 64"


# ---------------------------------------------------------------------------------------
# Validation of the fused launcher (no launch: any device)
# ---------------------------------------------------------------------------------------
def call_fused(a, scale=0.1, **kw):
    return fused_gluon(*a, scale, **kw)


def test_fused_rejects_like_dkdv():
    """prepare_fused shares prepare_dkdv's contract (check_inputs): a sample of its rules."""
    a = args()
    a[3] = a[3].half()
    with pytest.raises(ValueError, match=r"^q, k, v, dout: dtypes differ"):
        call_fused(a)
    with pytest.raises(ValueError, match=r"^q: head dim 96 not supported"):
        call_fused(args(d=96))
    with pytest.raises(ValueError, match=r"^q: sequence length 100 not a positive multiple of BLOCK_M"):
        call_fused(args(nq=100))
    with pytest.raises(ValueError, match=r"^k: sequence length 192 not a positive multiple of BLOCK_N"):
        call_fused(args(nk=192))
    a = args()
    a[4] = a[4][:, :, :64]
    with pytest.raises(ValueError, match=r"^lse: shape .* expected \(B, H, Nq\)"):
        call_fused(a)
    with pytest.raises(ValueError, match=r"^softmax_scale: expected a finite nonzero number"):
        call_fused(args(), math.nan)


def test_fused_rejects_flags_and_stages():
    with pytest.raises(ValueError, match=r"^causal: expected a bool"):
        call_fused(args(), causal=1)
    with pytest.raises(ValueError, match=r"^rotate: expected a bool"):
        call_fused(args(), rotate=None)
    for st in (0, 2.0, True):
        with pytest.raises(ValueError, match=r"^num_stages: expected a positive int or None"):
            call_fused(args(), num_stages=st)
    with pytest.raises(ValueError, match=r"^num_stages: 4 stages need 257 KB of shared memory at D = 128"):
        call_fused(args(), num_stages=4)
    with pytest.raises(ValueError, match=r"^num_stages: 10 stages need 241 KB of shared memory at D = 64"):
        call_fused(args(d=64), num_stages=10)
    # (review, session 24) 3 stages fit at D = 128 but spill causal
    with pytest.raises(ValueError, match=r"^num_stages: 3 stages with causal=True at D = 128 spill"):
        call_fused(args(), causal=True, num_stages=3)


def test_regression_fused_rotate_start_tile_bounded():
    """(review, session 24) ROTATE's int32 start tile (program_id * n_m) would wrap at
    (Nk / 128 - 1) * (Nq / 64) >= 2^31 (e.g. Nq = Nk = 5M tokens): refused before any
    launch. Expanded views: no memory."""
    n, d = 5_242_880, 128
    q, k, v, dout = (torch.empty(1, 1, 1, d, dtype=torch.bfloat16, device=DEVICE).expand(1, n, 1, d)
                     for _ in range(4))
    lse, delta = (torch.empty(1, 1, 1, device=DEVICE).expand(1, 1, n) for _ in range(2))
    with pytest.raises(ValueError, match=r"^rotate: .* not below 2\^31"):
        call_fused([q, k, v, dout, lse, delta])


def test_fused_causal_validates_first():
    """causal=True goes through the same checks (an invalid call says what is wrong)."""
    with pytest.raises(ValueError, match=r"^q: head dim 96 not supported"):
        call_fused(args(d=96), causal=True)


@pytest.mark.skipif(IS_HOPPER, reason="a Hopper GPU launches instead")
def test_fused_rejects_non_hopper_device():
    a = args()
    if HAS_CUDA:
        a = [t.cuda() for t in a]
    with pytest.raises(ValueError, match=r"needs a CUDA \(Hopper\) device|needs compute capability 9"):
        call_fused(a)


def test_fused_config_fits_shared_memory():
    """K and V, NUM_STAGES x (Q and dO), the dS^T double buffer (2 x 2 halves x 64 x 64
    16-bit) and the dq staging (2 WGs x BLOCK_M x D / 2 fp32), within 227 KB at the
    defaults; the launcher's bound (backward_gluon.fused_smem_bytes) against the offline
    compile's figures (193 KB at D = 128 / 2 stages, 225 KB / 3, 145 KB at D = 64 / 4)."""
    for d, (bm, bn, stages) in bwd_gluon_fused.FUSED_CONFIG.items():
        assert backward_gluon.fused_smem_bytes(d, stages, bm, bn) <= 227 * 1024, d
        assert bn == 128 and bm == 64
    kb = lambda d, st: backward_gluon.fused_smem_bytes(d, st) / 1024  # noqa: E731
    assert 192 < kb(128, 2) < 194 and 224 < kb(128, 3) < 226 and 144 < kb(64, 4) < 146
    assert kb(128, 4) > 227


def test_fused_route_rule(monkeypatch):
    """Which backwards take the fused Gluon kernel (policy.gluon_bwd_fused): deterministic=False
    only, plain, canonical causal or (from session 28) any other window, at
    GLUON_BWD_FUSED_MIN_N's lengths (measured in sessions 25-28), the Gluon kernels'
    contract (dense, no ALiBi / softcap / dropout, bf16 / fp16, tile multiples, packed
    rows, dout too), lse (B, H, Nq); rule only (CPU tensors, switch patched)."""
    from flashtriton.launchers import common, policy

    monkeypatch.setattr(policy, "interpreting", lambda: False)
    monkeypatch.setattr(policy, "_warp_spec_switch", lambda q: True)
    assert policy.GLUON_BWD_FUSED_MIN_N == {"plain": {128: 1024, 64: 2048}, "causal": {128: 512, 64: 512},
                                            "window": {128: 2048, 64: 2048}}      # (window: session 28)
    fast = common.AttnParams(0.1, deterministic=False)

    def rule(q, k, v, params=fast, bd=128, alibi=None, varlen=False, lse=None, dout=None):
        b, nq, h, _ = q.shape
        lse = torch.zeros(b, h, nq) if lse is None else lse
        return policy.gluon_bwd_fused(q, k, v, q if dout is None else dout, lse, params, alibi, varlen, bd, nq,
                                      k.shape[1])

    q, k, v = rand_qkv(2, 1024, 1024, 4, 2, 128, torch.bfloat16, "cpu")
    assert rule(q, k, v) and rule(q.half(), k.half(), v.half())
    assert rule(q, k, v, common.AttnParams(0.1, window_right=0, deterministic=False))
    assert rule(*rand_qkv(1, 1024, 2048, 4, 2, 128, torch.bfloat16, "cpu"))               # Nq != Nk
    assert not rule(q, k, v, common.AttnParams(0.1))                                       # deterministic
    for p in (common.AttnParams(0.1, window_left=64, deterministic=False),
              common.AttnParams(0.1, window_right=64, deterministic=False),
              common.AttnParams(0.1, softcap=3.0, deterministic=False)):
        assert not rule(q, k, v, p)                          # (dropout: test_fused_dropout_route_rule)
    # (the two windows above: too short at 1k, window from 2k, test_bwd_gluon_window.py; softcap never)
    q2, k2, v2 = rand_qkv(1, 2048, 2048, 4, 2, 128, torch.bfloat16, "cpu")
    assert rule(q2, k2, v2, common.AttnParams(0.1, window_left=64, deterministic=False))
    assert not rule(q2, k2, v2, common.AttnParams(0.1, window_left=64, softcap=3.0, deterministic=False))
    assert not rule(q2, k2, v2, common.AttnParams(0.1, window_left=64, deterministic=False), alibi=torch.ones(4))
    assert not rule(q, k, v, alibi=torch.ones(4)) and not rule(q, k, v, varlen=True)
    assert not rule(*rand_qkv(1, 512, 512, 4, 2, 128, torch.bfloat16, "cpu"))              # too short
    causal = common.AttnParams(0.1, window_right=0, deterministic=False)
    for d in (128, 64):                                                     # causal from 512 (session 26)
        assert rule(*rand_qkv(1, 512, 512, 4, 2, d, torch.bfloat16, "cpu"), causal, bd=d)
        assert not rule(*rand_qkv(1, 384, 384, 4, 2, d, torch.bfloat16, "cpu"), causal, bd=d)
    q64, k64, v64 = rand_qkv(1, 1024, 1024, 2, 1, 64, torch.bfloat16, "cpu")
    assert not rule(q64, k64, v64, bd=64)                                                  # D = 64 plain: 2k
    assert rule(*rand_qkv(1, 2048, 2048, 2, 1, 64, torch.bfloat16, "cpu"), bd=64)          # (session 30)
    # ... with the WIDE tile only: Nq not a multiple of 128, the 64-row tile from 8k
    assert policy.GLUON_BWD_FUSED_NARROW_MIN_N == {"plain": {64: 8192}}
    assert not rule(*rand_qkv(1, 2048 + 64, 2048, 2, 1, 64, torch.bfloat16, "cpu"), bd=64)
    assert rule(*rand_qkv(1, 8192 + 64, 8192, 2, 1, 64, torch.bfloat16, "cpu"), bd=64)
    assert rule(*rand_qkv(1, 2048 + 64, 2048, 2, 1, 64, torch.bfloat16, "cpu"),
                common.AttnParams(0.1, window_right=0, deterministic=False), bd=64)     # causal: no such rule
    monkeypatch.setattr(policy, "GLUON_BWD_FUSED_WIDE", {"plain": frozenset(), "causal": frozenset()})
    assert not rule(*rand_qkv(1, 2048, 2048, 2, 1, 64, torch.bfloat16, "cpu"), bd=64)      # no WIDE: 8k
    monkeypatch.undo()
    monkeypatch.setattr(policy, "interpreting", lambda: False)
    monkeypatch.setattr(policy, "_warp_spec_switch", lambda q: True)
    assert rule(q64, k64, v64, common.AttnParams(0.1, window_right=0, deterministic=False), bd=64)
    assert rule(*rand_qkv(1, 1024 + 64, 1024, 4, 2, 128, torch.bfloat16, "cpu"))          # Nq: BLOCK_M = 64
    assert not rule(*rand_qkv(1, 1024 + 32, 1024, 4, 2, 128, torch.bfloat16, "cpu"))      # Nq not a tile multiple
    assert not rule(*rand_qkv(1, 1024, 1024 + 64, 4, 2, 128, torch.bfloat16, "cpu"))      # Nk: BLOCK_N = 128
    assert not rule(q.float(), k.float(), v.float())
    assert not rule(q, k, v, lse=torch.zeros(2, 4, 1024 + 128))                            # lse padded
    # (review, session 25) lse packed fp32 (delta is written with lse's strides), dout q's dtype
    assert not rule(q, k, v, lse=torch.zeros(2, 1024, 4).transpose(1, 2))
    assert not rule(q, k, v, lse=torch.zeros(2, 4, 1024, dtype=torch.float64))
    assert not rule(q, k, v, dout=q.half())
    q8, k8, v8 = rand_qkv(1, 8192, 8192, 1, 1, 64, torch.bfloat16, "cpu")
    assert rule(q8, k8, v8, bd=64)                                                         # D = 64 plain: 8k
    assert not rule(q, k, v, dout=q.transpose(1, 2).contiguous().transpose(1, 2))         # dout not packed rows
    monkeypatch.setattr(policy, "_warp_spec_switch", lambda q: False)
    assert not rule(q, k, v)


# ---------------------------------------------------------------------------------------
# The fp32 dq accumulator's kernels and the fused backward's launch plan (session 25)
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("n", [1, 4095, 4096 + 17])
def test_dq_accum_zero_and_cast(dtype, n):
    """kernels/dq_accum.py: zero_f32_kernel zeroes every element of a NaN-poisoned fp32
    buffer (a tail shorter than a block included); cast_kernel writes every element of a
    poisoned destination, rounded as torch's copy_ (bitwise on the GPU; the interpreter
    rounds ties up, so there within one unit in the last place)."""
    from flashtriton.kernels.dq_accum import BLOCK, cast_kernel, zero_f32_kernel
    import triton

    acc = torch.full((n,), float("nan"), device=DEVICE)
    zero_f32_kernel[(triton.cdiv(n, BLOCK),)](acc, n, BLOCK=BLOCK)
    assert torch.equal(acc, torch.zeros_like(acc))
    src = torch.randn(n, device=DEVICE) * 3
    dst = torch.full((n,), float("nan"), dtype=dtype, device=DEVICE)
    cast_kernel[(triton.cdiv(n, BLOCK),)](src, dst, n, BLOCK=BLOCK)
    want = src.to(dtype)
    if INTERPRETING:
        ulp = want.float().abs() * torch.finfo(dtype).eps
        assert ((dst.float() - want.float()).abs() <= ulp).all()
    else:
        assert torch.equal(dst, want)


def test_fused_launches_replayable(monkeypatch):
    """The fused backward's three launches (zero, the Gluon kernel, the cast), recorded as
    launchers.backward._bwd makes them, build a launch plan (every tensor and descriptor
    base an input or an allocation of the call), and a replay rebuilds the Gluon
    descriptors over the next call's tensors. CPU tensors, the Gluon kernel replaced by a
    recorder (it has no interpreted form); the zero and the cast run under the
    interpreter. (FUSED_REPLAYABLE decides whether the library lets plans replay it.)"""
    from flashtriton import memory
    from flashtriton.launchers import plans
    from flashtriton.launchers.plans import _gluon_descriptor_class

    if not INTERPRETING:
        pytest.skip("the CPU form of this test (the Gluon kernel stubbed)")
    seen = []

    class Stub:
        """Stands for attn_bwd_fused_gluon_kernel: kernel[grid](*args) records its args."""
        def __getitem__(self, grid):
            return lambda *a, **kw: seen.append(a)
    monkeypatch.setattr(backward_gluon, "attn_bwd_fused_gluon_kernel", Stub())
    monkeypatch.setattr(backward_gluon, "FUSED_REPLAYABLE", True)

    def call(q, k, v, dout, lse):
        delta = memory.empty(lse.shape, torch.float32, q.device)
        dq, dk, dv = (memory.empty(t.shape, t.dtype, t.device) for t in (q, k, v))
        backward_gluon.fused_into(q, k, v, dout, lse, delta, 0.1, False, dq, dk, dv)
        return dq, dk, dv

    def fresh():
        q, k, v = rand_qkv(1, 128, 256, 4, 2, 128, torch.bfloat16, "cpu")
        return q, k, v, torch.randn_like(q), torch.randn(1, 4, 128)
    first = fresh()
    key = ("test_fused", 1)
    plans.run(key, first, lambda: call(*first))
    assert key in plans._PLANS, "the fused backward's launches did not make a plan"
    second = fresh()
    dq, dk, dv = plans.run(key, second, lambda: pytest.fail("replayed calls do not run the launchers"))
    desc = _gluon_descriptor_class()
    bases = [a.base for a in seen[-1] if isinstance(a, desc)]
    assert len(bases) == 7
    assert bases[0] is second[0] and bases[1] is second[3] and bases[2] is second[1] and bases[3] is second[2]
    assert bases[4] is dk and bases[5] is dv
    assert bases[6] is not seen[0][6].base            # dq_accum: allocated again by the replay
    assert torch.equal(dq, torch.zeros_like(dq))      # zero, (stub), cast: replayed under the interpreter


# ---------------------------------------------------------------------------------------
# The fused backward with dropout (kernels/bwd_gluon_fused.py's DROPOUT, session 26;
# routed for policy.GLUON_BWD_FUSED_DROPOUT's head dims since the GPU A/B)
# ---------------------------------------------------------------------------------------
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from flashtriton.kernels.common import dropout_threshold  # noqa: E402


@triton.jit
def _fused_keep_mirror(KEYS, OUT, seqlen_q, seqlen_k, nheads, nheads_k, group, rng_rows, dropout_p, stride_b,
                       stride_h, stride_m, ROTATE: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """The fused kernel's dropout index and keep arithmetic, one (CTA, ring tile g, WG) a
    program (grid (Nk / BLOCK_N, B * Hk, 2 * group * n_m)): the CTA's coordinates as
    bwd_gluon._block_coords (non-causal), the tile's (head, row) as _tile_row with ROTATE's
    start as _rotation, then the very @triton.jit helpers the Gluon kernel calls
    (fused_group_mult, fused_rk_at, fused_signed_p) on ck / rk loaded at the kernel's
    indices; writes keep (1 / 0) at OUT[b, h, query, key] for the transposed tile."""
    HALF_N: tl.constexpr = BLOCK_N // 2
    pid_n = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = pid_bh // nheads_k
    hk = pid_bh % nheads_k
    n0 = pid_n * BLOCK_N
    n_m = seqlen_q // BLOCK_M
    WG = tl.program_id(2) % 2
    g = tl.program_id(2) // 2
    rot = 0
    if ROTATE:
        rot = (pid_n * n_m) // tl.num_programs(0)
    hh = g // n_m
    j = (g % n_m + rot) % n_m
    h = hk * group + hh
    mk = bwd_gluon_fused.fused_group_mult(KEYS, seqlen_k, nheads, rng_rows, n0)
    ck = tl.load(KEYS + n0 + WG * HALF_N + tl.arange(0, HALF_N)).to(tl.uint32, bitcast=True)
    rk_at = bwd_gluon_fused.fused_rk_at(seqlen_k, seqlen_q, rng_rows, b, h, j * BLOCK_M)
    rk = tl.load(KEYS + rk_at + tl.arange(0, BLOCK_M)).to(tl.uint32, bitcast=True)
    ones = tl.full([HALF_N, BLOCK_M], 1.0, tl.float32)
    pz = bwd_gluon_fused.fused_signed_p(ones, rk, ck, mk, dropout_threshold(dropout_p))   # (keys, queries)
    keys_i = n0 + WG * HALF_N + tl.arange(0, HALF_N)
    rows_i = j * BLOCK_M + tl.arange(0, BLOCK_M)
    ptr = OUT + b * stride_b + h * stride_h + rows_i[None, :] * stride_m + keys_i[:, None]
    tl.store(ptr, (pz > 0).to(tl.int8))


@pytest.mark.parametrize("b, nq, nk, h, hk, p, seed, rotate", [
    (2, 192, 256, 4, 2, 0.1, 3, True),       # GQA group 2, Nq != Nk, two column groups
    (1, 128, 384, 6, 2, 0.5, 7, False),      # group 3, three column groups
    (2, 256, 128, 2, 1, 0.85, 11, True),     # Nq > Nk, group 2
    (1, 64, 128, 3, 3, 0.3, 0, True),        # MHA, one tile
])
def test_fused_dropout_keep_matches_library(b, nq, nk, h, hk, p, seed, rotate):
    """The fused kernel's keep^T arithmetic (its @triton.jit helpers at its indices, run in
    a mirror of its loops under the interpreter) gives EXACTLY the library's mask
    (launchers.forward.dropout_mask: kernels.common.dropout_keep from scratch, the mask the
    forward and the library's backward draw), from the table launchers.common._dropout_keys
    builds, every (batch, query head, row, key) written once; GQA's head mapping included."""
    if not INTERPRETING:
        pytest.skip("the interpreted mirror (CPU)")
    from flashtriton.launchers import common, forward
    from helpers import dropout_rng

    bm, bn = 64, 128
    q = torch.zeros(b, nq, h, 16)
    k = torch.zeros(b, nk, hk, 16)
    rng = dropout_rng(seed, "cpu")
    keys = common._dropout_keys(rng, h, b * nq, nk)
    assert keys.numel() == backward_gluon.keys_numel(b, nq, nk, h)
    ref = forward.dropout_mask(q, k, common.AttnParams(0.25, dropout_p=p), rng)        # (B, H, Nq, Nk) bool
    out = torch.full((b, h, nq, nk), -1, dtype=torch.int8)
    n_m = nq // bm
    _fused_keep_mirror[(nk // bn, b * hk, 2 * (h // hk) * n_m)](
        keys, out, nq, nk, h, hk, h // hk, b * nq, p, out.stride(0), out.stride(1), out.stride(2),
        ROTATE=rotate, BLOCK_M=bm, BLOCK_N=bn)
    assert (out >= 0).all(), "some element not written by exactly the fused kernel's tiles"
    assert torch.equal(out.bool(), ref)
    assert abs(ref.float().mean().item() - (1 - p)) < 0.05


def test_fused_dropout_signed_p_algebra():
    """The tile's sign trick (kernels/bwd_gluon_fused.fused_signed_p and _fused_tile's
    DROPOUT branch, written as torch here): with pz = where(keep, p, -p) for p >= 0,
    |pz| == p and max(pz, 0) == p * keep bitwise (p = 0 included), so dS^T = max(pz, 0) dP -
    |pz| (1 - p) delta is bwd_ws.py's dK/dV form P_kept dP - P ((1 - p) delta) exactly
    (fp32, no contraction here) and its dQ form P (keep dP - (1 - p) delta) up to rounding."""
    g = torch.Generator().manual_seed(0)
    p = torch.rand(4096, generator=g) * (torch.rand(4096, generator=g) > 0.2)      # exact zeros too
    p[:7] = torch.tensor([0.0, 0.0, 1.0, 1.0, 1e-30, 0.5, 0.0])
    keep = torch.rand(4096, generator=g) > 0.3
    keep[:7] = torch.tensor([True, False, True, False, False, True, True])
    dp = torch.randn(4096, generator=g) * 3
    dlt = torch.randn(4096, generator=g) * 0.9
    kf = torch.tensor(0.9, dtype=torch.float32)
    pz = torch.where(keep, p, -p)
    pk = torch.clamp_min(pz, 0.0)
    assert torch.equal(pz.abs(), p) and torch.equal(pk, p * keep.float())
    ours = pk * dp - pz.abs() * (dlt * kf)
    assert torch.equal(ours, (p * keep.float()) * dp - p * (dlt * kf))           # bwd_ws.py's dK/dV form
    dq_form = p * (keep.float() * dp - dlt * kf)                                   # bwd_ws.py's dQ form
    assert torch.allclose(ours, dq_form, rtol=1e-5, atol=1e-6)


def test_fused_dropout_validation():
    """prepare_fused's dropout arguments (check_dropout): ValueError naming the argument,
    before any launch (CPU: a valid call reaches the device check)."""
    a = args(b=2, nq=128, nk=256, h=4, hk=2)
    need = backward_gluon.keys_numel(2, 128, 256, 4)
    assert need == 256 + 4 * 2 * 128 + 1
    good = torch.zeros(need, dtype=torch.int32, device=DEVICE)
    for p in (-0.1, 1.0, 1.5, math.nan, True, "0.1", None):
        with pytest.raises(ValueError, match=r"^dropout_p: expected a number in \[0, 1\)"):
            call_fused(a, dropout_p=p, keys=good)
    with pytest.raises(ValueError, match=r"^keys: given with dropout_p = 0"):
        call_fused(a, keys=good)
    with pytest.raises(ValueError, match=r"^keys: dropout_p = 0.1 needs the call's key table"):
        call_fused(a, dropout_p=0.1)
    with pytest.raises(ValueError, match=r"^keys: expected a contiguous 1-D int32 tensor"):
        call_fused(a, dropout_p=0.1, keys=good.long())
    with pytest.raises(ValueError, match=r"^keys: expected a contiguous 1-D int32 tensor"):
        call_fused(a, dropout_p=0.1, keys=good.view(1, -1))
    with pytest.raises(ValueError, match=r"^keys: expected a contiguous 1-D int32 tensor"):
        call_fused(a, dropout_p=0.1, keys=torch.zeros(2 * need, dtype=torch.int32, device=DEVICE)[::2])
    with pytest.raises(ValueError, match=rf"^keys: {need - 1} entries, expected Nk \+ H \* B \* Nq \+ 1 = {need}"):
        call_fused(a, dropout_p=0.1, keys=good[:-1])
    # the input checks come first
    with pytest.raises(ValueError, match=r"^q: head dim 96 not supported"):
        call_fused(args(d=96), dropout_p=0.1, keys=good)
    if not IS_HOPPER:
        with pytest.raises(ValueError, match=r"needs a CUDA \(Hopper\) device|needs compute capability 9"):
            call_fused([t.cuda() for t in a] if HAS_CUDA else a, dropout_p=0.1,
                       keys=good.cuda() if HAS_CUDA else good)


def test_fused_dropout_launch_args():
    """The launcher's arguments: without dropout the three dropout arguments are None (bound
    as constexprs: the kernel of before DROPOUT) and DROPOUT=False; with it the table,
    B * Nq and p, DROPOUT=True. CPU tensors, no launch."""
    q, k, v = rand_qkv(2, 128, 256, 4, 2, 128, torch.bfloat16, "cpu")
    dout, lse, delta = torch.randn_like(q), torch.zeros(2, 4, 128), torch.zeros(2, 4, 128)
    # (session 28: the window's win_left / win_right follow the three, None without WINDOW)
    *_, grid, a, kw = backward_gluon._fused_launch_args(q, k, v, dout, lse, delta, 0.1, 64, 128, 2, True)
    assert a[-5:] == (None,) * 5 and kw["DROPOUT"] is False and grid == (2, 4)
    keys = torch.zeros(backward_gluon.keys_numel(2, 128, 256, 4), dtype=torch.int32)
    *_, a, kw = backward_gluon._fused_launch_args(q, k, v, dout, lse, delta, 0.1, 64, 128, 2, True,
                                                  dropout_p=0.25, keys=keys)
    assert a[-5] is keys and a[-4] == 2 * 128 and a[-3] == 0.25 and kw["DROPOUT"] is True
    names = bwd_gluon_fused.attn_bwd_fused_gluon_kernel.arg_names
    assert names[len(a) - 5:len(a) - 2] == ["KEYS", "rng_rows", "dropout_p"]


def test_fused_dropout_route_rule(monkeypatch):
    """policy.gluon_bwd_fused with dropout: accepted for the head dims in
    GLUON_BWD_FUSED_DROPOUT (D = 128, measured) by the same rules as without dropout
    (deterministic=False, plain / causal, lengths); refused with the set emptied."""
    from flashtriton.launchers import common, policy

    assert policy.GLUON_BWD_FUSED_DROPOUT == {128}
    monkeypatch.setattr(policy, "interpreting", lambda: False)
    monkeypatch.setattr(policy, "_warp_spec_switch", lambda q: True)

    def rule(q, k, v, params):
        b, nq, h, _ = q.shape
        return policy.gluon_bwd_fused(q, k, v, q, torch.zeros(b, h, nq), params, None, False, q.shape[-1], nq,
                                      k.shape[1])

    q, k, v = rand_qkv(2, 1024, 1024, 4, 2, 128, torch.bfloat16, "cpu")
    drop = common.AttnParams(0.1, dropout_p=0.1, deterministic=False)
    drop_causal = common.AttnParams(0.1, window_right=0, dropout_p=0.1, deterministic=False)
    assert rule(q, k, v, common.AttnParams(0.1, deterministic=False))
    assert rule(q, k, v, drop) and rule(q, k, v, drop_causal)
    monkeypatch.setattr(policy, "GLUON_BWD_FUSED_DROPOUT", frozenset())
    assert not rule(q, k, v, drop) and not rule(q, k, v, drop_causal)
    assert rule(q, k, v, common.AttnParams(0.1, deterministic=False))                    # without dropout
    monkeypatch.setattr(policy, "GLUON_BWD_FUSED_DROPOUT", frozenset({128}))
    q64, k64, v64 = rand_qkv(2, 1024, 1024, 4, 2, 64, torch.bfloat16, "cpu")
    assert rule(q64, k64, v64, common.AttnParams(0.1, window_right=0, deterministic=False))
    assert not rule(q64, k64, v64, drop_causal)                                        # D = 64: not measured
    assert not rule(q, k, v, common.AttnParams(0.1, dropout_p=0.1))                         # deterministic
    assert not rule(q, k, v, common.AttnParams(0.1, window_left=64, dropout_p=0.1, deterministic=False))
    assert not rule(*rand_qkv(1, 512, 512, 4, 2, 128, torch.bfloat16, "cpu"), drop)        # too short
    assert not rule(q.float(), k.float(), v.float(), drop)


def _dropout_case(b, nq, nk, h, hk, d, dtype, p, causal, seed):
    """The library's dropout forward (flash_attn_func, deterministic=True) and its whole
    deterministic dropout backward (autograd), the mask the library draws for the seed, and
    the fused kernel's inputs: (q, k, v, dout, out, lse, keys, keep, lib_grads)."""
    import flashtriton
    from flashtriton.launchers import common, forward
    from helpers import dropout_rng

    q, k, v = rand_qkv(b, nq, nk, h, hk, d, dtype, "cuda", requires_grad=True)
    torch.manual_seed(seed)
    out, lse, _ = flashtriton.flash_attn_func(q, k, v, dropout_p=p, causal=causal, return_attn_probs=True,
                                              deterministic=True)
    dout = torch.randn_like(out)
    lib = torch.autograd.grad(out, (q, k, v), dout)
    rng = dropout_rng(seed, "cuda")
    keys = common._dropout_keys(rng, h, b * nq, nk)
    keep = forward.dropout_mask(q.detach(), k.detach(), common.AttnParams(d ** -0.5, dropout_p=p), rng)
    return q.detach(), k.detach(), v.detach(), dout, out.detach(), lse.detach().float().contiguous(), keys, keep, lib


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("d", [128, 64])
@pytest.mark.parametrize("b, nq, nk, h, hk", [(2, 1024, 1024, 4, 4), (2, 1024, 1024, 8, 2), (1, 256, 1024, 8, 2),
                                              (1, 1024, 256, 4, 2), (2, 192, 384, 6, 2)])
def test_fused_dropout_matches_reference_gpu(causal, d, b, nq, nk, h, hk):
    """The fused dropout backward's dq / dk / dv against float64 under the library's mask
    for the seed (reference.attention_grad with dropout_mask) within 3x PyTorch's same-dtype
    error, and against the library's deterministic dropout backward (its own error
    against float64 the other way round: both near the truth)."""
    from helpers import reference_pair

    dtype, p, seed = torch.bfloat16, 0.1, 5
    q, k, v, dout, out, lse, keys, keep, lib = _dropout_case(b, nq, nk, h, hk, d, dtype, p, causal, seed)
    delta = backward_gluon.delta_of(out, dout)
    ours = fused_gluon(q, k, v, dout, lse, delta, d ** -0.5, causal, dropout_p=p, keys=keys)
    truth, lowp = reference_pair(q, k, v, dout, softmax_scale=d ** -0.5, window_right=0 if causal else -1,
                                 dropout_p=p, dropout_mask=keep)
    for i, name in enumerate(("dq", "dk", "dv")):
        assert torch.isfinite(ours[i]).all(), f"{name}: unwritten (NaN-poisoned) or non-finite output"
        assert_close(name, ours[i], truth[name], lowp[name], 3, dtype)
        assert_close(f"{name} vs library", ours[i], truth[name], lib[i], 3, dtype)
        assert_close(f"library {name}", lib[i], truth[name], lowp[name], 3, dtype)   # (the same mask)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("p", [0.5, 0.85])
def test_fused_dropout_high_p_gpu(p):
    """Large p (most of P dropped, 1 / (1 - p) large): fp16, GQA."""
    from helpers import reference_pair

    q, k, v, dout, out, lse, keys, keep, lib = _dropout_case(1, 512, 1024, 8, 2, 128, torch.float16, p, False, 9)
    ours = fused_gluon(q, k, v, dout, lse, backward_gluon.delta_of(out, dout), 128 ** -0.5, dropout_p=p, keys=keys)
    truth, lowp = reference_pair(q, k, v, dout, softmax_scale=128 ** -0.5, dropout_p=p, dropout_mask=keep)
    for i, name in enumerate(("dq", "dk", "dv")):
        assert_close(name, ours[i], truth[name], lowp[name], 3, torch.float16)


@pytest.mark.gpu
@hopper
def test_fused_dropout_tiny_p_is_plain_gpu():
    """p = 1e-12 goes through DROPOUT=True with a key table, but sits below the keep test's
    2^-23 quantum (every element kept) and 1 / (1 - p) rounds to 1 in fp32: the gradients
    of attention without dropout, within the f64 criterion. (Session 26's review: the test
    before compared two identical calls, dropout_p=0.0 and keys=None being the defaults.)"""
    from helpers import reference_pair

    p = 1e-12
    q, k, v, dout, out, lse, keys, keep, lib = _dropout_case(1, 512, 512, 4, 2, 128, torch.bfloat16, p, False, 3)
    assert bool(keep.all()), "p = 1e-12 dropped an element"
    ours = fused_gluon(q, k, v, dout, lse, backward_gluon.delta_of(out, dout), 128 ** -0.5, dropout_p=p, keys=keys)
    truth, lowp = reference_pair(q, k, v, dout, softmax_scale=128 ** -0.5)
    for i, name in enumerate(("dq", "dk", "dv")):
        assert torch.isfinite(ours[i]).all(), f"{name}: unwritten (NaN-poisoned) or non-finite output"
        assert_close(name, ours[i], truth[name], lowp[name], 3, torch.bfloat16)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("causal", [False, True])
def test_flash_attn_func_takes_fused_dropout_gpu(monkeypatch, causal):
    """As routed (policy.GLUON_BWD_FUSED_DROPOUT = {128}, session 26): flash_attn_func(
    dropout_p=0.1) at D = 128, 1k, deterministic=False runs the fused Gluon backward with
    the call's dropout, and dq / dk / dv pass the float64 criterion under the mask the
    forward drew (check_attention reads it back from S_dmask)."""
    from helpers import check_attention, spy

    called = spy(monkeypatch, backward_gluon, "fused_into", record=lambda *a, **kw: kw.get("dropout_p"))
    check_attention("triton", *rand_qkv(2, 1024, 1024, 4, 2, 128, torch.bfloat16, "cuda"), causal=causal,
                    dropout_p=0.1, seed=11)
    assert called == [0.1], called


# ---------------------------------------------------------------------------------------
# Session 29: the launches around the fused kernel (backward_gluon.FUSED_DQ_ZERO_IN_PREPROCESS:
# the delta preprocess zeroes dq_accum, no zero_f32_kernel; FUSED_DQ_CAST_REVERSE: the cast's
# REVERSE). Both off by default: level in the GPU A/B (bench/gpu/s29_fused_dq_accum_ab.py).
# ---------------------------------------------------------------------------------------
def test_fused_dq_flags_default_off_and_env_parse():
    """The switches default to the old path; FLASHTRITON_FUSED_DQ's values parse, others raise."""
    assert backward_gluon.FUSED_DQ_ZERO_IN_PREPROCESS is False or os.environ.get("FLASHTRITON_FUSED_DQ")
    assert backward_gluon.FUSED_DQ_CAST_REVERSE is False or os.environ.get("FLASHTRITON_FUSED_DQ")
    parse = backward_gluon._fused_dq_flags
    assert parse(None) == parse("") == parse("0") == (False, False)
    assert parse("pre") == (True, False) and parse("rev") == (False, True)
    assert parse("pre,rev") == parse(" rev , pre ") == (True, True)
    for bad in ("1", "pre,zero", "PRE"):
        with pytest.raises(ValueError, match="FLASHTRITON_FUSED_DQ"):
            parse(bad)


@pytest.mark.parametrize("b, nq, h, d", [(2, 128, 3, 64), (1, 200, 2, 128), (2, 64, 1, 128)])
def test_preprocess_zeroes_dq_accum(b, nq, h, d):
    """bwd_preprocess_kernel with DQ_ACCUM (launched as launchers/backward.py's preprocess):
    delta bitwise the launch without it (and rowsum(dO * O) as torch within fp32 rounding),
    every element of a NaN-poisoned (B, Nq, H, D) fp32 accumulator zeroed (Nq not a multiple
    of the 64-row block included), nothing written past it. Interpreter (or GPU)."""
    import triton
    from flashtriton.kernels.bwd import bwd_preprocess_kernel

    out = torch.randn(b, nq, h, d, device=DEVICE).to(torch.bfloat16)
    dout = torch.randn(b, nq, h, d, device=DEVICE).to(torch.bfloat16)
    n_acc = b * nq * h * d
    store = torch.full((n_acc + 1024,), float("nan"), device=DEVICE)
    acc = store[:n_acc].view(b, nq, h, d)

    def launch(dq_accum):
        delta = torch.full((b, h, nq), float("nan"), device=DEVICE)
        bwd_preprocess_kernel[(b * h, triton.cdiv(nq, 64))](
            out, dout, delta, delta, out.stride(0), out.stride(1), out.stride(2),
            dout.stride(0), dout.stride(1), dout.stride(2), delta.stride(0), delta.stride(1), h, nq,
            HEAD_DIM=d, BLOCK_D=d, BLOCK_M=64, IS_VARLEN=False,
            **(dict(DQ_ACCUM=dq_accum) if dq_accum is not None else {}))
        return delta
    old = launch(None)
    assert torch.isnan(store).all(), "the launch without DQ_ACCUM wrote the accumulator"
    new = launch(acc)
    assert torch.equal(new, old)
    want = (out.float() * dout.float()).sum(-1).transpose(1, 2)
    torch.testing.assert_close(new, want, rtol=1e-5, atol=1e-4)
    assert torch.equal(acc, torch.zeros_like(acc)), "dq_accum not zeroed everywhere"
    assert torch.isnan(store[n_acc:]).all(), "written past dq_accum"


@pytest.mark.parametrize("n", [1, 4096 * 3 + 17])
def test_cast_reverse_is_the_same_cast(n):
    """cast_kernel's REVERSE writes the same values as the forward order (every element)."""
    import triton
    from flashtriton.kernels.dq_accum import BLOCK, cast_kernel

    src = torch.randn(n, device=DEVICE) * 3
    fwd = torch.full((n,), float("nan"), dtype=torch.bfloat16, device=DEVICE)
    rev = fwd.clone()
    cast_kernel[(triton.cdiv(n, BLOCK),)](src, fwd, n, BLOCK=BLOCK)
    cast_kernel[(triton.cdiv(n, BLOCK),)](src, rev, n, BLOCK=BLOCK, REVERSE=True)
    assert torch.equal(fwd, rev) and not torch.isnan(rev.float()).any()


@pytest.mark.parametrize("zero_pre, rev", [(False, False), (True, False), (True, True), (False, True)])
def test_fused_route_launches_with_switches(monkeypatch, zero_pre, rev):
    """The library's fused route (launchers.backward._bwd -> backward_gluon.fused_into), the
    Gluon kernel stubbed, CPU tensors under the interpreter: the launches in order and their
    arguments under each setting of the switches, the same launches recorded into a launch
    plan and replayed over a second call (dq = 0 from the NaN-poisoned accumulator through
    the stub: zeroed by whichever launch the switch says; delta = rowsum(dO * O))."""
    from flashtriton.kernels.bwd import bwd_preprocess_kernel
    from flashtriton.kernels.dq_accum import cast_kernel, zero_f32_kernel
    from flashtriton.launchers import backward, common, plans

    if not INTERPRETING:
        pytest.skip("the CPU form of this test (the Gluon kernel stubbed)")
    monkeypatch.setenv("FLASHTRITON_PLANS", "1")
    seen = []

    class Stub:
        """Stands for attn_bwd_fused_gluon_kernel: records its args, adds nothing to dq_accum."""
        def __getitem__(self, grid):
            return lambda *a, **kw: seen.append(a)
    monkeypatch.setattr(backward_gluon, "attn_bwd_fused_gluon_kernel", Stub())
    monkeypatch.setattr(backward_gluon, "FUSED_REPLAYABLE", True)
    monkeypatch.setattr(backward_gluon, "FUSED_DQ_ZERO_IN_PREPROCESS", zero_pre)
    monkeypatch.setattr(backward_gluon, "FUSED_DQ_CAST_REVERSE", rev)
    monkeypatch.setattr(backward, "gluon_bwd_fused", lambda *a, **kw: True)
    launched = []
    real_launch = plans.launch

    def launch(kernel, grid, *args, **kwargs):
        launched.append((kernel, args, kwargs))
        return real_launch(kernel, grid, *args, **kwargs)
    monkeypatch.setattr(plans, "launch", launch)
    params = common.AttnParams(0.1, deterministic=False)

    def fresh():
        q, k, v = rand_qkv(1, 128, 256, 4, 2, 128, torch.bfloat16, "cpu")
        out, dout = torch.randn_like(q), torch.randn_like(q)
        return dout, q, k, v, out, torch.randn(1, 4, 128)

    first = fresh()
    dq, dk, dv = backward.bwd(*first, params)
    kinds = [k for k, _, _ in launched]
    if zero_pre:
        assert kinds == [bwd_preprocess_kernel, backward_gluon.attn_bwd_fused_gluon_kernel, cast_kernel], kinds
        acc = launched[0][2]["DQ_ACCUM"]
    else:
        assert kinds == [bwd_preprocess_kernel, zero_f32_kernel, backward_gluon.attn_bwd_fused_gluon_kernel,
                         cast_kernel], kinds
        assert "DQ_ACCUM" not in launched[0][2]
        acc = launched[1][1][0]
    assert acc.dtype == torch.float32 and acc.shape == first[1].shape and acc.is_contiguous()
    assert seen[-1][6].base is acc                         # the kernel reduce-adds into what was zeroed
    assert launched[-1][1][0] is acc and launched[-1][1][1] is dq
    assert launched[-1][2].get("REVERSE", False) is rev
    assert torch.equal(dq, torch.zeros_like(dq))
    assert len(plans._PLANS) == 1, "the fused route's launches did not make a plan"
    n_launches = len(launched)
    second = fresh()
    dq2, _, _ = backward.bwd(*second, params)
    assert len(launched) == n_launches, "the second call ran the launchers instead of the plan"
    assert seen[-1][6].base is not acc
    assert torch.equal(dq2, torch.zeros_like(dq2))
    dout, out = second[0], second[4]
    delta = seen[-1][8]
    torch.testing.assert_close(delta, (out.float() * dout.float()).sum(-1).transpose(1, 2), rtol=1e-5, atol=1e-4)


def test_fused_into_preprocess_needs_contiguous_delta():
    """fused_into(preprocess=...) writes delta after the kernel's arguments are made: a
    non-contiguous delta (copied there) is refused before any launch."""
    q, k, v = rand_qkv(1, 128, 256, 4, 2, 128, torch.bfloat16, "cpu")
    delta = torch.zeros(1, 128, 4).transpose(1, 2)
    dq, dk, dv = (torch.empty_like(t) for t in (q, k, v))
    with pytest.raises(ValueError, match="delta"):
        backward_gluon.fused_into(q, k, v, q, torch.zeros(1, 4, 128), delta, 0.1, False, dq, dk, dv,
                                  preprocess=lambda acc: pytest.fail("launched"))


# (b, nq, nk, h, hk, d, causal, window, dropout_p): every routed kind (policy.gluon_bwd_fused)
FUSED_DQ_GPU_CASES = [
    (2, 1024, 1024, 4, 4, 128, False, (-1, -1), 0.0),
    (2, 1024, 1024, 8, 2, 128, True, (-1, -1), 0.0),          # GQA, causal
    (1, 1024, 2048, 4, 2, 128, False, (-1, -1), 0.0),         # Nq != Nk
    (1, 2048, 1024, 4, 2, 128, True, (-1, -1), 0.0),          # Nq > Nk causal (rows without keys)
    (1, 2048, 2048, 4, 2, 128, False, (256, 0), 0.0),         # window
    (2, 1024, 1024, 4, 2, 128, False, (-1, -1), 0.1),         # dropout
    (2, 1024, 1024, 4, 2, 128, True, (-1, -1), 0.1),          # dropout, causal
    (1, 8192, 8192, 2, 1, 64, False, (-1, -1), 0.0),          # D = 64 plain (routed from 8k)
    (2, 1024, 512, 8, 2, 64, True, (-1, -1), 0.0),            # D = 64 causal, GQA, Nq != Nk
    (1, 2048, 2048, 4, 4, 64, False, (512, 0), 0.0),          # D = 64 window
]


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("case", FUSED_DQ_GPU_CASES, ids=lambda c: "-".join(map(str, c)))
def test_fused_dq_switches_match_old_path_gpu(monkeypatch, case):
    """flash_attn_func's backward (deterministic=False: the fused route) with both session-29
    switches on against both off, same inputs and dropout seed: the new path ran (no
    zero_f32_kernel, the preprocess given DQ_ACCUM, the cast REVERSE), dk / dv bitwise, dq
    within the fused kernel's summation order of the old path's and (without dropout) within
    the float64 criterion; a second call (replayed from its plan) again."""
    from flashtriton import flash_attn_func
    from flashtriton.kernels.bwd import bwd_preprocess_kernel
    from flashtriton.kernels.dq_accum import cast_kernel, zero_f32_kernel
    from flashtriton.launchers import plans

    b, nq, nk, h, hk, d, causal, window, p = case
    dtype = torch.bfloat16
    monkeypatch.setenv("FLASHTRITON_PLANS", "1")
    q0, k0, v0 = rand_qkv(b, nq, nk, h, hk, d, dtype, "cuda")
    dout = torch.randn_like(q0)
    launched = []
    real_launch = plans.launch

    def launch(kernel, grid, *args, **kwargs):
        launched.append((kernel, kwargs))
        return real_launch(kernel, grid, *args, **kwargs)
    monkeypatch.setattr(plans, "launch", launch)

    def grads(on: bool):
        monkeypatch.setattr(backward_gluon, "FUSED_DQ_ZERO_IN_PREPROCESS", on)
        monkeypatch.setattr(backward_gluon, "FUSED_DQ_CAST_REVERSE", on)
        plans.clear()
        res = []
        for _ in range(2):                                  # recorded, then replayed
            launched.clear()
            q, k, v = (t.clone().requires_grad_(True) for t in (q0, k0, v0))
            torch.manual_seed(1234)
            out = flash_attn_func(q, k, v, dropout_p=p, causal=causal, window_size=window, deterministic=False)
            out.backward(dout)
            res.append((q.grad, k.grad, v.grad))
            if len(res) == 1:
                kinds = [kk for kk, _ in launched]
                assert backward_gluon.attn_bwd_fused_gluon_kernel in kinds, "the fused route did not run"
                assert (zero_f32_kernel in kinds) is not on
                pre = [kw for kk, kw in launched if kk is bwd_preprocess_kernel]
                assert len(pre) == 1 and ("DQ_ACCUM" in pre[0]) is on
                cast = [kw for kk, kw in launched if kk is cast_kernel]
                assert len(cast) == 1 and cast[0].get("REVERSE", False) is on
        return res

    old = grads(False)
    new = grads(True)
    scale = d ** -0.5
    kw = dict(softmax_scale=scale, window_left=window[0], window_right=0 if causal else window[1])
    truth = lowp = None
    if p == 0:
        truth = reference.attention_grad(dout.double(), q0.double(), k0.double(), v0.double(), **kw)
        lowp = reference.attention_grad(dout, q0, k0, v0, **kw)
    for dq, dk, dv in new:
        assert torch.equal(dk, old[0][1]) and torch.equal(dv, old[0][2])
        diff = (dq.float() - old[0][0].float()).abs().max().item()
        assert diff <= 2e-2 * old[0][0].float().abs().max().item(), diff
        assert torch.isfinite(dq).all()
        if truth is not None:
            assert_close("dq", dq, truth[0], lowp[0], 3, dtype)
