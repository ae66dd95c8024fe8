"""kernels/bwd_gluon_fused.py's WINDOW variant (session 28): the fused backward under a
sliding window (flash-attn's window_size = (left, right): query i sees key j iff
i + Nk - Nq - left <= j <= i + Nk - Nq + right, -1 unbounded), each key block visiting
only the query tiles of the band, the select only on tiles crossing a band edge.

CPU (run by CI, under the interpreter): the variant's tile schedule, its @triton.jit index
helpers (fused_window_tiles, fused_window_edge, fused_window_keep: the very functions the
Gluon kernel calls) run in a mirror of the kernel's loops, against the dense band
(reference.visible_mask): every (query, key) pair of the band visited exactly once and kept,
every other pair of a visited tile masked, no (key block, query tile) visited that holds no
pair of the band (but the one tile of a block no row sees, masked whole); then a float64
emulation of the kernel's tile math through that schedule (P from the forward's lse, +inf for
rows that see no key; dS = P (dP - delta); dQ, dK, dV summed over the visited tiles only)
against reference.attention_grad in float64. Plus the host side: the launcher's window
reduction and arguments, and the route (policy.GLUON_BWD_FUSED_MIN_N["window"]: from 2k).

GPU (marked gpu; Hopper): gradients through the kernel against float64 with the project's
criterion (error <= 3x PyTorch's same-dtype error, outputs poisoned), through the launcher
and through flash_attn_func with the route forced.
"""
import os

import pytest
import torch
import triton
import triton.language as tl

from flashtriton import reference
from flashtriton.kernels import bwd_gluon_fused
from flashtriton.launchers import backward_gluon

from conftest import DEVICE, HAS_CUDA
from helpers import assert_close, rand_qkv

IS_HOPPER = HAS_CUDA and torch.cuda.get_device_capability()[0] == 9
INTERPRETING = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")
hopper = pytest.mark.skipif(not IS_HOPPER or INTERPRETING,
                            reason="needs a Hopper GPU (compute capability 9.x), not the interpreter")

BLOCK_M, BLOCK_N = 64, 128          # FUSED_CONFIG's tile (both head dims)


# ---------------------------------------------------------------------------------------
# CPU: the tile schedule (interpreted mirror of the kernel's loops)
# ---------------------------------------------------------------------------------------
@triton.jit
def _window_schedule_mirror(VISIT, KEEP, EDGE, seqlen_q, seqlen_k, win_left, win_right, BLOCK_M: tl.constexpr,
                            BLOCK_N: tl.constexpr):
    """One (key block, ring tile t of a head, consumer WG) a program, grid (Nk / BLOCK_N,
    Nq / BLOCK_M, 2): the block's tiles as the loader and the consumers take them
    (_fused_coords -> fused_window_tiles; tile t < n_m is query tile j0 + t), the consumers'
    rel (rel0 + t * BLOCK_M, rel0 = j0 * BLOCK_M + (Nk - Nq + win_right) - the WG's first
    key) and wspan, then _fused_tile's decision (fused_window_edge) and keep^T
    (fused_window_keep; all kept on a tile crossing no edge). Adds 1 to VISIT[key, row] of
    every pair of the visited tile, writes KEEP[key, row] (1 kept / 0 masked) and EDGE[block,
    WG, query tile] (1 masked, 0 unmasked; -1 stays: not visited). VISIT / KEEP (Nk, Nq)."""
    HALF_N: tl.constexpr = BLOCK_N // 2
    pid_n = tl.program_id(0)
    t = tl.program_id(1)
    WG = tl.program_id(2)
    n0 = pid_n * BLOCK_N
    j0, n_m = bwd_gluon_fused.fused_window_tiles(n0, seqlen_q, seqlen_k, win_left, win_right, BLOCK_M, BLOCK_N)
    if t < n_m:
        rel0 = j0 * BLOCK_M + (seqlen_k - seqlen_q + win_right) - (n0 + WG * HALF_N)
        rel = rel0 + t * BLOCK_M
        wspan = win_left + win_right
        offs_c = tl.arange(0, HALF_N)
        offs_r = tl.arange(0, BLOCK_M)
        keep = tl.full([HALF_N, BLOCK_M], 1, tl.int8)
        edge = bwd_gluon_fused.fused_window_edge(rel, wspan, HALF_N, BLOCK_M)
        if edge:
            keep = bwd_gluon_fused.fused_window_keep(offs_c, offs_r, rel, wspan).to(tl.int8)
        keys = n0 + WG * HALF_N + offs_c
        rows = (j0 + t) * BLOCK_M + offs_r
        at = keys[:, None] * seqlen_q + rows[None, :]
        tl.store(VISIT + at, tl.load(VISIT + at) + 1)
        tl.store(KEEP + at, keep)
        n_q_tiles = seqlen_q // BLOCK_M
        tl.store(EDGE + (pid_n * 2 + WG) * n_q_tiles + j0 + t, edge.to(tl.int8))


