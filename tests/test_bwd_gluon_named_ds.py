"""The fused Gluon backward's NAMED_DS (session 39; kernels/bwd_gluon_fused.py): the two consumer warpgroups hand
their dS^T halves over (ds_ready) and release the dS^T buffers (ds_free) by hardware named barriers (bar.arrive /
bar.sync of 256 threads, ids 8-15) instead of mbarriers, whose Gluon arrival is one elected thread behind a
warpgroup bar.sync. Host side launchers/backward_gluon.py (prepare_fused(..., named_ds=True), fused_named), switch
policy.GLUON_BWD_FUSED_NAMED_DS (empty = off until the H200 A/B: bench/gpu/s39_named_ds_ab.py).

CPU: the switch's default, the rule, the validation, the launch arguments, the route by a recorder.
GPU (Hopper, @pytest.mark.gpu): gradients against float64 by the repo criterion (outputs NaN-poisoned before each
call by conftest's autouse fixture) for plain, causal, window and the D = 64 WIDE / DQ_SPLIT_M tile, Nq != Nk, GQA,
one-tile CTAs (T = 1: the epilogue's lone ds_free sync) and odd tile counts; dk / dv BITWISE the kernel without it
(the same wgmmas on the same operands in the same order: only the synchronisation changes), dq within fp32
summation order; repeated launches (a named barrier left part-arrived would hang or corrupt the next CTA).
"""
import os

import pytest
import torch

from flashtriton.kernels import bwd_gluon_fused
from flashtriton.launchers import backward_gluon, policy
from flashtriton.launchers.backward_gluon import fused_gluon, fused_named

from conftest import HAS_CUDA
from helpers import assert_close
from test_bwd_gluon import args, call_fused, check_fused, inputs
from test_bwd_gluon_window import check_window

IS_HOPPER = HAS_CUDA and torch.cuda.get_device_capability()[0] == 9
INTERPRETING = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")
hopper = pytest.mark.skipif(not IS_HOPPER or INTERPRETING,
                            reason="needs a Hopper GPU (compute capability 9.x), not the interpreter")


# ---------------------------------------------------------------------------------------
# CPU: switch, rule, validation, launch arguments, route
# ---------------------------------------------------------------------------------------
def test_named_switch_off_by_default():
    """Not routed until the GPU A/B has measured it; the ids clear of the partitions' own barriers (0-3) and
    within the 16 a CTA has."""
    assert policy.GLUON_BWD_FUSED_NAMED_DS == {}
    assert bwd_gluon_fused.NAMED_READY == 8 and bwd_gluon_fused.NAMED_FREE == 12
    for d in (64, 128):
        for causal, windowed in ((False, False), (True, False), (False, True)):
            assert not fused_named(d, causal, windowed, False)


def test_named_rule(monkeypatch):
    """fused_named with the table set: the listed head dim under the call's kind, never with DEFER_DQ."""
    monkeypatch.setattr(policy, "GLUON_BWD_FUSED_NAMED_DS", {"plain": frozenset({128}), "causal": frozenset({64})})
    assert fused_named(128, False, False, False)
    assert not fused_named(64, False, False, False)             # not listed under plain
    assert fused_named(64, True, False, False)
    assert not fused_named(128, True, False, False)             # not listed under causal
    assert not fused_named(128, False, True, False)             # window: not listed
    assert not fused_named(128, False, False, True)             # DEFER_DQ


def test_named_validation():
    """prepare_fused(named_ds=...): ValueError before any launch, naming what is wrong."""
    with pytest.raises(ValueError, match=r"^named_ds: expected a bool"):
        call_fused(args(), named_ds=1)
    with pytest.raises(ValueError, match=r"^named_ds: not with defer_dq=True"):
        call_fused(args(), named_ds=True, defer_dq=True)


def test_named_launch_args():
    """NAMED_DS=True among the launch's constexprs only when asked (absent otherwise: the binder's key and the
    kernel of before); everything else equal."""
    q, k, v, dout, lse, delta = args(b=2, nq=256, nk=512, h=4, hk=2, d=128)
    base = backward_gluon._fused_launch_args(q, k, v, dout, lse, delta, 0.125, 64, 128, 2, True)
    nmd = backward_gluon._fused_launch_args(q, k, v, dout, lse, delta, 0.125, 64, 128, 2, True, named=True)
    assert "NAMED_DS" not in base[6]
    assert nmd[6].pop("NAMED_DS") is True
    assert nmd[6] == base[6] and nmd[4] == base[4] and len(nmd[5]) == len(base[5])


