"""kernels/fwd_gluon.py NUM_CONSUMERS = 3 with CAUSAL, one block a CTA (a session-29 helper;
routed at D = 64 from 4k since session 30's H200 A/B): 192-row query blocks, three 64-row consumer warpgroups
each computing only the key tiles its own rows reach (_fwd_consume_causal3), the rest of the
block's tiles drained (_fwd_skip_tiles). Host side launchers/forward_gluon.py (causal=True,
persistent=False, num_consumers=3), switch launchers.policy.GLUON_FWD_CAUSAL_CONSUMERS ({64: 3}
since bench/gpu/s30_gluon_causal_3wg_ab.py measured it).

CPU: the per-consumer tile split evaluated from the kernel's own source lines against a
brute-force visibility model (bottom-right causal, query i sees key j iff j <= i + Nk - Nq) over
many (Nq, Nk), and against the 2-consumer kernel's split for the same 64-row groups (the
basis of the bitwise claim); the launch geometry and arguments, the validation, fwd_into's
tile choice and the route's switch. GPU (Hopper): numerics against float64 with the repo's
criterion (tests/helpers.py), Nq not a multiple of 192, Nq != Nk both ways (rows that see no
key: O = 0, lse = +inf), Nk - Nq = 64 mod 128 (a shape the 2-consumer kernel cannot run), GQA,
negative scale, 4 stages, outputs NaN-poisoned before the call (tests/conftest.py) so every
row must be written; nothing written past the sequence's end; bitwise the 2-consumer causal
kernel's where both run; the route with the switch flipped.
"""
import contextlib
import re

import pytest
import torch

from flashtriton.kernels import fwd_gluon
from flashtriton.launchers import forward_gluon, plans, policy
from flashtriton.launchers.forward_gluon import attention_fwd_gluon, launch_geometry

from conftest import DEVICE
from helpers import check_attention, rand_qkv, spy
from test_fwd_gluon import IS_HOPPER, check, hopper
from test_fwd_gluon_3wg import fwd_into_tiles

BM3, BN, _ = fwd_gluon.CONSUMERS3_CONFIG[64]      # (192, 128, 3)
BM2 = fwd_gluon.DEFAULT_CONFIG[64][0]              # 128


# ---------------------------------------------------------------------------------------
# CPU: the tile split, from the kernel's own lines
# ---------------------------------------------------------------------------------------
def _kernel_line(fn, name: str) -> str:
    """The right-hand side of the (single) line `name = ...` of a gluon.jit function's source,
    within the CAUSAL branch for _tile_coords (its first assignment of name there)."""
    src = fn.src
    src = src[src.rindex('"""') + 3:]                 # the code, not the docstring
    if fn is fwd_gluon._tile_coords:
        src = src[src.index("    if CAUSAL:"):src.index("    elif WINDOW:")]
    hits = re.findall(rf"^\s*{name} = ([^#\n]+)", src, flags=re.M)
    assert hits, f"{name} not assigned in {fn.__name__}"
    return hits[0].strip()


