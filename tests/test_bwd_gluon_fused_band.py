"""The fused Gluon backward's BAND launch order (kernels/bwd_gluon_fused.py _fused_pids; session 36,
an A/B, launchers/backward_gluon.prepare_fused(band=)): the causal kernel's key blocks dealt
rank-major over bands of `band` batch x KV heads on a 1-D grid, so that every head's heaviest key
block (block 0 sees every query tile) starts first. The same per-block computation in another
order: dk / dv bitwise band 0's, dq up to fp32 summation order (the dQ reduce-adds), all against
float64 under the library's criterion. Validation and launch arguments need no GPU."""
import pytest
import torch

from flashtriton.launchers import backward_gluon, policy
from flashtriton.launchers.backward_gluon import fused_gluon, prepare_fused

from conftest import DEVICE
from helpers import assert_close, rand_qkv
from test_bwd_gluon import hopper, inputs


def args(b=2, nq=256, nk=256, h=4, hk=2, d=128, dtype=torch.bfloat16):
    q, k, v = rand_qkv(b, nq, nk, h, hk, d, dtype, DEVICE)
    return [q, k, v, torch.randn_like(q), torch.zeros(b, h, nq, device=DEVICE), torch.zeros(b, h, nq, device=DEVICE)]


@pytest.mark.parametrize("band", [-1, 2.0, True, "4"])
def test_rejects_band_type(band):
    with pytest.raises(ValueError, match=r"^band: expected a non-negative int"):
        prepare_fused(*args(), 0.1, True, band=band)


def test_rejects_band_without_causal_or_with_window():
    with pytest.raises(ValueError, match=r"^band: the causal kernel only"):
        prepare_fused(*args(), 0.1, False, band=2)
    with pytest.raises(ValueError, match=r"^band: the causal kernel only"):
        prepare_fused(*args(), 0.1, False, window=(64, 0), band=2)


def test_rejects_band_not_dividing_heads():
    with pytest.raises(ValueError, match=r"^band: 3 does not divide B \* Hk = 4"):
        prepare_fused(*args(), 0.1, True, band=3)


def test_band_launch_args():
    """A 1-D grid of Nk / BLOCK_N * B * Hk CTAs and BAND in the kernel's keywords; band 0 keeps the
    (Nk / BLOCK_N, B * Hk) grid and leaves BAND out (the kernel of before)."""
    q, k, v, dout, lse, delta = args()
    base = backward_gluon._fused_launch_args(q, k, v, dout, lse, delta, 0.1, 64, 128, 2, False, True)
    banded = backward_gluon._fused_launch_args(q, k, v, dout, lse, delta, 0.1, 64, 128, 2, False, True, band=2)
    assert base[4] == (2, 4) and "BAND" not in base[6]
    assert banded[4] == (8,) and banded[6]["BAND"] == 2


def test_fused_band_rule(monkeypatch):
    """policy.fused_band: the largest power-of-two band with band x key blocks <= the CTAs a band
    that divides B * Hk; below 2: 0. The table by head dim (empty: 0 everywhere)."""
    assert [policy.fused_band(128, nb, bh, 256) for nb, bh in ((16, 128), (32, 64), (64, 32), (128, 16))] == \
        [16, 8, 4, 2]
    assert policy.fused_band(128, 16, 6, 256) == 2 and policy.fused_band(128, 256, 16, 256) == 0
    assert policy.fused_band(128, 16, 1, 256) == 0
    monkeypatch.setattr(policy, "GLUON_BWD_FUSED_BAND", {})
    assert policy.fused_band(128, 16, 128) == 0
    monkeypatch.setattr(policy, "GLUON_BWD_FUSED_BAND", {128: 256})
    assert policy.fused_band(128, 16, 128) == 16 and policy.fused_band(64, 16, 128) == 0


