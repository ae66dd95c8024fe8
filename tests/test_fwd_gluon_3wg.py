"""kernels/fwd_gluon.py NUM_CONSUMERS = 3 (session 29, written offline): the plain PERSISTENT
Gluon forward with three 64-row consumer warpgroups (192 query rows a CTA) at D = 64, host side
launchers/forward_gluon.py (num_consumers=3, launch_geometry, check_consumers), switch
launchers.policy.GLUON_FWD_CONSUMERS (D = 64: 3 since session 29's H200 A/B).

CPU: the launch geometry (grid, descriptor boxes, cdiv query blocks), the validation, the
kernel arguments of a launch (plans.launch replaced by a recorder), fwd_into's tile choice
and the route's switch. GPU (Hopper): numerics against float64 with the repo's criterion
(tests/helpers.py: at most 2x PyTorch's same-dtype error), Nq not a multiple of 192, GQA,
Nq != Nk, few CTAs (every CTA loops), the rows past the sequence's end not written, the
route with the switch flipped; and the outputs bitwise the 2-consumer kernel's where both
run (every row's tiles, wgmma shapes and softmax arithmetic are the same in both kernels;
only which warpgroup owns a row changes).
"""
import contextlib

import pytest
import torch

from flashtriton.kernels import fwd_gluon
from flashtriton.launchers import common, forward_gluon, plans, policy
from flashtriton.launchers.forward_gluon import attention_fwd_gluon, launch_geometry

from conftest import DEVICE
from helpers import assert_close, check_attention, rand_qkv, reference_pair, spy
from test_fwd_gluon import IS_HOPPER, check, hopper


# ---------------------------------------------------------------------------------------
# CPU: geometry, validation, launch arguments, switch
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("b, nq, h, num_programs, grid", [
    (2, 2048, 32, 132, (132,)),       # cdiv(2048, 192) = 11 blocks a sequence, 704 tiles
    (1, 64, 1, 132, (1,)),            # one block, one live consumer
    (1, 384, 2, 132, (4,)),           # 2 blocks a sequence exactly
    (4, 448, 3, 5, (5,)),             # cdiv(448, 192) = 3 -> 36 tiles on 5 CTAs
])
def test_launch_geometry_three_consumers(b, nq, h, num_programs, grid):
    assert launch_geometry(b, nq, h, 192, True, num_programs, 3) == (64, grid)


def test_launch_geometry_two_consumers_unchanged():
    """The 2-consumer kernel's geometry as before: BLOCK_M / 2 rows a box, Nq // BLOCK_M blocks."""
    assert launch_geometry(2, 2048, 4, 128, True, 132) == (64, (128,))
    assert launch_geometry(2, 2048, 4, 128, True, 100) == (64, (100,))
    assert launch_geometry(2, 2048, 4, 128, False, None) == (64, (16, 8))


def test_consumers3_config_fits_shared_memory():
    """Q (BLOCK_M x D) plus NUM_STAGES K and V tiles within 227 KB (offline: 120 KB at D = 64);
    64 rows a consumer (one wgmma M tile)."""
    for d, (bm, bn, stages) in fwd_gluon.CONSUMERS3_CONFIG.items():
        assert bm == 3 * 64, d
        assert 2 * d * (bm + 2 * stages * bn) + 1024 <= 227 * 1024, d
    assert set(fwd_gluon.CONSUMERS3_CONFIG) == {64}


def qkv(b=1, nq=384, nk=256, h=4, hk=2, d=64, dtype=torch.bfloat16):
    return rand_qkv(b, nq, nk, h, hk, d, dtype, DEVICE)


@pytest.mark.parametrize("n", [4, 1, 0, True, 2.0, "3"])
def test_rejects_num_consumers(n):
    with pytest.raises(ValueError, match=r"^num_consumers: expected 2 or 3"):
        attention_fwd_gluon(*qkv(), 0.1, persistent=True, num_consumers=n)