# gl.* on ints; every // and cdiv in these lines has a non-negative left operand (gl.maximum(., 0)),
# where Python's floor division is the GPU's truncating one
_NS = dict(gl=type("gl", (), dict(minimum=staticmethod(min), maximum=staticmethod(max),
                                  cdiv=staticmethod(lambda a, b: -(-a // b)))))
_N_LOAD = _kernel_line(fwd_gluon._tile_coords, "n_load")
_N_FULL0 = _kernel_line(fwd_gluon._tile_coords, "n_full0")
_N_FULL1 = _kernel_line(fwd_gluon._tile_coords, "n_full1")
_N_OWN = _kernel_line(fwd_gluon._fwd_consume_causal3, "n_own")
_N_FULL = _kernel_line(fwd_gluon._fwd_consume_causal3, "n_full")
_D0 = _kernel_line(fwd_gluon._fwd_consume_causal3, "d0")
_ROW0 = _kernel_line(fwd_gluon._fwd_consume_causal3, "row0")


def _ev(expr, **env):
    return eval(expr, dict(_NS), env)  # noqa: S307  (the kernel's own arithmetic on ints)


def split3(nq, nk, pid_m, wg):
    """(live, n_load, n_own, n_full) of consumer wg of 3-consumer block pid_m, by the kernel's lines."""
    diag = pid_m * BM3 + nk - nq                                   # _tile_coords' diag
    n_load = _ev(_N_LOAD, diag=diag, BLOCK_M=BM3, BLOCK_N=BN, n_tiles=nk // BN)
    row0 = _ev(_ROW0, pid_m=pid_m, BLOCK_M=BM3, WG=wg, HALF_M=BM3 // 3)
    d0 = _ev(_D0, diag=diag, WG=wg, HALF_M=BM3 // 3)
    n_own = _ev(_N_OWN, d0=d0, HALF_M=BM3 // 3, BLOCK_N=BN, n_load=n_load)
    n_full = _ev(_N_FULL, d0=d0, BLOCK_N=BN, n_own=n_own)
    return row0 < nq, n_load, n_own, n_full


def split2(nq, nk, pid_m, h):
    """(n_tiles, n_full) of half h of the 2-consumer causal kernel's block pid_m (both halves
    compute all n_load tiles there)."""
    diag = pid_m * BM2 + nk - nq
    n_load = _ev(_N_LOAD, diag=diag, BLOCK_M=BM2, BLOCK_N=BN, n_tiles=nk // BN)
    n_full = _ev(_N_FULL1 if h else _N_FULL0, diag=diag, HALF_M=BM2 // 2, BLOCK_N=BN, n_load=n_load)
    return n_load, n_full


_SHAPES = [(nq, nk) for nq in (64, 128, 192, 256, 320, 384, 448, 576, 640, 1024, 2048)
           for nk in (128, 256, 384, 512, 1024, 2048)]


@pytest.mark.parametrize("nq, nk", _SHAPES)
def test_split_matches_visibility(nq, nk):
    """For every block and live consumer: n_own is exactly the tiles its rows reach (at least 1),
    tiles [1, n_full) are fully visible to all its rows (unmasked is exact), tiles [n_own, n_load)
    hidden from all its rows (drained, not computed), 1 <= n_full <= n_own <= n_load <= Nk / 128,
    at most one masked tile besides the peel and one drained tile; the loader's n_load is the
    live consumers' union; consumer 0 is always live (n_m = cdiv(Nq, 192))."""
    n_m = -(-nq // BM3)
    rows64 = BM3 // 3
    for pid_m in range(n_m):
        owns = []
        for wg in range(3):
            live, n_load, n_own, n_full = split3(nq, nk, pid_m, wg)
            r0 = pid_m * BM3 + wg * rows64
            assert live == (r0 < nq)
            if not live:
                assert wg > 0
                continue
            last_key = [r + nk - nq for r in (r0, r0 + rows64 - 1)]      # rows' last visible key, first / last row
            reach = [t for t in range(nk // BN) if t * BN <= last_key[1]]  # tiles some row of its sees
            assert n_own == max(1, len(reach)), (pid_m, wg)
            assert all(t * BN + BN - 1 <= last_key[0] for t in range(1, n_full)), (pid_m, wg)
            assert all(t * BN > last_key[1] for t in range(n_own, n_load)), (pid_m, wg)
            assert 1 <= n_full <= n_own <= n_load <= nk // BN
            assert n_own - n_full <= 1 and n_load - n_own <= 1, (pid_m, wg, n_full, n_own, n_load)
            owns.append(n_own)
        assert n_load == max(owns), (pid_m, owns, n_load)


@pytest.mark.parametrize("nq, nk", [s for s in _SHAPES if s[0] % BM2 == 0])
def test_split_equals_two_consumer_kernel(nq, nk):
    """Where the 2-consumer causal kernel runs (Nq a multiple of 128), every 64-row group gets
    the same (tiles, unmasked tiles) in both kernels: the same peel, loops, masks and
    arithmetic a row, hence the GPU test's bitwise claim."""
    rows64 = BM3 // 3
    for g in range(nq // rows64):                      # 64-row groups of the sequence
        live, _, n_own, n_full = split3(nq, nk, g // 3, g % 3)
        assert live
        assert (n_own, n_full) == split2(nq, nk, g // 2, g % 2), (g, nq, nk)


def test_split_drains_in_a_typical_block():
    """Nq = Nk = 2048 (the A/B's shortest): block p = 2q needs 3q + 1, 3q + 1, 3q + 2 tiles,
    block 2q + 1 3q + 2, 3q + 3, 3q + 3 (the drained tile the masking design would compute);
    the last block (rows 1920-2111) has consumer 2 past the end, consumers 0 / 1 all 16 tiles."""
    for q in range(5):
        assert [split3(2048, 2048, 2 * q, w)[2] for w in range(3)] == [3 * q + 1, 3 * q + 1, 3 * q + 2]
        assert [split3(2048, 2048, 2 * q + 1, w)[2] for w in range(3)] == [3 * q + 2, 3 * q + 3, 3 * q + 3]
    assert [split3(2048, 2048, 10, w)[:3] for w in range(3)] == [(True, 16, 16), (True, 16, 16), (False, 16, 16)]


# ---------------------------------------------------------------------------------------
# CPU: geometry, validation, launch arguments, switch
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("b, nq, h, grid", [
    (8, 2048, 32, (11, 256)),       # cdiv(2048, 192) = 11 blocks a sequence
    (1, 64, 1, (1, 1)),             # one block, one live consumer
    (2, 384, 3, (2, 6)),
    (1, 16384, 32, (86, 32)),       # 16384 = 85 x 192 + 64
])
def test_launch_geometry_causal_one_block(b, nq, h, grid):
    assert launch_geometry(b, nq, h, BM3, False, None, 3) == (64, grid)


def qkv(b=1, nq=384, nk=256, h=4, hk=2, d=64, dtype=torch.bfloat16):
    return rand_qkv(b, nq, nk, h, hk, d, dtype, DEVICE)


@pytest.mark.parametrize("kw", [dict(causal=True, persistent=True), dict(causal=True, window=(64, 0)),
                                dict(causal=True, window=(-1, 0)),
                                dict(causal=True, dropout_p=0.1, rng=torch.zeros(2, dtype=torch.int64)),
                                dict(causal=True, pingpong=True), dict(causal=False)])
def test_rejects_three_consumers_outside_its_variants(kw):
    with pytest.raises(ValueError, match=r"^num_consumers=3: the plain persistent forward or the causal one-block "
                                         r"forward only"):
        attention_fwd_gluon(*qkv(), 0.1, num_consumers=3, **kw)


def test_rejects_causal_three_consumers_head_dim():
    with pytest.raises(ValueError, match=r"^num_consumers=3: head dim 128 not supported"):
        attention_fwd_gluon(*qkv(d=128), 0.1, causal=True, num_consumers=3)


@pytest.mark.parametrize("nq", [96, 32])
def test_rejects_causal_nq_not_a_multiple_of_64(nq):
    with pytest.raises(ValueError, match=rf"^q: sequence length {nq} not a positive multiple of BLOCK_M = 64"):
        attention_fwd_gluon(*qkv(nq=nq), 0.1, causal=True, num_consumers=3)


@pytest.mark.skipif(IS_HOPPER, reason="a Hopper GPU launches instead")
@pytest.mark.parametrize("nq", [320, 64, 448])
def test_valid_causal_three_consumer_call_reaches_the_device_check(nq):
    with pytest.raises(ValueError, match=r"needs a CUDA \(Hopper\) device|needs compute capability 9"):
        attention_fwd_gluon(*qkv(nq=nq), 0.1, causal=True, num_consumers=3)


def _recorded_launch(monkeypatch, num_consumers, nq=448, nk=512, b=2, h=4, hk=2, d=64):
    got = []
    monkeypatch.setattr(torch.cuda, "device", lambda device: contextlib.nullcontext())
    monkeypatch.setattr(forward_gluon.plans, "launch", lambda kernel, grid, *a, **kw: got.append((grid, a, kw)))
    q, k, v = rand_qkv(b, nq, nk, h, hk, d, torch.bfloat16, "cpu")
    o = torch.empty_like(q)
    lse = torch.empty(b, h, nq, dtype=torch.float32)
    table = fwd_gluon.CONSUMERS3_CONFIG if num_consumers == 3 else fwd_gluon.DEFAULT_CONFIG
    bm, bn, st = table[d]
    forward_gluon._launch_into(q, k, v, o, lse, 0.125, bm, bn, st, False, causal=True, persistent=False,
                               num_consumers=num_consumers)()
    assert len(got) == 1
    return got[0]


def test_launch_arguments_causal_three_consumers(monkeypatch):
    """NUM_CONSUMERS=3, CAUSAL, one block a CTA: grid (cdiv(448, 192) = 3, B * H), BLOCK_M 192,
    64-row Q / O boxes, the plain kernel's other flags off."""
    grid, args, kw = _recorded_launch(monkeypatch, 3)
    assert grid == (3, 2 * 4)
    assert kw["NUM_CONSUMERS"] == 3 and kw["BLOCK_M"] == 192 and kw["BLOCK_N"] == 128 and kw["NUM_STAGES"] == 3
    assert kw["CAUSAL"] and not (kw["PERSISTENT"] or kw["WINDOW"] or kw["DROPOUT"] or kw["SCHEDULED"]
                                 or kw["PINGPONG"])
    q_desc, k_desc, v_desc, o_desc = args[:4]
    assert list(q_desc.block_shape) == [64, 64] and list(o_desc.block_shape) == [64, 64]
    assert list(k_desc.block_shape) == [128, 64] and list(v_desc.block_shape) == [128, 64]
    assert tuple(args[5:9]) == (448, 512, 4, 2)


def test_launch_arguments_causal_two_consumers_unchanged(monkeypatch):
    grid, args, kw = _recorded_launch(monkeypatch, 2, nq=512)
    assert "NUM_CONSUMERS" not in kw and kw["BLOCK_M"] == 128 and kw["CAUSAL"] and not kw["PERSISTENT"]
    assert grid == (4, 2 * 4)


@pytest.mark.parametrize("kw, expect", [
    (dict(causal=True, persistent=False, num_consumers=3), (3, 192)),
    (dict(causal=True, persistent=False), (2, 128)),
    (dict(causal=True, persistent=True, num_consumers=3), (2, 128)),     # no persistent causal 3-consumer kernel
    (dict(causal=False, persistent=False, num_consumers=3), (2, 128)),   # no one-block plain one
    (dict(causal=True, window=(64, 0), num_consumers=3), (2, 128)),
    (dict(causal=True, dropout_p=0.1, rng=torch.zeros(2, dtype=torch.int64), num_consumers=3), (2, 128)),
])
def test_fwd_into_tile_causal(monkeypatch, kw, expect):
    assert fwd_into_tiles(monkeypatch, kw) == [expect]


def test_gluon_fwd_causal_consumers_switch(monkeypatch):
    """On since session 30's A/B (GLUON_FWD_CAUSAL_CONSUMERS = {64: 3}); off (2), no call takes
    3; on, 3 only for causal one-block D = 64; the plain table does not reach causal calls,
    nor the causal table plain ones."""
    assert policy.GLUON_FWD_CAUSAL_CONSUMERS == {64: 3}
    monkeypatch.setitem(policy.GLUON_FWD_CAUSAL_CONSUMERS, 64, 2)
    for bd in (64, 128):
        for persistent in (False, True):
            assert policy.gluon_fwd_consumers(bd, True, persistent) == 2
    monkeypatch.setitem(policy.GLUON_FWD_CAUSAL_CONSUMERS, 64, 3)
    monkeypatch.setitem(policy.GLUON_FWD_CAUSAL_CONSUMERS, 128, 3)
    monkeypatch.setitem(policy.GLUON_FWD_CONSUMERS, 64, 2)
    assert policy.gluon_fwd_consumers(64, True, False) == 3
    assert policy.gluon_fwd_consumers(64, True, True) == 2
    assert policy.gluon_fwd_consumers(64, False, True) == 2
    assert policy.gluon_fwd_consumers(64, False, False) == 2
    assert policy.gluon_fwd_consumers(128, True, False) == 2        # no 3-consumer tile at D = 128
    monkeypatch.setitem(policy.GLUON_FWD_CAUSAL_CONSUMERS, 64, 2)
    monkeypatch.setitem(policy.GLUON_FWD_CONSUMERS, 64, 3)
    assert policy.gluon_fwd_consumers(64, True, False) == 2
    assert policy.gluon_fwd_consumers(64, False, True) == 3


@pytest.mark.parametrize("table, expect", [({64: 2}, 2), ({64: 3}, 3)])
def test_route_passes_causal_num_consumers(monkeypatch, table, expect):
    """launchers.forward hands the causal switch's consumer count to fwd_into (CPU: the route
    forced, fwd_into replaced by a recorder); one block a CTA as GLUON_FWD_PERSISTENT says."""
    from flashtriton import flash_attn_func
    import flashtriton
    from flashtriton.launchers import forward

    monkeypatch.setattr(forward, "gluon_fwd", lambda *a: True)
    monkeypatch.setattr(policy, "GLUON_FWD_CAUSAL_CONSUMERS", dict(table))
    monkeypatch.setitem(policy.GLUON_FWD_PERSISTENT, "causal", False)
    plans.clear()
    got = []

    def fake_fwd_into(q, k, v, out, lse, scale, causal=False, persistent=False, num_consumers=2, **kw):
        got.append((causal, persistent, num_consumers))
        out.zero_()
        lse.zero_()
    monkeypatch.setattr(forward_gluon, "fwd_into", fake_fwd_into)
    q, k, v = rand_qkv(1, 512, 512, 2, 1, 64, torch.bfloat16, DEVICE)
    with flashtriton.use_backend("triton"):
        flash_attn_func(q, k, v, causal=True)
    plans.clear()
    assert got == [(True, False, expect)], got


# ---------------------------------------------------------------------------------------
# GPU (Hopper): numerics
# ---------------------------------------------------------------------------------------
@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("b, nq, nk, h, hk", [
    (1, 2048, 2048, 4, 4),      # 2048 = 10 x 192 + 128: the last block's consumer 2 past the end
    (2, 320, 1024, 4, 2),       # GQA, Nq < Nk
    (3, 448, 256, 6, 3),        # Nq > Nk: rows 0-191 see no key; 448 = 2 x 192 + 64
    (2, 448, 512, 4, 1),        # Nk - Nq = 64 (not a multiple of 128: the 2-consumer kernel cannot run it)
    (1, 64, 128, 2, 1),         # one block, one live consumer
    (2, 1152, 1152, 8, 2),      # 1152 = 6 x 192 exactly
    (1, 4096, 4096, 2, 2),
])
def test_causal_three_consumers_match_reference_gpu(dtype, b, nq, nk, h, hk):
    check(*rand_qkv(b, nq, nk, h, hk, 64, dtype, "cuda"), causal=True, num_consumers=3)


@pytest.mark.gpu
@hopper
def test_causal_three_consumers_negative_scale_and_stages_gpu():
    q, k, v = rand_qkv(2, 704, 768, 4, 2, 64, torch.bfloat16, "cuda")     # 704 = 3 x 192 + 128
    check(q, k, v, scale=-0.1, causal=True, num_consumers=3)
    check(q, k, v, scale=0.5, causal=True, num_consumers=3, num_stages=4)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("b, nq, nk, h, hk", [(2, 1024, 1024, 8, 2), (1, 2048, 4096, 4, 4), (3, 384, 640, 6, 2),
                                              (2, 1024, 512, 4, 4)])
def test_causal_three_consumers_bitwise_two_consumers_gpu(b, nq, nk, h, hk):
    """Where both kernels run (Nq, Nk multiples of 128) the outputs are bitwise the 2-consumer
    causal kernel's: every 64-row group gets the same tiles, unmasked / masked split, masks and
    softmax code in both (test_split_equals_two_consumer_kernel); only the warpgroup owning a
    group and the drained tiles differ. (A difference of an ulp here would mean the two
    compiles contract the softmax arithmetic differently, not a wrong mask: the float64 tests
    above decide correctness.)"""
    q, k, v = rand_qkv(b, nq, nk, h, hk, 64, torch.bfloat16, "cuda")
    o2, lse2 = attention_fwd_gluon(q, k, v, 0.11, causal=True)
    o3, lse3 = attention_fwd_gluon(q, k, v, 0.11, causal=True, num_consumers=3)
    assert torch.equal(o2, o3) and torch.equal(lse2, lse3)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("nq, nk", [(320, 256), (448, 512), (2048, 2048)])
def test_causal_three_consumers_write_nothing_past_the_sequence_gpu(nq, nk):
    """A consumer past Nq stores no O and no lse: out / lse as the first B entries of larger
    buffers filled with a sentinel; the extra batch stays as it was (a TMA store of a dead
    slice would land in the next batch's rows, an lse store in the next head's)."""
    b, h, hk, d = 2, 4, 2, 64
    q, k, v = rand_qkv(b, nq, nk, h, hk, d, torch.bfloat16, "cuda")
    out_big = torch.full((b + 1, nq, h, d), 7.0, dtype=q.dtype, device="cuda")
    lse_big = torch.full((b + 1, h, nq), 7.0, dtype=torch.float32, device="cuda")
    out, lse = out_big[:b], lse_big[:b]
    forward_gluon.fwd_into(q, k, v, out, lse, d ** -0.5, causal=True, persistent=False, num_consumers=3)
    torch.cuda.synchronize()
    assert (out_big[b] == 7.0).all() and (lse_big[b] == 7.0).all()
    o_ref, lse_ref = attention_fwd_gluon(q, k, v, d ** -0.5, causal=True, num_consumers=3)
    assert torch.equal(out, o_ref) and torch.equal(lse, lse_ref)


@pytest.mark.gpu
@hopper
def test_flash_attn_func_takes_causal_three_consumers_gpu(monkeypatch):
    """flash_attn_func causal at D = 64 with the causal switch at 3 (and the Gluon causal route
    from 2k) runs fwd_into with num_consumers=3, one block a CTA, and its output, lse and
    backward pass the criterion."""
    monkeypatch.setitem(policy.GLUON_FWD_CAUSAL_CONSUMERS, 64, 3)
    monkeypatch.setitem(policy.GLUON_FWD_CAUSAL_MIN_N, 64, 2048)
    monkeypatch.setitem(policy.GLUON_FWD_PERSISTENT, "causal", False)
    plans.clear()
    called = spy(monkeypatch, forward_gluon, "fwd_into",
                 record=lambda *a, **kw: (kw.get("causal"), kw.get("persistent"), kw.get("num_consumers")))
    check_attention("triton", *rand_qkv(1, 2048, 2048, 4, 2, 64, torch.bfloat16, "cuda"), causal=True,
                    check_probs=False)
    plans.clear()
    assert called == [(True, False, 3)], called