def test_named_route_launch(monkeypatch):
    """fused_into (the library's route) passes NAMED_DS where the table lists the call's kind, not otherwise; the
    kernel's run replaced by a recorder (CPU tensors)."""
    seen = []
    monkeypatch.setattr(backward_gluon, "_run_fused", lambda *a, **kw: seen.append(a[6]))

    def route(causal, d=128, window=None):
        q, k, v, dout, lse, delta = args(nq=256, nk=256, d=d)
        dq, dk, dv = (torch.empty_like(t) for t in (q, k, v))
        backward_gluon.fused_into(q, k, v, dout, lse, delta, 0.125, causal, dq, dk, dv, window=window)
        return seen[-1].get("NAMED_DS", False)
    assert not route(False) and not route(True) and not route(False, window=(64, 0))      # table empty
    monkeypatch.setattr(policy, "GLUON_BWD_FUSED_NAMED_DS", {"plain": frozenset({128}), "window": frozenset({128})})
    assert route(False) and not route(True) and not route(False, d=64) and route(False, window=(64, 0))


# ---------------------------------------------------------------------------------------
# GPU (Hopper): numerics
# ---------------------------------------------------------------------------------------
def _bitwise_against_mbarriers(q, k, v, dout, lse, delta, scale, got, **kw):
    """dk / dv bitwise the kernel without NAMED_DS; dq within fp32 summation order of it."""
    dq, dk, dv = got
    dq0, dk0, dv0 = fused_gluon(q, k, v, dout, lse, delta, scale, **kw)
    assert torch.equal(dk, dk0), f"dk differs: max {(dk.float() - dk0.float()).abs().max().item():.2e}"
    assert torch.equal(dv, dv0), f"dv differs: max {(dv.float() - dv0.float()).abs().max().item():.2e}"
    torch.testing.assert_close(dq.float(), dq0.float(), atol=2e-2, rtol=2e-2)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("nq, nk, h, hk", [(1024, 1024, 4, 2), (64, 128, 2, 2), (256, 1024, 4, 4), (1024, 256, 6, 1),
                                           (192, 384, 3, 3)])
def test_named_matches_reference_gpu(dtype, causal, nq, nk, h, hk):
    """D = 128, plain and causal; (64, 128): one ring tile a CTA (T = 1: only the epilogue syncs ds_free);
    (192, 384) with 3 heads a KV head: 9 tiles, an odd count (the buffers' last use mid-pair)."""
    (q, k, v, dout, lse, delta, scale), got = check_fused(2, nq, nk, h, hk, 128, dtype, causal, named_ds=True)
    _bitwise_against_mbarriers(q, k, v, dout, lse, delta, scale, got, causal=causal)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("nq, nk, h, hk", [(1024, 1024, 4, 2), (128, 256, 2, 2), (1024, 256, 6, 1)])
def test_named_wide_splitm_gpu(causal, nq, nk, h, hk):
    """D = 64's routed tile (WIDE, DQ_SPLIT_M) with NAMED_DS."""
    kw = dict(wide=True, dq_split_m=True)
    (q, k, v, dout, lse, delta, scale), got = check_fused(2, nq, nk, h, hk, 64, torch.bfloat16, causal,
                                                          named_ds=True, **kw)
    _bitwise_against_mbarriers(q, k, v, dout, lse, delta, scale, got, causal=causal, **kw)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("d", [128, 64])
@pytest.mark.parametrize("window, nq, nk", [((1024, 0), 2048, 2048), ((128, 128), 1024, 2048), ((0, 37), 1024, 256)])
def test_named_window_gpu(d, window, nq, nk):
    """The WINDOW variant (the same tile body) with NAMED_DS; (0, 37) at Nq > Nk has rows that see no key."""
    got = check_window(2, nq, nk, 4, 2, d, torch.bfloat16, window, named_ds=True)
    # (check_window draws its own inputs: the bitwise check runs here on fresh ones)
    q, k, v, dout, lse, delta, scale, _, _ = inputs(1, nq, nk, 4, 2, d, torch.bfloat16)
    a = fused_gluon(q, k, v, dout, lse, delta, scale, window=window, named_ds=True)
    _bitwise_against_mbarriers(q, k, v, dout, lse, delta, scale, a, window=window)
    assert all(torch.isfinite(t).all() for t in got)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("causal", [False, True])
def test_named_repeatable_gpu(causal):
    """Repeated launches of one prepared call: dk / dv bitwise every time, dq within the criterion (a named barrier
    left part-arrived by one CTA would hang or mis-pair the next CTA's on that SM)."""
    q, k, v, dout, lse, delta, scale, truth, lowp = inputs(4, 2048, 2048, 8, 2, 128, torch.bfloat16, causal)
    launch = backward_gluon.prepare_fused(q, k, v, dout, lse, delta, scale, causal, named_ds=True)
    dq, dk, dv = (t.clone() for t in launch())
    for _ in range(10):
        dq2, dk2, dv2 = launch()
        assert torch.equal(dk, dk2) and torch.equal(dv, dv2)
        assert_close("dq", dq2, truth[0], lowp[0], 3, torch.bfloat16)