@pytest.mark.parametrize("kw", [dict(), dict(persistent=True, causal=True), dict(persistent=True, window=(64, 0)),
                                dict(persistent=True, dropout_p=0.1, rng=torch.zeros(2, dtype=torch.int64)),
                                dict(persistent=True, causal=True, scheduled=True),
                                dict(persistent=True, pingpong=True)])
def test_rejects_three_consumers_outside_plain_persistent(kw):
    # (the causal one-block forward has its own 3-consumer variant since the causal helper,
    # tests/test_fwd_gluon_causal_3wg.py; persistent causal and one-block plain still have none)
    with pytest.raises(ValueError, match=r"^num_consumers=3: the plain persistent forward or the causal one-block "
                                         r"forward only"):
        attention_fwd_gluon(*qkv(), 0.1, num_consumers=3, **kw)


def test_rejects_three_consumers_head_dim():
    with pytest.raises(ValueError, match=r"^num_consumers=3: head dim 128 not supported"):
        attention_fwd_gluon(*qkv(d=128), 0.1, persistent=True, num_consumers=3)


@pytest.mark.parametrize("nq", [96, 100, 0])
def test_rejects_nq_not_a_multiple_of_64(nq):
    with pytest.raises(ValueError, match=rf"^q: sequence length {nq} not a positive multiple of BLOCK_M = 64"):
        attention_fwd_gluon(*qkv(nq=nq), 0.1, persistent=True, num_consumers=3)


@pytest.mark.skipif(IS_HOPPER, reason="a Hopper GPU launches instead")
@pytest.mark.parametrize("nq", [320, 64, 2048])
def test_valid_three_consumer_call_reaches_the_device_check(nq):
    """Nq a multiple of 64 but not of 192 passes the host checks (CPU: the device error)."""
    with pytest.raises(ValueError, match=r"needs a CUDA \(Hopper\) device|needs compute capability 9"):
        attention_fwd_gluon(*qkv(nq=nq), 0.1, persistent=True, num_consumers=3)


def _recorded_launch(monkeypatch, num_consumers, nq=320, b=2, h=4, hk=2, d=64):
    """_launch_into's launch on CPU tensors with plans.launch (and the device context) replaced:
    (grid, args, kwargs)."""
    got = []
    monkeypatch.setattr(torch.cuda, "device", lambda device: contextlib.nullcontext())
    monkeypatch.setattr(forward_gluon.plans, "launch", lambda kernel, grid, *a, **kw: got.append((grid, a, kw)))
    q, k, v = rand_qkv(b, nq, 256, h, hk, d, torch.bfloat16, "cpu")
    o = torch.empty_like(q)
    lse = torch.empty(b, h, nq, dtype=torch.float32)
    table = fwd_gluon.CONSUMERS3_CONFIG if num_consumers == 3 else fwd_gluon.DEFAULT_CONFIG
    bm, bn, st = table[d]
    forward_gluon._launch_into(q, k, v, o, lse, 0.125, bm, bn, st, False, persistent=True, num_programs=132,
                               num_consumers=num_consumers)()
    assert len(got) == 1
    return got[0]


def test_launch_arguments_three_consumers(monkeypatch):
    """NUM_CONSUMERS=3, BLOCK_M 192, Q / O descriptors of 64-row boxes, the persistent grid
    over cdiv(Nq, 192) blocks a sequence (Nq = 320: 2 blocks, the second with one consumer
    past the end), B and the head count as the kernel reads them."""
    grid, args, kw = _recorded_launch(monkeypatch, 3)
    assert grid == (min(132, 2 * 2 * 4),)
    assert kw["NUM_CONSUMERS"] == 3 and kw["BLOCK_M"] == 192 and kw["BLOCK_N"] == 128 and kw["NUM_STAGES"] == 3
    assert kw["PERSISTENT"] and not (kw["CAUSAL"] or kw["WINDOW"] or kw["DROPOUT"] or kw["SCHEDULED"])
    q_desc, k_desc, v_desc, o_desc = args[:4]
    assert list(q_desc.block_shape) == [64, 64] and list(o_desc.block_shape) == [64, 64]
    assert list(k_desc.block_shape) == [128, 64] and list(v_desc.block_shape) == [128, 64]
    assert list(q_desc.shape) == [2 * 320, 4 * 64] and list(k_desc.shape) == [2 * 256, 2 * 64]
    lse, nq, nk, h, group = args[4:9]
    assert (nq, nk, h, group) == (320, 256, 4, 2) and args[10] == 2     # batch