def test_band_route_launch(monkeypatch):
    """fused_into (the library's route) passes BAND and the 1-D grid for a causal call whose head
    dim the table lists, not for plain, windowed or dropout calls (the kernel's run replaced by a
    recorder; CPU tensors)."""
    seen = []
    monkeypatch.setattr(backward_gluon, "_run_fused", lambda *a, **kw: seen.append((a[4], a[6])))
    monkeypatch.setattr(policy, "GLUON_BWD_FUSED_BAND", {128: 256})

    def route(causal, **kw):
        q, k, v, dout, lse, delta = args(b=2, nq=512, nk=512, h=8, hk=4)      # 4 key blocks, B * Hk = 8
        dq, dk, dv = (torch.empty_like(t) for t in (q, k, v))
        backward_gluon.fused_into(q, k, v, dout, lse, delta, 0.1, causal, dq, dk, dv, **kw)
        grid, kwargs = seen[-1]
        return kwargs.get("BAND", 0), grid
    assert route(True) == (8, (32,))
    assert route(False) == (0, (4, 8))
    assert route(False, window=(128, 0))[0] == 0
    keys = torch.zeros(8, dtype=torch.int32)
    assert route(True, dropout_p=0.1, keys=keys)[0] == 0
    monkeypatch.setattr(policy, "GLUON_BWD_FUSED_BAND", {})
    assert route(True) == (0, (4, 8))


def _order(n_blocks, heads, band):
    """The kernel's _fused_pids in Python: [(pid_n, pid_bh)] by program id."""
    out = []
    for pid in range(n_blocks * heads):
        band_idx, r = divmod(pid, n_blocks * band)
        out.append((r // band, band_idx * band + r % band))
    return out


@pytest.mark.parametrize("n_blocks, heads, band", [(4, 8, 2), (16, 16, 4), (3, 4, 4), (1, 6, 3)])
def test_band_order_is_a_permutation_heaviest_first(n_blocks, heads, band):
    """Every (key block, head) exactly once; within a band, block 0 of every head comes before any
    head's block 1 (the heaviest first)."""
    order = _order(n_blocks, heads, band)
    assert sorted(order) == [(n, bh) for n in range(n_blocks) for bh in range(heads)]
    for start in range(0, len(order), n_blocks * band):
        blocks = [n for n, _ in order[start:start + n_blocks * band]]
        assert blocks == sorted(blocks) and blocks[:band] == [0] * band


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("d, dtype, wide", [(128, torch.bfloat16, False), (128, torch.float16, False),
                                            (64, torch.bfloat16, True)])
@pytest.mark.parametrize("b, nq, nk, h, hk", [(2, 1024, 1024, 8, 4), (2, 768, 1024, 4, 2), (1, 1024, 640, 8, 8)])
def test_band_matches_band0_gpu(d, dtype, wide, b, nq, nk, h, hk):
    """Bands 2 and B * Hk: float64 criterion; dk / dv bitwise band 0's; dq within fp32 summation
    order of band 0's; rows without keys (Nq > Nk) dq = 0."""
    q, k, v, dout, lse, delta, scale, truth, lowp = inputs(b, nq, nk, h, hk, d, dtype, True)
    kw = dict(wide=True, dq_split_m=True) if wide else {}
    dq0, dk0, dv0 = (t.clone() for t in fused_gluon(q, k, v, dout, lse, delta, scale, True, **kw))
    for band in (2, b * hk):
        dq, dk, dv = fused_gluon(q, k, v, dout, lse, delta, scale, True, band=band, **kw)
        for name, t in (("dq", dq), ("dk", dk), ("dv", dv)):
            assert torch.isfinite(t).all(), f"band {band} {name}: unwritten (NaN-poisoned) or non-finite output"
        assert torch.equal(dk, dk0) and torch.equal(dv, dv0), f"band {band}: dk / dv not bitwise band 0's"
        assert (dq.float() - dq0.float()).abs().max() <= 2e-2 * dq0.float().abs().max(), band
        assert_close("dq", dq, truth[0], lowp[0], 3, dtype)
        assert_close("dk", dk, truth[1], lowp[1], 3, dtype)
        assert_close("dv", dv, truth[2], lowp[2], 3, dtype)
        if nq > nk:
            assert (dq[:, :nq - nk] == 0).all(), "rows without keys must get dq = 0"
