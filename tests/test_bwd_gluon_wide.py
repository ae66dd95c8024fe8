"""The fused Gluon backward's WIDE tile (a session-29 helper; routed at D = 64 since session 30; kernels/bwd_gluon_fused.py
FUSED_WIDE_CONFIG: BLOCK_M = 128 query rows a ring tile at D = 64 instead of 64, dq_accum's
descriptor at a 128-byte swizzle). Host side launchers/backward_gluon.py (prepare_fused(...,
wide=True), fused_block_m), switch policy.GLUON_BWD_FUSED_WIDE (D = 64, plain and causal).

CPU: the switch's default, the rule, the validation, the launch arguments. GPU (Hopper,
@pytest.mark.gpu): gradients against float64 by the repo criterion (tests/helpers.py: at
most 3x PyTorch's same-dtype error; outputs NaN-poisoned before each call by conftest's
autouse fixture), causal and not, Nq != Nk, GQA, rows without keys; dk / dv BITWISE the
64-row kernel's (same per-element arithmetic, the same k16 wgmma steps in the same order
into the dK / dV accumulators: a 128-row tile is two 64-row tiles back to back; under
causal the extra rows of the first 128-row tile are masked, adding exact zeros; non-causal
with rotate=False on both, since ROTATE's start tile depends on the tile count); the route
through flash_attn_func with the table set.
"""
import os

import pytest
import torch

from flashtriton.kernels import bwd_gluon_fused
from flashtriton.launchers import backward_gluon, policy
from flashtriton.launchers.backward_gluon import fused_block_m, fused_gluon

from conftest import HAS_CUDA
from helpers import assert_close, rand_qkv
from test_bwd_gluon import args, call_fused, check_fused, inputs

IS_HOPPER = HAS_CUDA and torch.cuda.get_device_capability()[0] == 9
INTERPRETING = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")
hopper = pytest.mark.skipif(not IS_HOPPER or INTERPRETING,
                            reason="needs a Hopper GPU (compute capability 9.x), not the interpreter")


# ---------------------------------------------------------------------------------------
# CPU: switch, rule, validation, launch arguments
# ---------------------------------------------------------------------------------------
def test_wide_switch_table(monkeypatch):
    """Routed for D = 64 plain and causal after the GPU A/B (bench/gpu/s30_fused_bwd_d64_ab.py,
    session 30: +5-6% non-causal, +10% causal); with the table empty, no call takes it."""
    assert policy.GLUON_BWD_FUSED_WIDE == {"plain": frozenset({64}), "causal": frozenset({64})}
    monkeypatch.setattr(policy, "GLUON_BWD_FUSED_WIDE", {"plain": frozenset(), "causal": frozenset()})
    assert bwd_gluon_fused.FUSED_WIDE_CONFIG == {64: (128, 128, 2)}
    assert bwd_gluon_fused.FUSED_CONFIG == {64: (64, 128, 4), 128: (64, 128, 2)}     # unchanged
    for causal in (False, True):
        for nq in (128, 2048, 16384):
            assert not fused_block_m(64, causal, False, False, nq)


def test_wide_rule(monkeypatch):
    """fused_block_m with the table set: the listed kind and head dim, Nq a multiple of 128,
    no window, no dropout; the other kind's table is its own."""
    monkeypatch.setattr(policy, "GLUON_BWD_FUSED_WIDE", {"plain": frozenset({64}), "causal": frozenset()})
    assert fused_block_m(64, False, False, False, 2048)
    assert fused_block_m(64, False, False, False, 128)
    assert not fused_block_m(64, False, False, False, 192)       # a multiple of 64, not of 128
    assert not fused_block_m(64, True, False, False, 2048)       # causal: its own (empty) entry
    assert not fused_block_m(64, False, True, False, 2048)       # window
    assert not fused_block_m(64, False, False, True, 2048)       # dropout
    assert not fused_block_m(128, False, False, False, 2048)     # no WIDE tile at D = 128
    monkeypatch.setattr(policy, "GLUON_BWD_FUSED_WIDE", {"plain": frozenset(), "causal": frozenset({64})})
    assert fused_block_m(64, True, False, False, 4096) and not fused_block_m(64, False, False, False, 4096)