def test_launch_arguments_two_consumers_unchanged(monkeypatch):
    """The 2-consumer launch passes no NUM_CONSUMERS (the kernel's default): its compiled
    kernel and launch-plan entry stay those of before."""
    grid, args, kw = _recorded_launch(monkeypatch, 2, nq=384)
    assert "NUM_CONSUMERS" not in kw and kw["BLOCK_M"] == 128
    assert grid == (min(132, 3 * 2 * 4),)
    assert list(args[0].block_shape) == [64, 64]


@pytest.mark.parametrize("kw, expect", [
    (dict(persistent=True, num_consumers=3), (3, 192)),
    (dict(persistent=True), (2, 128)),
    (dict(persistent=False, num_consumers=3), (2, 128)),           # one block a CTA: no 3-consumer kernel
    (dict(persistent=True, causal=True, num_consumers=3), (2, 128)),
    (dict(persistent=True, window=(64, 0), num_consumers=3), (2, 128)),
])
def test_fwd_into_tile(monkeypatch, kw, expect):
    """fwd_into takes CONSUMERS3_CONFIG's tile only for plain persistent calls; else the
    2-consumer kernel at DEFAULT_CONFIG's, whatever num_consumers says."""
    assert fwd_into_tiles(monkeypatch, kw) == [expect]


def fwd_into_tiles(monkeypatch, kw) -> list:
    """[(num_consumers, BLOCK_M)] that forward_gluon.fwd_into(**kw) launched on a (1, 384, 4, 64)
    call, its kernel launch replaced by a recorder (also test_fwd_gluon_causal_3wg's)."""
    got = []

    def fake(q, k, v, o, lse, scale, block_m, block_n, stages, pingpong, causal=False, persistent=False,
             num_programs=None, band=None, scheduled=False, window=None, dropout_p=0.0, rng=None, num_consumers=2):
        got.append((num_consumers, block_m))
        return lambda: None
    monkeypatch.setattr(forward_gluon, "_launch_into", fake)
    q, k, v = qkv(nq=384)
    forward_gluon.fwd_into(q, k, v, torch.empty_like(q), None, 0.125, **kw)
    return got


def test_gluon_fwd_consumers_switch(monkeypatch):
    """policy.gluon_fwd_consumers: the table at 3 for D = 64 (session 29's H200 A/B) gives 3
    for plain persistent D = 64 calls only (causal, one block a CTA, other head dims: 2;
    the causal table's own switch is test_fwd_gluon_causal_3wg's); off (2), 2 everywhere."""
    assert policy.GLUON_FWD_CONSUMERS == {64: 3}
    monkeypatch.setitem(policy.GLUON_FWD_CONSUMERS, 64, 2)
    monkeypatch.setitem(policy.GLUON_FWD_CAUSAL_CONSUMERS, 64, 2)
    for bd in (64, 128):
        for causal in (False, True):
            for persistent in (False, True):
                assert policy.gluon_fwd_consumers(bd, causal, persistent) == 2
    monkeypatch.setitem(policy.GLUON_FWD_CONSUMERS, 64, 3)
    monkeypatch.setitem(policy.GLUON_FWD_CONSUMERS, 128, 3)
    assert policy.gluon_fwd_consumers(64, False, True) == 3
    assert policy.gluon_fwd_consumers(64, True, True) == 2
    assert policy.gluon_fwd_consumers(64, False, False) == 2
    assert policy.gluon_fwd_consumers(128, False, True) == 2       # no 3-consumer tile at D = 128