def schedule(nq, nk, window):
    """The kernel's schedule for (Nq, Nk, window): (visit (Nq, Nk) int32, keep (Nq, Nk)
    bool, edge (Nk / BLOCK_N, 2, Nq / BLOCK_M) int8, (wl, wr)) from the interpreted mirror,
    with the launcher's window reduction (backward_gluon._fused_window)."""
    causal, win = backward_gluon._fused_window(window, False, nq, nk)
    assert win is not None and not causal, "a WINDOW case"
    visit = torch.zeros(nk, nq, dtype=torch.int32)
    keep = torch.zeros(nk, nq, dtype=torch.int8)
    edge = torch.full((nk // BLOCK_N, 2, nq // BLOCK_M), -1, dtype=torch.int8)
    _window_schedule_mirror[(nk // BLOCK_N, nq // BLOCK_M, 2)](visit, keep, edge, nq, nk, win[0], win[1],
                                                                BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N)
    return visit.t(), keep.t().bool(), edge, win


# (Nq, Nk, window): the (1024, 0), symmetric, right-only, left unbounded, edges off the
# tile grid (100, 37, 63, 1), Nq != Nk both ways, rows that see no key (Nq > Nk + right),
# key blocks no row sees (Nk > Nq + left), Nq a multiple of 64 but not of 128, one tile
SHAPES = [
    (2048, 2048, (1024, 0)),
    (1024, 1024, (256, 256)),
    (1024, 1024, (0, 512)),
    (1024, 1024, (-1, 128)),
    (1024, 1024, (128, -1)),
    (1024, 1024, (0, 0)),
    (512, 1024, (100, 37)),
    (1024, 512, (100, 37)),
    (1024, 256, (0, 0)),
    (256, 1024, (0, 0)),
    (192, 384, (63, 1)),
    (320, 256, (1, 63)),
    (64, 128, (5, 3)),
    (1024, 384, (200, 0)),
    (1024, 1024, (62, 62)),          # edge values one off the tile's c - r span: -62 / 62
    (512, 1024, (126, 63)),
    (1024, 1024, (1000, 62)),
    (1024, 1024, (703, 0)),           # c - r = -63 at the left edge: a fully visible tile, not masked
]


@pytest.mark.parametrize("nq, nk, window", SHAPES)
def test_window_schedule_covers_band(nq, nk, window):
    """The visited tiles cover every pair of the band exactly once and keep exactly the band;
    no (key block, query tile) without a pair of the band is visited, except one masked tile
    of a block no row sees; tiles left unmasked hold only pairs of the band."""
    if not INTERPRETING:
        pytest.skip("the interpreted mirror (CPU)")
    visit, keep, edge, win = schedule(nq, nk, window)
    band = reference.visible_mask(nq, nk, window[0], window[1], "cpu")
    assert band is not None
    assert int(visit.max()) <= 1, "a pair visited twice"
    assert (visit[band] == 1).all(), "a pair of the band never visited"
    assert torch.equal(keep & (visit == 1), band), "kept pairs differ from the band"
    # (key block, query tile) granularity: visited iff it holds a pair of the band (or is a
    # lone masked tile of a block no row sees)
    n_kb, n_qt = nk // BLOCK_N, nq // BLOCK_M
    vis_t = visit.view(n_qt, BLOCK_M, n_kb, BLOCK_N).amax(dim=(1, 3)).t() > 0       # (n_kb, n_qt)
    band_t = band.view(n_qt, BLOCK_M, n_kb, BLOCK_N).any(dim=3).any(dim=1).t()      # (n_kb, n_qt)
    for kb in range(n_kb):
        if band_t[kb].any():
            assert torch.equal(vis_t[kb], band_t[kb]), f"key block {kb}: visited tiles != the band's"
            # contiguous: the kernel walks [j0, j0 + n_m)
            idx = band_t[kb].nonzero().flatten()
            assert idx[-1] - idx[0] + 1 == idx.numel()
        else:
            assert int(vis_t[kb].sum()) == 1, f"key block {kb} (no row sees it): one tile, masked whole"
            assert (edge[kb][edge[kb] >= 0] == 1).all()
    # a WG half's tile left unmasked holds only pairs of the band (the select is skipped), and
    # a masked one some pair outside it (only tiles crossing an edge pay for the select)
    for kb in range(n_kb):
        for wg in range(2):
            for j in range(n_qt):
                blk = band[j * BLOCK_M:(j + 1) * BLOCK_M, kb * BLOCK_N + wg * 64:kb * BLOCK_N + wg * 64 + 64]
                if edge[kb, wg, j] == 0:
                    assert blk.all(), (kb, wg, j)
                elif edge[kb, wg, j] == 1:
                    assert not blk.all(), (kb, wg, j)
    # both WGs of a block visit the same tiles (the barrier protocol: every ring tile by both)
    assert torch.equal(edge[:, 0] >= 0, edge[:, 1] >= 0)


def test_window_schedule_cost_1024_0():
    """Issue 3's case (1024, 0) at Nq = Nk: 18 query tiles a key block in steady state
    (rows n0 .. n0 + 127 + 1024: 1152 rows, 18 tiles of 64; the causal kernel walks
    Nq / 64 - 2 pid_n), 3 of them masked per WG (WG 0: its diagonal tile and 2 crossing the
    left edge; WG 1: 2 at the diagonal, the first hidden from all its keys, and 1 at the left
    edge), fewer where the band runs off the last row; the N x window cost, not N^2."""
    if not INTERPRETING:
        pytest.skip("the interpreted mirror (CPU)")
    nq = nk = 2048                                               # 8 steady key blocks (CI time: 4096 took 15 s)
    visit, keep, edge, win = schedule(nq, nk, (1024, 0))
    tiles = (edge[:, 0] >= 0).sum(dim=1)                         # (n_kb,) ring tiles a head
    assert int(tiles.max()) == 18 and int(tiles[-1]) == 2        # steady state; the last block: its diagonal
    masked = (edge == 1).sum(dim=2)                              # (n_kb, 2)
    steady = (torch.arange(nk // BLOCK_N) * BLOCK_N + BLOCK_N + 1024) <= nq          # (n_kb,) band inside Nq
    assert (masked[steady] == 3).all() and int(masked.max()) == 3
    assert (tiles[steady] == 18).all()
    band_pairs = int(reference.visible_mask(nq, nk, 1024, 0, "cpu").sum())
    assert int(visit.sum()) < 1.2 * band_pairs                   # ~ N x window, not N^2


def _float64_miss(name, ours, ref, q, k, v, dout, kw) -> str:
    """The failure message of a float64 comparison that should agree to ~1e-15: where and by how much, and whether
    the inputs and a second reference call still agree with the first (session 40's CI saw this test miss once
    by 1.5e-9 under -n 2, never reproduced alone or in order: a transient result would point at state corrupted by
    an earlier test, a repeated one at the inputs)."""
    diff = (ours - ref).abs()
    at = tuple(int(i) for i in torch.unravel_index(diff.argmax(), diff.shape))
    again = reference.attention_grad(dout, q, k, v, **kw)[("dq", "dk", "dv").index(name)]
    return (f"{name}: max |diff| {diff.max().item():.3e} at {at} (ours {ours[at].item():.17g}, reference "
            f"{ref[at].item():.17g}); reference recomputed: max |change| {(again - ref).abs().max().item():.3e}; "
            f"inputs finite {all(bool(torch.isfinite(t).all()) for t in (q, k, v, dout))}")


@pytest.mark.parametrize("nq, nk, window, h, hk", [
    (512, 512, (128, 0), 2, 1), (512, 512, (64, 64), 2, 2), (256, 512, (0, 100), 4, 2),
    (512, 256, (37, 5), 2, 1), (512, 128, (0, 0), 2, 2), (128, 512, (0, 0), 2, 1), (192, 384, (-1, 1), 3, 1),
])
def test_window_schedule_float64_gradients(nq, nk, window, h, hk):
    """A float64 emulation of the kernel's tile math through the mirror's schedule: P^T =
    exp2(S^T qk_scale - lse log2 e) where kept, 0 where masked or never visited (lse from the
    forward, +inf for a row that sees no key: no NaN); dS = P (dP - delta), delta =
    rowsum(dO O); dV = P^T dO, dK = scale dS^T Q, dQ = scale dS K (dq_accum's zeros where no
    tile reduces); GQA summed over the group. Equal to reference.attention_grad in float64."""
    if not INTERPRETING:
        pytest.skip("the interpreted mirror (CPU)")
    visit, keep, _, _ = schedule(nq, nk, window)
    m = (keep & (visit == 1)).double()                                          # (Nq, Nk) the kernel's kept pairs
    b, d, scale = 2, 16, 0.3
    torch.manual_seed(1)
    q, k, v = rand_qkv(b, nq, nk, h, hk, d, torch.float64, "cpu")
    dout = torch.randn_like(q)
    kw = dict(softmax_scale=scale, window_left=window[0], window_right=window[1])
    out, lse = reference.attention(q, k, v, **kw)                               # lse (B, H, Nq), +inf: no key
    g = h // hk
    ke, ve = k.repeat_interleave(g, dim=2), v.repeat_interleave(g, dim=2)
    s = torch.einsum("bqhd,bkhd->bhqk", q, ke)
    log2e = 1.4426950408889634
    x = s * (scale * log2e) - (lse * log2e)[..., None]
    p = torch.where(m.bool(), torch.exp2(x), torch.zeros_like(x))              # masked: x = -inf, exp2 = 0
    assert torch.isfinite(p).all()
    delta = (dout * out).sum(-1).transpose(1, 2)                                # (B, H, Nq)
    dp = torch.einsum("bqhd,bkhd->bhqk", dout, ve)
    ds = p * (dp - delta[..., None])
    dq = scale * torch.einsum("bhqk,bkhd->bqhd", ds, ke)
    dk = scale * torch.einsum("bhqk,bqhd->bkhd", ds, q).reshape(b, nk, hk, g, d).sum(3)
    dv = torch.einsum("bhqk,bqhd->bkhd", p, dout).reshape(b, nk, hk, g, d).sum(3)
    truth = reference.attention_grad(dout, q, k, v, **kw)
    for name, ours, ref in (("dq", dq, truth[0]), ("dk", dk, truth[1]), ("dv", dv, truth[2])):
        assert torch.isfinite(ours).all(), name
        assert torch.allclose(ours, ref, rtol=1e-9, atol=1e-11), _float64_miss(name, ours, ref, q, k, v, dout, kw)
    no_key = ~reference.visible_mask(nq, nk, window[0], window[1], "cpu").any(dim=1)   # (Nq,)
    assert not dq[:, no_key].any(), "rows that see no key: dq = 0"


# ---------------------------------------------------------------------------------------
# CPU: host side (launcher arguments, validation, route)
# ---------------------------------------------------------------------------------------
def _args(b=1, nq=1024, nk=1024, h=4, hk=2, d=128, dtype=torch.bfloat16):
    q, k, v = rand_qkv(b, nq, nk, h, hk, d, dtype, DEVICE)
    return q, k, v, torch.randn_like(q), torch.zeros(b, h, nq, device=DEVICE), torch.zeros(b, h, nq, device=DEVICE)


def test_window_reduction():
    """backward_gluon._fused_window (forward_gluon.window_args' reduction): edges past every
    sequence are none; (-1, -1) the plain kernel, (-1, 0) CAUSAL, else WINDOW with an
    unbounded side as Nq + Nk; causal=True takes the right edge 0."""
    f = backward_gluon._fused_window
    assert f(None, False, 1024, 1024) == (False, None) and f(None, True, 1024, 1024) == (True, None)
    assert f((-1, -1), False, 1024, 1024) == (False, None)
    assert f((-1, 0), False, 1024, 1024) == (True, None) and f((5000, 0), False, 1024, 1024) == (True, None)
    assert f((1024, 0), False, 16384, 16384) == (False, (1024, 0))
    assert f((1024, -1), True, 16384, 16384) == (False, (1024, 0))
    assert f((-1, 128), False, 1024, 2048) == (False, (3072, 128))
    assert f((0, 5000), False, 1024, 1024) == (False, (0, 2048))
    with pytest.raises(ValueError, match=r"^window: "):
        f((1, 2, 3), False, 64, 128)
    with pytest.raises(ValueError, match=r"^window: with causal=True"):
        f((16, 16), True, 64, 128)


def test_window_launch_args():
    """_fused_launch_args with win: the window's sides as the kernel's win_left / win_right,
    WINDOW=True; without: both None (constexprs: the kernel of before WINDOW) and no WINDOW
    keyword (the binder's key of before)."""
    q, k, v, dout, lse, delta = _args()
    *_, args, kw = backward_gluon._fused_launch_args(q, k, v, dout, lse, delta, 0.1, 64, 128, 2, False, False,
                                                     win=(1024, 0))
    names = bwd_gluon_fused.attn_bwd_fused_gluon_kernel.arg_names
    assert names[len(args) - 2:len(args)] == ["win_left", "win_right"]
    assert args[-2:] == (1024, 0) and kw["WINDOW"] is True and kw["ROTATE"] is False
    *_, args, kw = backward_gluon._fused_launch_args(q, k, v, dout, lse, delta, 0.1, 64, 128, 2, True, False)
    assert args[-2:] == (None, None) and "WINDOW" not in kw


def test_window_validation():
    """prepare_fused(window=...): ValueError before any launch for a bad window, a window
    with dropout, or lengths off the tile (the kernel's contract: Nq % 64, Nk % 128; such
    calls keep the Triton kernels); a valid call reaches the device check on CPU."""
    q, k, v, dout, lse, delta = _args()
    with pytest.raises(ValueError, match=r"^window: "):
        backward_gluon.prepare_fused(q, k, v, dout, lse, delta, 0.1, window=(-2, 0))
    keys = torch.zeros(backward_gluon.keys_numel(1, 1024, 1024, 4), dtype=torch.int32, device=DEVICE)
    with pytest.raises(ValueError, match=r"^window: the fused kernel's WINDOW variant takes no dropout"):
        backward_gluon.prepare_fused(q, k, v, dout, lse, delta, 0.1, window=(128, 0), dropout_p=0.1, keys=keys)
    with pytest.raises(ValueError, match=r"^num_stages: 3 stages with a window at D = 128 spill registers"):
        backward_gluon.prepare_fused(q, k, v, dout, lse, delta, 0.1, window=(128, 0), num_stages=3)
    q2, k2, v2, dout2, lse2, delta2 = _args(nq=1000, nk=1000)
    with pytest.raises(ValueError, match=r"^q: sequence length 1000 not a positive multiple"):
        backward_gluon.prepare_fused(q2, k2, v2, dout2, lse2, delta2, 0.1, window=(128, 0))
    if DEVICE == "cpu":
        with pytest.raises(ValueError, match=r"^q: on cpu; fused_gluon needs"):
            backward_gluon.prepare_fused(q, k, v, dout, lse, delta, 0.1, window=(128, 0))


def test_window_route_rule(monkeypatch):
    """policy.gluon_bwd_fused for windowed calls: windows other than the canonical causal
    one take the fused kernel from GLUON_BWD_FUSED_MIN_N["window"]'s lengths (2k at D = 128
    and 64, measured in session 28) by the same rules, never with dropout or
    deterministic=True; off with the table emptied."""
    from flashtriton.launchers import common, policy

    monkeypatch.setattr(policy, "interpreting", lambda: False)
    monkeypatch.setattr(policy, "_warp_spec_switch", lambda q: True)
    assert policy.GLUON_BWD_FUSED_MIN_N["window"] == {128: 2048, 64: 2048}

    def rule(q, k, v, params):
        b, nq, h, _ = q.shape
        return policy.gluon_bwd_fused(q, k, v, q, torch.zeros(b, h, nq), params, None, False, q.shape[-1], nq,
                                      k.shape[1])

    q, k, v = rand_qkv(1, 4096, 4096, 4, 2, 128, torch.bfloat16, "cpu")
    win = common.AttnParams(0.1, window_left=1024, window_right=0, deterministic=False)
    sym = common.AttnParams(0.1, window_left=128, window_right=128, deterministic=False)
    assert rule(q, k, v, win) and rule(q, k, v, sym)
    for d in (128, 64):
        assert rule(*rand_qkv(1, 2048, 2048, 4, 2, d, torch.bfloat16, "cpu"), win)
        assert not rule(*rand_qkv(1, 1024, 1024, 4, 2, d, torch.bfloat16, "cpu"), win)       # too short
    assert rule(q, k, v, common.AttnParams(0.1, window_right=0, deterministic=False))   # causal: its own entry
    monkeypatch.setitem(policy.GLUON_BWD_FUSED_MIN_N, "window", {})
    assert not rule(q, k, v, win) and not rule(q, k, v, sym)
    monkeypatch.setitem(policy.GLUON_BWD_FUSED_MIN_N, "window", {128: 4096, 64: 4096})
    assert rule(q, k, v, common.AttnParams(0.1, window_left=-1, window_right=64, deterministic=False))
    assert not rule(q, k, v, common.AttnParams(0.1, window_left=1024, window_right=0))           # deterministic
    assert not rule(q, k, v, common.AttnParams(0.1, window_left=1024, window_right=0, dropout_p=0.1,
                                               deterministic=False))                          # dropout
    assert not rule(*rand_qkv(1, 2048, 2048, 4, 2, 128, torch.bfloat16, "cpu"), win)           # too short
    assert not rule(*rand_qkv(1, 4096 + 32, 4096, 4, 2, 128, torch.bfloat16, "cpu"), win)     # off the tile


@pytest.mark.parametrize("window, nq, nk, want", [
    ((512, 0), 1024, 1024, (512, 0)), ((128, 128), 1024, 2048, (128, 128)), ((-1, 64), 1024, 1024, (2048, 64)),
    ((0, 5000), 1024, 1024, (0, 2048)), ((-1, 0), 1024, 1024, "causal"), ((-1, -1), 1024, 1024, "plain"),
    # (review, session 28) sides past every sequence reduce before the route: (left >= Nk - 1, 0)
    # is the CAUSAL kernel, both sides past it the plain one, never WINDOW
    ((1023, 0), 1024, 1024, "causal"), ((5000, 0), 512, 1024, "causal"), ((5000, 1023), 1024, 1024, "plain"),
    ((1022, 0), 1024, 1024, (1022, 0)),
])
def test_window_library_backward_launch(monkeypatch, window, nq, nk, want):
    """The library's backward (launchers.backward.bwd, deterministic=False) with the route
    forced (table filled, switch on) launches the fused kernel with WINDOW and the reduced
    window for windowed calls, and the kernel of before (no WINDOW, None window arguments;
    CAUSAL for the windows that reduce to causal) otherwise; with the table emptied a
    windowed call keeps the Triton kernels. CPU tensors, the Gluon kernel replaced by a recorder; the preprocess,
    zero and cast run under the interpreter."""
    if not INTERPRETING:
        pytest.skip("the CPU form of this test (the Gluon kernel stubbed)")
    from flashtriton.launchers import backward, common, policy

    seen = []

    class Stub:
        """Stands for attn_bwd_fused_gluon_kernel: kernel[grid](*args, **kw) records them."""
        def __getitem__(self, grid):
            return lambda *a, **kw: seen.append((a, kw))
    monkeypatch.setattr(backward_gluon, "attn_bwd_fused_gluon_kernel", Stub())
    monkeypatch.setattr(policy, "interpreting", lambda: False)
    monkeypatch.setattr(policy, "_warp_spec_switch", lambda q: True)
    monkeypatch.setitem(policy.GLUON_BWD_FUSED_MIN_N, "window", {128: 0})
    q, k, v = rand_qkv(1, nq, nk, 2, 1, 128, torch.bfloat16, "cpu")
    dout, out = torch.randn_like(q), torch.randn_like(q)
    lse = torch.zeros(1, 2, nq)
    params = common.AttnParams(0.1, window_left=window[0], window_right=window[1], deterministic=False)
    backward.bwd(dout, q, k, v, out, lse, params)
    assert len(seen) == 1, "the fused route was not taken"
    a, kw = seen[0]
    if isinstance(want, str):
        assert "WINDOW" not in kw and a[-2:] == (None, None)
        assert kw["CAUSAL"] is (want == "causal")
    else:
        assert kw["WINDOW"] is True and kw["CAUSAL"] is False and kw["ROTATE"] is False and a[-2:] == want
    if not isinstance(want, str):
        # the launches recorded, not run (session 80, CI time: interpreting the whole Triton backward at 1024 x 1024
        # took 6-14 s a case): the Triton kernels' split pair, never the fused kernel (the Stub)
        from flashtriton.kernels import bwd as bwd_kernels
        from flashtriton.launchers import plans
        launched = []
        monkeypatch.setattr(plans, "launch", lambda kernel, grid, *a, **kw: launched.append(kernel))
        monkeypatch.setitem(policy.GLUON_BWD_FUSED_MIN_N, "window", {})
        backward.bwd(dout, q, k, v, out, lse, params)
        assert not any(isinstance(kernel, Stub) for kernel in launched), \
            "an empty table must keep windowed calls off the fused kernel"
        assert launched == [bwd_kernels.attn_bwd_dq_kernel, bwd_kernels.attn_bwd_dkdv_kernel], launched


# ---------------------------------------------------------------------------------------
# GPU (Hopper): numerics of the WINDOW variant
# ---------------------------------------------------------------------------------------
def check_window(b, nq, nk, h, hk, d, dtype, window, scale=None, **kw):
    """The fused kernel under window against float64 (tests/test_bwd_gluon.py's check_fused
    with a window): out / lse from the float64 reference, delta by the library's preprocess."""
    q, k, v = rand_qkv(b, nq, nk, h, hk, d, dtype, "cuda")
    dout = torch.randn_like(q)
    scale = d ** -0.5 if scale is None else scale
    rkw = dict(softmax_scale=scale, window_left=window[0], window_right=window[1])
    out64, lse64 = reference.attention(*(t.double() for t in (q, k, v)), **rkw)
    lse = lse64.float().contiguous()
    delta = backward_gluon.delta_of(out64.to(dtype), dout)
    truth = reference.attention_grad(dout.double(), *(t.double() for t in (q, k, v)), **rkw)
    lowp = reference.attention_grad(dout, q, k, v, **rkw)
    dq, dk, dv = backward_gluon.fused_gluon(q, k, v, dout, lse, delta, scale, window=window, **kw)
    for name, t, ref in (("dq", dq, q), ("dk", dk, k), ("dv", dv, v)):
        assert t.shape == ref.shape and t.dtype == ref.dtype
        assert torch.isfinite(t).all(), f"{name}: unwritten (NaN-poisoned) or non-finite output"
    assert_close("dq", dq, truth[0], lowp[0], 3, dtype)
    assert_close("dk", dk, truth[1], lowp[1], 3, dtype)
    assert_close("dv", dv, truth[2], lowp[2], 3, dtype)
    return dq, dk, dv


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("d", [128, 64])
@pytest.mark.parametrize("window", [(1024, 0), (128, 128), (0, 256), (-1, 128), (100, 37)])
@pytest.mark.parametrize("h, hk", [(4, 4), (8, 2)])
def test_fused_window_matches_reference_gpu(dtype, d, window, h, hk):
    check_window(2, 2048, 2048, h, hk, d, dtype, window)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("d", [128, 64])
@pytest.mark.parametrize("window", [(1024, 0), (128, 128), (0, 256)])
@pytest.mark.parametrize("nq, nk, h, hk", [(1024, 2048, 6, 2), (2048, 1024, 4, 1), (192, 384, 3, 3),
                                           (64, 128, 2, 1)])
def test_fused_window_nq_differs_from_nk_gpu(d, window, nq, nk, h, hk):
    """Nq != Nk both ways, GQA; Nq = 64: one ring tile a head."""
    check_window(2, nq, nk, h, hk, d, torch.bfloat16, window)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("d", [128, 64])
@pytest.mark.parametrize("nq, nk, window", [(2048, 1024, (0, 0)), (1024, 256, (64, 0)), (1024, 256, (0, 37)),
                                            (256, 1024, (0, 0)), (256, 2048, (100, 0))])
def test_fused_window_rows_and_blocks_without_partners_gpu(d, nq, nk, window):
    """Rows that see no key (lse = +inf): dq = 0, no NaN; key blocks no row sees (one tile
    visited, masked whole): dk = dv = 0."""
    dq, dk, dv = check_window(2, nq, nk, 4, 2, d, torch.bfloat16, window)
    band = reference.visible_mask(nq, nk, window[0], window[1], "cuda")
    assert not dq[:, ~band.any(dim=1)].any(), "rows that see no key must get dq = 0"
    unseen = ~band.any(dim=0)
    assert not dk[:, unseen].any() and not dv[:, unseen].any(), "keys no row sees must get dk = dv = 0"


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("d, num_stages", [(128, 1), (128, 2), (64, 1), (64, 2), (64, 4)])   # (128, 3): refused
def test_fused_window_stages_gpu(d, num_stages):
    """Every ring depth the launcher takes (D = 128 1 stage: 568 spill bytes offline, correct
    only), a tile count a CTA not a multiple of the ring or of the dS^T buffers' pair."""
    check_window(1, 1024, 1536, 6, 2, d, torch.bfloat16, (256, 64), num_stages=num_stages)


@pytest.mark.gpu
@hopper
def test_fused_window_negative_scale_gpu():
    check_window(1, 1024, 1024, 4, 4, 128, torch.bfloat16, (200, 0), scale=-0.1)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("window", [(1024, 0), (128, 128), (0, 256)])
@pytest.mark.parametrize("d, h, hk", [(128, 8, 2), (64, 4, 4)])
def test_flash_attn_func_window_forced_route_gpu(monkeypatch, window, d, h, hk):
    """flash_attn_func(window_size=...)'s backward through the WINDOW variant (the route
    forced: GLUON_BWD_FUSED_MIN_N["window"] filled, fused_into spied on) against float64,
    the project's criterion, gradients poisoned before the call (autouse fixture)."""
    import flashtriton
    from flashtriton.launchers import policy
    from helpers import reference_pair

    monkeypatch.setitem(policy.GLUON_BWD_FUSED_MIN_N, "window", {128: 0, 64: 0})
    seen = []
    real = backward_gluon.fused_into

    def spy(*a, **kw):
        seen.append(kw.get("window"))
        return real(*a, **kw)
    monkeypatch.setattr(backward_gluon, "fused_into", spy)
    dtype = torch.bfloat16
    q, k, v = rand_qkv(2, 2048, 2048, h, hk, d, dtype, "cuda", requires_grad=True)
    out = flashtriton.flash_attn_func(q, k, v, window_size=window, deterministic=False)
    dout = torch.randn_like(out)
    dq, dk, dv = torch.autograd.grad(out, (q, k, v), dout)
    assert seen == [window], "the backward did not take the fused WINDOW route"
    truth, lowp = reference_pair(q.detach(), k.detach(), v.detach(), dout, softmax_scale=d ** -0.5,
                                 window_left=window[0], window_right=window[1])
    for name, ours in (("dq", dq), ("dk", dk), ("dv", dv)):
        assert torch.isfinite(ours).all(), name
        assert_close(name, ours, truth[name], lowp[name], 3, dtype)