def test_wide_validation():
    """prepare_fused(wide=True): ValueError before any launch, naming what is wrong."""
    with pytest.raises(ValueError, match=r"^wide: expected a bool"):
        call_fused(args(d=64), wide=1)
    with pytest.raises(ValueError, match=r"^wide: the WIDE tile is compiled for head dims \[64\] only"):
        call_fused(args(d=128), wide=True)
    with pytest.raises(ValueError, match=r"^wide: the WIDE tile takes no dropout"):
        call_fused(args(d=64), wide=True, dropout_p=0.1, keys=torch.zeros(8, dtype=torch.int32))
    with pytest.raises(ValueError, match=r"^wide: the WIDE tile takes no sliding window"):
        call_fused(args(d=64), wide=True, window=(64, 0))
    with pytest.raises(ValueError, match=r"^q: sequence length 192 not a positive multiple of BLOCK_M = 128"):
        call_fused(args(d=64, nq=192), wide=True)
    with pytest.raises(ValueError, match=r"^num_stages: 3 stages with wide=True spill registers"):
        call_fused(args(d=64), wide=True, num_stages=3)
    with pytest.raises(ValueError, match=r"^num_stages: 4 stages need 257 KB of shared memory at D = 64"):
        call_fused(args(d=64), wide=True, num_stages=4)


def test_wide_shared_memory():
    """2 stages: K, V 32 KB + ring 2 x (Q, dO 16 KB each) + dS^T 4 x 16 KB + dq staging 2 x
    16 KB = 192 KB (+1: the offline compile reports 193); 3 stages 224 (+1) fit but spill."""
    bm, bn, st = bwd_gluon_fused.FUSED_WIDE_CONFIG[64]
    kb = backward_gluon.fused_smem_bytes(64, st, bm, bn) / 1024
    assert 192 < kb < 194
    assert 224 < backward_gluon.fused_smem_bytes(64, 3, bm, bn) / 1024 < 226