@pytest.mark.parametrize("table, expect", [({64: 2}, 2), ({64: 3}, 3)])
def test_route_passes_num_consumers(monkeypatch, table, expect):
    """launchers.forward hands the switch's consumer count to fwd_into for the plain Gluon
    route (CPU: the rule forced, fwd_into replaced by a recorder)."""
    from flashtriton import flash_attn_func
    from flashtriton.launchers import forward
    import flashtriton

    monkeypatch.setattr(forward, "gluon_fwd", lambda *a: True)
    monkeypatch.setattr(policy, "GLUON_FWD_CONSUMERS", dict(table))
    # (session 52: D = 64 plain 512 / 1k run O_STAGE, which takes 2 consumers whatever this table says; that route has
    # its own tests in test_fwd_gluon_o_stage.py)
    monkeypatch.setattr(policy, "GLUON_FWD_O_STAGE", {})
    plans.clear()
    got = []

    def fake_fwd_into(q, k, v, out, lse, scale, causal=False, persistent=False, num_consumers=2, **kw):
        got.append((causal, persistent, num_consumers))
        out.zero_()
        lse.zero_()
    monkeypatch.setattr(forward_gluon, "fwd_into", fake_fwd_into)
    q, k, v = rand_qkv(1, 512, 512, 2, 1, 64, torch.bfloat16, DEVICE)
    with flashtriton.use_backend("triton"):
        flash_attn_func(q, k, v)
        flash_attn_func(q, k, v, causal=True)
    plans.clear()
    assert got == [(False, policy.GLUON_FWD_PERSISTENT["plain"], expect if policy.GLUON_FWD_PERSISTENT["plain"]
                    else 2), (True, policy.GLUON_FWD_PERSISTENT["causal"],
                              2 if policy.GLUON_FWD_PERSISTENT["causal"] else 3)], got    # (causal table: 3)


# ---------------------------------------------------------------------------------------
# GPU (Hopper): numerics
# ---------------------------------------------------------------------------------------
@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("b, nq, nk, h, hk", [
    (1, 2048, 2048, 4, 4),      # 2048 = 10 x 192 + 128: the last block's third consumer past the end
    (2, 320, 384, 4, 2),        # GQA, Nq != Nk, 320 = 192 + 128
    (3, 448, 256, 6, 3),        # Nq > Nk, 448 = 2 x 192 + 64: two consumers past the end
    (1, 64, 128, 2, 1),         # one block, one live consumer
    (2, 1152, 1024, 8, 2),      # 1152 = 6 x 192 exactly
    (1, 4096, 4096, 2, 2),
])
@pytest.mark.parametrize("num_programs", [None, 7])
def test_three_consumers_match_reference_gpu(dtype, b, nq, nk, h, hk, num_programs):
    check(*rand_qkv(b, nq, nk, h, hk, 64, dtype, "cuda"), persistent=True, num_programs=num_programs,
          num_consumers=3)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("b, nq, nk, h, hk", [(2, 1024, 1024, 8, 2), (1, 2048, 4096, 4, 4), (3, 384, 640, 6, 2)])
@pytest.mark.parametrize("num_programs", [None, 5, 1])
def test_three_consumers_bitwise_two_consumers_gpu(b, nq, nk, h, hk, num_programs):
    """Where both kernels run (Nq a multiple of 128), the 3-consumer outputs are bitwise the
    2-consumer kernel's: each row meets the same tiles in the same order through the same
    64-row wgmma shapes and the same softmax code."""
    q, k, v = rand_qkv(b, nq, nk, h, hk, 64, torch.bfloat16, "cuda")
    o2, lse2 = attention_fwd_gluon(q, k, v, 0.11, persistent=True)
    o3, lse3 = attention_fwd_gluon(q, k, v, 0.11, persistent=True, num_programs=num_programs, num_consumers=3)
    assert torch.equal(o2, o3) and torch.equal(lse2, lse3)