def test_wide_launch_args():
    """The launch's arguments for the WIDE tile: BLOCK_M = 128, 2 stages, the grid of the
    64-row tile (key blocks x B * Hk), Q / dO boxes of 128 rows, dq_accum's box (128, D / 2)
    at a 128-byte swizzle; the 64-row launch keeps its (64, 32) box at 64 bytes."""
    q, k, v, dout, lse, delta = args(b=2, nq=256, nk=512, h=4, hk=2, d=64)
    bm, bn, st = bwd_gluon_fused.FUSED_WIDE_CONFIG[64]
    out = backward_gluon._fused_launch_args(q, k, v, dout, lse, delta, 0.125, bm, bn, st, True)
    dq, dk, dv, dq_accum, grid, a, kw = out
    assert grid == (512 // 128, 2 * 2)
    assert kw["BLOCK_M"] == 128 and kw["BLOCK_N"] == 128 and kw["NUM_STAGES"] == 2 and kw["HEAD_DIM"] == 64
    assert list(a[0].block_shape) == [128, 64] and list(a[1].block_shape) == [128, 64]       # Q, dO
    assert list(a[2].block_shape) == [64, 64]                                                # K halves
    assert list(a[6].block_shape) == [128, 32] and a[6].layout.swizzle_byte_width == 128     # dq_accum
    out64 = backward_gluon._fused_launch_args(q, k, v, dout, lse, delta, 0.125, 64, 128, 4, True)
    assert list(out64[5][6].block_shape) == [64, 32] and out64[5][6].layout.swizzle_byte_width == 64


def test_wide_route_launch(monkeypatch):
    """fused_into (the library's route) launches the WIDE tile where the table lists the call
    and Nq is a multiple of 128, else the 64-row tile; the kernel's run replaced by a
    recorder (CPU tensors)."""
    seen = []
    monkeypatch.setattr(backward_gluon, "_run_fused", lambda *a, **kw: seen.append(a[6]))

    def route(nq, causal):
        q, k, v, dout, lse, delta = args(nq=nq, nk=256, d=64)
        dq, dk, dv = (torch.empty_like(t) for t in (q, k, v))
        backward_gluon.fused_into(q, k, v, dout, lse, delta, 0.125, causal, dq, dk, dv)
        return seen[-1]["BLOCK_M"], seen[-1]["NUM_STAGES"]
    assert route(256, False) == (128, 2) and route(256, True) == (128, 2)       # routed (session 30)
    assert route(192, False) == (64, 4)                                         # Nq not a multiple of 128
    monkeypatch.setattr(policy, "GLUON_BWD_FUSED_WIDE", {"plain": frozenset(), "causal": frozenset()})
    assert route(256, False) == (64, 4) and route(256, True) == (64, 4)         # table empty


# ---------------------------------------------------------------------------------------
# GPU (Hopper): numerics
# ---------------------------------------------------------------------------------------
def check_wide(b, nq, nk, h, hk, dtype, causal=False, **kw):
    """test_bwd_gluon.check_fused (poisoned outputs, float64 criterion) on the WIDE tile."""
    return check_fused(b, nq, nk, h, hk, 64, dtype, causal, wide=True, **kw)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("h, hk", [(4, 4), (8, 2), (6, 1)])
@pytest.mark.parametrize("n", [128, 1024])
def test_wide_matches_reference_gpu(causal, dtype, h, hk, n):
    check_wide(2, n, n, h, hk, dtype, causal)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("nq, nk", [(256, 1024), (1024, 256), (128, 384), (384, 128), (128, 1024), (2048, 1024)])
def test_wide_nq_differs_from_nk_gpu(causal, nq, nk):
    """Nq != Nk (causal: bottom-right; Nq > Nk leaves rows that see no key: dq = 0 there)."""
    check_wide(1, nq, nk, 4, 2, torch.bfloat16, causal)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("rotate", [True, False])
def test_wide_rotate_gpu(rotate):
    """ROTATE on and off (the start tile per key block counts 128-row tiles here)."""
    check_wide(2, 2048, 2048, 4, 2, torch.bfloat16, False, rotate=rotate)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("nq, nk, h, hk", [(1024, 1024, 4, 2), (256, 1024, 4, 4), (1024, 256, 6, 1)])
def test_wide_dkdv_bitwise_gpu(causal, nq, nk, h, hk):
    """dk / dv bitwise the 64-row kernel's (module doc: the same k16 steps in the same order;
    rotate=False on both for the plain kernel, CAUSAL has no rotation); dq within fp32
    summation order of it (both non-deterministic)."""
    (q, k, v, dout, lse, delta, scale), (dq, dk, dv) = check_wide(1, nq, nk, h, hk, torch.bfloat16, causal,
                                                                   rotate=False)
    dq0, dk0, dv0 = fused_gluon(q, k, v, dout, lse, delta, scale, causal, rotate=False)
    assert torch.equal(dk, dk0), f"dk differs: max {(dk.float() - dk0.float()).abs().max().item():.2e}"
    assert torch.equal(dv, dv0), f"dv differs: max {(dv.float() - dv0.float()).abs().max().item():.2e}"
    torch.testing.assert_close(dq.float(), dq0.float(), atol=2e-2, rtol=2e-2)


@pytest.mark.gpu
@hopper
def test_wide_repeatable_gpu():
    """dk / dv bitwise over repeated launches of one prepared call (dq is not: fp32 order)."""
    q, k, v, dout, lse, delta, scale, _, _ = inputs(2, 1024, 1024, 4, 2, 64, torch.bfloat16, True)
    launch = backward_gluon.prepare_fused(q, k, v, dout, lse, delta, scale, True, wide=True)
    _, dk, dv = (t.clone() for t in launch())
    for _ in range(5):
        _, dk2, dv2 = launch()
        assert torch.equal(dk, dk2) and torch.equal(dv, dv2)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("causal", [False, True])
def test_wide_library_route_gpu(monkeypatch, causal):
    """flash_attn_func's backward (deterministic=False) through the WIDE tile with the table
    set (its launch seen by a spy), gradients by the repo criterion against float64."""
    import flashtriton
    from flashtriton import reference

    monkeypatch.setattr(policy, "GLUON_BWD_FUSED_WIDE", {"plain": frozenset({64}), "causal": frozenset({64})})
    run = backward_gluon._run_fused
    seen = []
    monkeypatch.setattr(backward_gluon, "_run_fused", lambda *a, **kw: (seen.append(a[6]["BLOCK_M"]), run(*a, **kw)))
    n = 2048 if not causal else 1024          # GLUON_BWD_FUSED_MIN_N: plain 2k, causal 512 at D = 64
    q, k, v = (t.requires_grad_() for t in rand_qkv(1, n, n, 2, 2, 64, torch.bfloat16, "cuda"))
    dout = torch.randn_like(q)
    out = flashtriton.flash_attn_func(q, k, v, causal=causal, deterministic=False)
    dq, dk, dv = torch.autograd.grad(out, (q, k, v), dout)
    assert seen and seen[-1] == 128, "the WIDE tile did not launch"
    kw = dict(softmax_scale=64 ** -0.5, window_right=0 if causal else -1)
    truth = reference.attention_grad(dout.double(), *(t.detach().double() for t in (q, k, v)), **kw)
    lowp = reference.attention_grad(dout, *(t.detach() for t in (q, k, v)), **kw)
    for i, (name, t) in enumerate((("dq", dq), ("dk", dk), ("dv", dv))):
        assert_close(name, t, truth[i], lowp[i], 3, torch.bfloat16)