@pytest.mark.gpu
@hopper
def test_three_consumers_negative_scale_and_stages_gpu():
    q, k, v = rand_qkv(2, 704, 512, 4, 2, 64, torch.bfloat16, "cuda")           # 704 = 3 x 192 + 128
    check(q, k, v, scale=-0.1, persistent=True, num_consumers=3)
    check(q, k, v, scale=0.5, persistent=True, num_consumers=3, num_stages=4)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("nq", [320, 448])
def test_three_consumers_write_nothing_past_the_sequence_gpu(nq):
    """The last block's consumers past Nq store no O and no lse. lse: the first B entries of
    a larger buffer filled with a sentinel, the extra batch untouched (its pointer store is
    unmasked by row: a dead slice's would land in the next head's). O: its descriptor spans
    only the B * Nq rows, so a dead slice of batch 0 would land in batch 1's first rows
    (TMA clips only at the tensor's end): every batch's O and lse against the float64
    reference (the criterion), which such a store would break."""
    b, h, hk, d = 2, 4, 2, 64
    scale = d ** -0.5
    q, k, v = rand_qkv(b, nq, 256, h, hk, d, torch.bfloat16, "cuda")
    out = torch.full((b, nq, h, d), 7.0, dtype=q.dtype, device="cuda")
    lse_big = torch.full((b + 1, h, nq), 7.0, dtype=torch.float32, device="cuda")
    lse = lse_big[:b]
    forward_gluon.fwd_into(q, k, v, out, lse, scale, persistent=True, num_consumers=3)
    assert (lse_big[b] == 7.0).all()
    truth, lowp = reference_pair(q, k, v, softmax_scale=scale)
    assert_close("out", out, truth["out"], lowp["out"], 2, q.dtype)
    assert_close("lse", lse, truth["lse"], lowp["lse"], 2, q.dtype)


@pytest.mark.gpu
@hopper
def test_flash_attn_func_takes_three_consumers_gpu(monkeypatch):
    """flash_attn_func at D = 64, N = 4k with the switch at 3 routes to the 3-consumer kernel
    (fwd_into with num_consumers=3) and its output, lse and backward pass the criterion."""
    monkeypatch.setitem(policy.GLUON_FWD_CONSUMERS, 64, 3)
    plans.clear()
    called = spy(monkeypatch, forward_gluon, "fwd_into", record=lambda *a, **kw: kw.get("num_consumers"))
    n = max(4096, policy.GLUON_FWD_MIN_N[64])
    check_attention("triton", *rand_qkv(1, n, n, 4, 2, 64, torch.bfloat16, "cuda"), check_probs=False)
    plans.clear()
    assert called == [3], called


def test_one_block_grid_limit(monkeypatch):
    """Review, session 30: a one-block-a-CTA Gluon launch's grid is (blocks, B * H), whose
    second dimension stops at 65535; with causal D = 64 routed from 4k, B * H = 65600 fits in
    memory. The rule refuses such calls (they keep the Triton kernels' 1-D grids) and
    launch_geometry raises before any launch; persistent launches have no such limit."""
    monkeypatch.setattr(policy, "interpreting", lambda: False)
    monkeypatch.setattr(policy, "_warp_spec_switch", lambda q: True)
    causal = common.AttnParams(0.125, window_right=0)

    def rule(b, h):                                  # meta tensors: shapes and strides only
        q, k, v = (torch.empty(b, 4096, h, 64, dtype=torch.bfloat16, device="meta") for _ in range(3))
        return policy.gluon_fwd(q, k, v, causal, None, False, 64, 4096, 4096)
    assert rule(65535, 1) and rule(8191, 8)
    assert not rule(65536, 1) and not rule(8200, 8)
    with pytest.raises(ValueError, match=r"^q: B \* H = 65600 above 65535"):
        launch_geometry(8200, 4096, 8, 192, False, None, 3)
    assert launch_geometry(8200, 4096, 8, 192, True, 132, 3)[1] == (132,)
    assert launch_geometry(65535, 4096, 1, 128, False, None)[1] == (32, 65535)
