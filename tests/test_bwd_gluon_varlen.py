"""kernels/bwd_gluon_fused.py VARLEN (session 50): packed batches' backward (flash_attn_varlen_func) on the fused
Gluon kernel, one key block of one sequence a CTA, plain or causal. Host side
launchers/backward_gluon_varlen.py (fused_varlen_table, fused_varlen_into), route
launchers.policy.gluon_bwd_fused_varlen (GLUON_BWD_FUSED_VARLEN_MIN_N), plan in launchers/backward.bwd.

CPU (CI, under the interpreter): the SCHED table's layout and dispatch order; the kernel's index arithmetic
(fused_varlen_coords, the very function it runs) in an interpreted mirror of the loops and masks, against the packed
batch's visible (row, key) pairs: every pair kept exactly once, nothing past a sequence kept; the policy's contract;
an offline sm_90a compile. GPU (Hopper): through the public API against float64 (gradients within 3x PyTorch's
same-dtype error), outputs poisoned first (conftest), ragged lengths, empty sequences, Nq != Nk both ways, GQA,
bf16 / fp16; dk / dv of each sequence bitwise those of the sequence alone (no row of another sequence touched);
the route taken (spy); the launch plan's replay.
"""
import os

import pytest
import torch
import triton
import triton.language as tl

import flashtriton
from flashtriton import reference
from flashtriton.kernels import bwd_gluon_fused
from flashtriton.launchers import backward_gluon_varlen, policy
from flashtriton.launchers.common import AttnParams, Varlen

from conftest import DEVICE, HAS_CUDA
from helpers import assert_close, check_attention, cu_seqlens, offline_compile, rand_varlen, reference_pair, spy

IS_HOPPER = HAS_CUDA and torch.cuda.get_device_capability()[0] == 9
INTERPRETING = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")
hopper = pytest.mark.skipif(not IS_HOPPER or INTERPRETING,
                            reason="needs a Hopper GPU (compute capability 9.x), not the interpreter")

BLOCK_M, BLOCK_N = backward_gluon_varlen.BLOCK_M, backward_gluon_varlen.BLOCK_N


def _varlen(lens_q, lens_k, device="cpu"):
    return Varlen(cu_seqlens(lens_q, device), cu_seqlens(lens_k, device), max(lens_q), max(lens_k))


# ---------------------------------------------------------------------------------------
# CPU
# ---------------------------------------------------------------------------------------
def test_varlen_table_layout():
    """SCHED = [cumulative 128-key block counts | cu_seqlens_q | cu_seqlens_k | the slots' order]: what
    fused_varlen_coords reads at offsets 0, B + 1, 2B + 2 and the kernel's VARLEN_ORDER at 3B + 3."""
    lens_q, lens_k = [300, 0, 128, 5], [300, 7, 200, 0]
    vl = _varlen(lens_q, lens_k)
    n_slots = backward_gluon_varlen.varlen_slots(sum(lens_k), 4)
    assert n_slots == 4 + 4
    plain = backward_gluon_varlen.fused_varlen_table(vl, False, n_slots, order=False)
    assert plain.dtype == torch.int32
    assert plain.tolist() == [0, 3, 4, 6, 6] + [0, 300, 300, 428, 433] + [0, 300, 307, 507, 507]
    order = backward_gluon_varlen.fused_varlen_table(vl, False, n_slots)[15:].tolist()
    # plain: a block visits its sequence's query tiles: sequence 0 (5 tiles) first, then 2 (2), then the
    # queryless sequence 1 (one masked tile), spare slots last
    assert order == [0, 1, 2, 4, 5, 3, 6, 7]
    causal = backward_gluon_varlen.fused_varlen_table(vl, True, n_slots)
    assert causal[:15].tolist() == plain.tolist()
    # causal, sequence 0 (Nq = Nk = 300): block 0 sees 5 tiles, block 1 (keys 128..) 3, block 2 (256..) 1
    c_order = causal[15:].tolist()
    assert c_order[0] == 0 and sorted(c_order) == list(range(n_slots)) and c_order[-2:] == [6, 7]


@triton.jit
def _varlen_schedule_mirror(SCHED, VISIT, COORDS, batch, total_q, win_left, win_right, ORDER: tl.constexpr,
                            CAUSAL: tl.constexpr, WINDOW: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """One (slot, ring tile t of head 0, consumer WG) a program, grid (slots, max tiles, 2): the kernel's slot (the
    order table with ORDER), its coordinates (fused_varlen_coords), the tile's query tile as the loops take it
    (CAUSAL: j0 + t; plain: ROTATE's (t + rot) % n_m), then _fused_tile's effective mask: rows past the sequence
    (lse = +inf), CAUSAL's select where rel < HALF_N - 1, KEY_BOUND's where the half's key count is below HALF_N,
    WINDOW's (the kernel's own fused_window_edge / fused_window_keep) with KEY_BOUND's.
    Adds 1 to VISIT[packed key, packed row] of every kept pair (VISIT padded past both totals by a block, so a
    kept pair past the batch lands there); COORDS[slot] = the eight coordinates (slot in the order's sense)."""
    HALF_N: tl.constexpr = BLOCK_N // 2
    slot = tl.program_id(0)
    t = tl.program_id(1)
    WG = tl.program_id(2)
    if ORDER:
        slot = tl.load(SCHED + 3 * (batch + 1) + slot)
    if slot < tl.load(SCHED + batch):
        q_start, k_start, seqlen_q, seqlen_k, n0, j0, n_m, rot = bwd_gluon_fused.fused_varlen_coords(
            SCHED, slot, batch, BLOCK_M, BLOCK_N, CAUSAL, True, win_left, win_right, WINDOW)
        if t == 0 and WG == 0:
            base = COORDS + slot * 8
            tl.store(base + 0, q_start)
            tl.store(base + 1, k_start)
            tl.store(base + 2, seqlen_q)
            tl.store(base + 3, seqlen_k)
            tl.store(base + 4, n0)
            tl.store(base + 5, j0)
            tl.store(base + 6, n_m)
            tl.store(base + 7, rot)
        if t < n_m:
            if CAUSAL or WINDOW:
                j = t
            else:
                j = (t % n_m + rot) % n_m
            m = (j0 + j) * BLOCK_M
            offs_c = tl.arange(0, HALF_N)
            offs_r = tl.arange(0, BLOCK_M)
            keep = (offs_r < seqlen_q - m)[None, :] & (offs_c >= 0)[:, None]           # lse = +inf past Nq_b
            if WINDOW:
                rel = j0 * BLOCK_M + (seqlen_k - seqlen_q) + win_right - (n0 + WG * HALF_N) + j * BLOCK_M
                wspan = win_left + win_right
                key_lim = seqlen_k - n0 - WG * HALF_N
                if bwd_gluon_fused.fused_window_edge(rel, wspan, HALF_N, BLOCK_M) | (key_lim < HALF_N):
                    keep = keep & bwd_gluon_fused.fused_window_keep(offs_c, offs_r, rel, wspan) \
                        & (offs_c < key_lim)[:, None]
            elif CAUSAL:
                rel = j0 * BLOCK_M + (seqlen_k - seqlen_q) - (n0 + WG * HALF_N) + j * BLOCK_M
                if rel < HALF_N - 1:
                    keep = keep & ((offs_c - rel)[:, None] <= offs_r[None, :])
            else:
                key_lim = seqlen_k - n0 - WG * HALF_N
                if key_lim < HALF_N:
                    keep = keep & (offs_c < key_lim)[:, None]
            keys = k_start + n0 + WG * HALF_N + offs_c
            rows = q_start + m + offs_r
            at = keys[:, None] * (total_q + BLOCK_N) + rows[None, :]
            tl.store(VISIT + at, tl.load(VISIT + at) + keep.to(tl.int32))


def _mirror(lens_q, lens_k, causal, order, window=None):
    vl = _varlen(lens_q, lens_k)
    win = None if window is None else backward_gluon_varlen.varlen_window(window, sum(lens_q), sum(lens_k))
    batch = len(lens_q)
    total_q, total_k = sum(lens_q), sum(lens_k)
    n_slots = backward_gluon_varlen.varlen_slots(total_k, batch)
    table = backward_gluon_varlen.fused_varlen_table(vl, causal, n_slots, order=order, window=win)
    visit = torch.zeros(total_k + BLOCK_N, total_q + BLOCK_N, dtype=torch.int32)
    coords = torch.full((n_slots, 8), -1, dtype=torch.int32)
    max_tiles = max(1, max(-(-n // BLOCK_M) for n in lens_q))
    wl, wr = win if win is not None else (0, 0)
    _varlen_schedule_mirror[(n_slots, max_tiles, 2)](table, visit, coords, batch, total_q, wl, wr, ORDER=order,
                                                      CAUSAL=causal, WINDOW=win is not None, BLOCK_M=BLOCK_M,
                                                      BLOCK_N=BLOCK_N)
    return visit, coords, table


def _packed_visible(lens_q, lens_k, causal, window=None):
    """(total_k + BLOCK_N, total_q + BLOCK_N) int32: 1 where packed key j is visible to packed row i (its own
    sequence, bottom-right causal mask per sequence), 0 elsewhere (the padding included)."""
    total_q, total_k = sum(lens_q), sum(lens_k)
    vis = torch.zeros(total_k + BLOCK_N, total_q + BLOCK_N, dtype=torch.int32)
    cq = ck = 0
    for nq, nk in zip(lens_q, lens_k):
        if window is not None:
            m = reference.visible_mask(nq, nk, window[0], window[1], "cpu")
        else:
            m = reference.visible_mask(nq, nk, -1, 0 if causal else -1, "cpu")
        block = torch.ones(nq, nk, dtype=torch.int32) if m is None else m.to(torch.int32)
        vis[ck:ck + nk, cq:cq + nq] = block.t()
        cq += nq
        ck += nk
    return vis


# (lens_q, lens_k): ragged lengths, an empty query sequence, an empty key sequence, Nq > Nk (rows that see no key
# under causal), Nq < Nk, one block, lengths on the tile grid, one long sequence among short ones
SCHEDULES = [
    ([300, 0, 128, 5], [300, 7, 200, 0]),
    ([1, 17, 113, 1023], [1, 17, 113, 1023]),
    ([200, 64, 129], [60, 300, 129]),
    ([64, 128, 256], [128, 128, 256]),
    ([513, 3], [1200, 250]),
    ([0, 70, 0], [130, 0, 5]),
]


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("order", [True, False])
@pytest.mark.parametrize("lens_q,lens_k", SCHEDULES)
def test_varlen_schedule_keeps_each_visible_pair_once(lens_q, lens_k, causal, order):
    """The kernel's tiles and masks keep every visible (row, key) pair of the packed batch exactly once and no
    other pair (none of the next sequence's rows or keys, none past the batch); every key block of every
    sequence has its slot; the dispatch order's work is the slot's n_m."""
    if not INTERPRETING:
        pytest.skip("the interpreted mirror (CPU)")
    visit, coords, table = _mirror(lens_q, lens_k, causal, order)
    assert torch.equal(visit, _packed_visible(lens_q, lens_k, causal))
    n_blocks = table[len(lens_q)].item()
    assert n_blocks == sum(-(-n // BLOCK_N) for n in lens_k)
    assert (coords[:n_blocks] >= 0).all() and (coords[n_blocks:] == -1).all()
    assert (coords[:n_blocks, 6] >= 1).all()                                  # n_m >= 1 (the barrier protocol)
    if order:
        ordered = coords[table[3 * (len(lens_q) + 1):].long()[:n_blocks], 6]
        assert (ordered[:-1] >= ordered[1:]).all(), "the dispatch order is not heaviest first"


# (left, right), -1 unbounded (the effective window: edges reaching past every sequence already -1)
WINDOWS = [(256, 0), (100, 37), (-1, 64), (64, -1)]


@pytest.mark.parametrize("window", WINDOWS)
@pytest.mark.parametrize("lens_q,lens_k", SCHEDULES)
def test_varlen_window_schedule_keeps_each_band_pair_once(lens_q, lens_k, window):
    """The WINDOW variant's tiles (the band's, per sequence) and masks (the band's edges, the sequence's last key)
    keep every pair of each sequence's band exactly once and nothing else; the order's work is the slot's n_m."""
    if not INTERPRETING:
        pytest.skip("the interpreted mirror (CPU)")
    visit, coords, table = _mirror(lens_q, lens_k, False, True, window)
    assert torch.equal(visit, _packed_visible(lens_q, lens_k, False, window))
    n_blocks = table[len(lens_q)].item()
    assert (coords[:n_blocks, 6] >= 1).all()
    ordered = coords[table[3 * (len(lens_q) + 1):].long()[:n_blocks], 6]
    assert (ordered[:-1] >= ordered[1:]).all(), "the dispatch order is not heaviest first"


def test_regression_varlen_plan_key_holds_the_effective_window(monkeypatch):
    """Session 50's review: the fused VARLEN route's plan was keyed on the call's raw params, so a batch whose
    max_seqlen puts the window (1024, 0) past every sequence (a causal call: the CAUSAL kernel recorded) and a batch
    of the same shapes where it is a window would share a plan and replay the CAUSAL kernel. The key now holds the
    window in effect: different there, equal where the effective windows agree."""
    from flashtriton.launchers import backward, plans
    monkeypatch.setenv("FLASHTRITON_PLANS", "1")
    q = torch.randn(2000, 2, 64)
    table = torch.zeros(20, dtype=torch.int32)
    inputs = (q, q, q, q, q, torch.zeros(2, 2000), table)
    params = AttnParams(0.125, window_left=1024, window_right=0)
    short = _varlen([1000, 1000], [1000, 1000])          # max 1000: the window reaches past every sequence
    long_ = _varlen([1900, 100], [1900, 100])             # max 1900: a window
    other = _varlen([1800, 200], [1800, 200])
    k_short, k_long, k_other = (backward.varlen_plan_key(inputs, params, v) for v in (short, long_, other))
    if not plans.triton.knobs.runtime.interpret:
        pytest.skip("plan keys of CPU tensors: the interpreter's (FLASHTRITON_PLANS=1)")
    assert k_short is not None and k_short != k_long and k_long == k_other
    # and the window's unbounded side comes from the shapes alone
    assert backward_gluon_varlen.varlen_window((-1, 64), 2000, 2000) == (4000, 64)


def test_policy_contract():
    """gluon_bwd_fused_varlen: deterministic=False, plain, the canonical causal mask or a window, no ALiBi / softcap,
    dropout only plain / causal at GLUON_BWD_FUSED_VARLEN_DROPOUT's head dims (session 51), a head dim of the table;
    never under the interpreter (which this CPU run is, or no GPU at all)."""
    q = torch.empty(4096, 4, 128, dtype=torch.bfloat16)
    k = v = torch.empty(4096, 2, 128, dtype=torch.bfloat16)
    lse = torch.empty(4, 4096)
    vl = _varlen([2048, 2048], [2048, 2048])
    assert not policy.gluon_bwd_fused_varlen(q, k, v, q, lse, AttnParams(0.1), None, 128, vl)
    assert not policy.gluon_bwd_fused_varlen(q, k, v, q, lse, AttnParams(0.1, deterministic=True), None, 128, vl)
    assert set(policy.GLUON_BWD_FUSED_VARLEN_MIN_N) <= {"plain", "causal", "window"}
    assert all(set(t) <= set(bwd_gluon_fused.FUSED_CONFIG) for t in policy.GLUON_BWD_FUSED_VARLEN_MIN_N.values())
    assert policy.GLUON_BWD_FUSED_VARLEN_DROPOUT <= set(bwd_gluon_fused.FUSED_CONFIG)


def test_varlen_dropout_refuses_a_window_or_a_missing_table():
    """fused_varlen_into with dropout_p > 0: the key table is required and a window refused (the VARLEN WINDOW
    variant has no dropout), ValueError before any launch."""
    (q, k, v), varlen = rand_varlen([300, 200], [300, 200], 2, 1, 128, torch.bfloat16, "cpu")
    vl = Varlen(*varlen)
    z = torch.empty(0)
    with pytest.raises(ValueError, match="keys"):
        backward_gluon_varlen.fused_varlen_into(q, k, v, q, z, z, 0.1, False, q, k, v, vl, z, dropout_p=0.2)
    with pytest.raises(ValueError, match="window"):
        backward_gluon_varlen.fused_varlen_into(q, k, v, q, z, z, 0.1, False, q, k, v, vl, z, dropout_p=0.2,
                                                keys=z, window=(64, 0))


_COMPILE = r"""
import json, re, sys
sys.path.insert(0, sys.argv[1])
import gluon_bwd_compile as g
out = []
for causal, dropout in ((False, False), (True, False), (False, True), (True, True)):
    c = g.compile_fused(128, "bf16", None, not causal, causal, dropout, varlen=True)
    r, text = g.report(c)
    loops = g.tile_loops(text)
    out.append(dict(loops=[lp["n"] for lp in loops], local_in_loops=sum(lp["ldl"] + lp["stl"] for lp in loops),
                    spill=r["spill_bytes"], hgmma=r["hgmma"], utmaredg=text.count("UTMAREDG"),
                    smem=r["smem"]))
print(json.dumps(out))
"""


def test_varlen_compiles_offline():
    """sm_90a, no GPU: the plain and causal VARLEN kernels at D = 128 compile with two consumer tile loops each,
    no local memory inside them (the few spilled bytes are the CTA's coordinates, kept across the loop), under
    600 SASS instructions a warp a tile, HGMMA and the dQ TMA reduce, in the dense kernel's shared memory. With
    DROPOUT (session 51): the same loops, the keep hash adding at most 600 instructions a tile, and spills as the
    dense DROPOUT kernel's (104 / 160 bytes plain / causal) give or take a few registers."""
    pytest.importorskip("triton.experimental.gluon")
    for i, r in enumerate(offline_compile(_COMPILE)):
        dropout = i >= 2
        assert len(r["loops"]) == 2 and all(n < (1200 if dropout else 600) for n in r["loops"]), r
        assert r["spill"] <= (256 if dropout else 128), r
        if not dropout:
            assert r["local_in_loops"] == 0, r
        assert r["hgmma"] > 0 and r["utmaredg"] >= 1 and r["smem"] <= 227 * 1024, r


# ---------------------------------------------------------------------------------------
# GPU
# ---------------------------------------------------------------------------------------
CASES = [
    # lens_q, lens_k, (H, Hk), D, causal
    ([1100, 300, 2049], [1100, 300, 2049], (4, 2), 128, False),
    ([1100, 300, 2049], [1100, 300, 2049], (4, 2), 128, True),
    ([1024, 0, 513, 17], [1024, 9, 513, 17], (4, 4), 128, True),        # an empty query sequence
    ([1030, 40], [0, 70], (2, 1), 128, False),                          # keys of sequence 0: none
    ([1030, 40], [700, 1500], (4, 1), 128, True),                       # Nq > Nk: rows with no key
    ([600, 1, 113], [1500, 17, 1023], (4, 2), 128, False),              # Nq < Nk
    ([1500, 64], [3000, 64], (4, 2), 64, True),
    ([1500, 64], [3000, 64], (4, 2), 64, False),
]


@pytest.fixture
def fused_varlen_on(monkeypatch):
    """Route every D = 64 / 128 packed backward here (the table's lengths lowered to 1) and record the route."""
    monkeypatch.setattr(policy, "GLUON_BWD_FUSED_VARLEN_MIN_N",
                        {kind: {128: 1, 64: 1} for kind in ("plain", "causal", "window")})
    return spy(monkeypatch, backward_gluon_varlen, "fused_varlen_into")


def _grads(q, k, v, varlen, dout, causal):
    q, k, v = (t.detach().requires_grad_(True) for t in (q, k, v))
    out = flashtriton.flash_attn_varlen_func(q, k, v, *varlen, causal=causal)
    return torch.autograd.grad(out, (q, k, v), dout)


def _check_grads(grads, q, k, v, dout, varlen, dtype, **kw):
    """dq, dk, dv against float64 (the repo criterion for gradients: 3x PyTorch's same-dtype error), none NaN (an
    unwritten, poisoned element included). kw: the mask (window_left / window_right)."""
    truth, lowp = reference_pair(q, k, v, dout, varlen=varlen[:2], softmax_scale=q.shape[-1] ** -0.5, **kw)
    for name, g in zip(("dq", "dk", "dv"), grads):
        assert not torch.isnan(g).any(), f"{name}: unwritten (NaN-poisoned) or NaN"
        assert_close(name, g, truth[name], lowp[name], 3, dtype)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("lens_q,lens_k,heads,d,causal", CASES)
def test_varlen_bwd_matches_reference_gpu(fused_varlen_on, dtype, lens_q, lens_k, heads, d, causal):
    (q, k, v), varlen = rand_varlen(lens_q, lens_k, *heads, d, dtype, DEVICE)
    dout = torch.randn_like(q)
    dq, dk, dv = _grads(q, k, v, varlen, dout, causal)
    assert len(fused_varlen_on) == 1, "the backward did not take the fused Gluon VARLEN kernel"
    _check_grads((dq, dk, dv), q, k, v, dout, varlen, dtype, window_right=0 if causal else -1)


WINDOW_CASES = [
    # lens_q, lens_k, (H, Hk), D, window
    ([1100, 300, 2049], [1100, 300, 2049], (4, 2), 128, (256, 0)),
    ([1024, 0, 513, 17], [1024, 9, 513, 17], (4, 4), 128, (100, 37)),   # an empty query sequence; right > 0
    ([1030, 40], [700, 1500], (4, 1), 128, (-1, 64)),                   # Nq > Nk: rows with no key
    ([600, 1, 113], [1500, 17, 1023], (4, 2), 128, (64, -1)),
    ([1500, 64], [3000, 64], (4, 2), 64, (256, 0)),
]


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("lens_q,lens_k,heads,d,window", WINDOW_CASES)
def test_varlen_bwd_window_matches_reference_gpu(fused_varlen_on, dtype, lens_q, lens_k, heads, d, window):
    """The VARLEN WINDOW variant (session 50) through the API against float64 (3x criterion), outputs poisoned."""
    (q, k, v), varlen = rand_varlen(lens_q, lens_k, *heads, d, dtype, DEVICE)
    dout = torch.randn_like(q)
    q_, k_, v_ = (t.detach().requires_grad_(True) for t in (q, k, v))
    out = flashtriton.flash_attn_varlen_func(q_, k_, v_, *varlen, window_size=window)
    dq, dk, dv = torch.autograd.grad(out, (q_, k_, v_), dout)
    assert len(fused_varlen_on) == 1, "the backward did not take the fused Gluon VARLEN kernel"
    _check_grads((dq, dk, dv), q, k, v, dout, varlen, dtype, window_left=window[0], window_right=window[1])


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("causal", [False, True])
def test_varlen_bwd_sequences_independent_gpu(fused_varlen_on, causal):
    """dk / dv of each sequence of the packed backward are bitwise those of the sequence's backward alone, from the
    same forward's out / lse (dk / dv are deterministic, and a key block's tiles are the same either way): no
    masked store, TMA store or reduce of one sequence reaches another's rows."""
    from flashtriton.launchers import backward
    lens = [1100, 300, 1029, 5]
    (q, k, v), varlen = rand_varlen(lens, lens, 4, 2, 128, torch.bfloat16, DEVICE)
    out, lse, _ = flashtriton.flash_attn_varlen_func(q, k, v, *varlen, causal=causal, return_attn_probs=True)
    dout = torch.randn_like(q)
    params = AttnParams(128 ** -0.5, window_right=0 if causal else -1, deterministic=False)
    dq, dk, dv = backward.bwd(dout, q, k, v, out, lse, params, varlen=Varlen(*varlen))
    start = 0
    for n in lens:
        sl = slice(start, start + n)
        cu = cu_seqlens([n], DEVICE)
        one = backward.bwd(dout[sl], q[sl], k[sl], v[sl], out[sl], lse[:, sl].contiguous(), params,
                           varlen=Varlen(cu, cu, n, n))
        assert torch.equal(one[1], dk[sl]) and torch.equal(one[2], dv[sl])
        start += n
    assert len(fused_varlen_on) == 1 + len(lens)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("order", [False, True])
def test_varlen_bwd_order_off_matches_reference_gpu(fused_varlen_on, monkeypatch, order):
    """backward_gluon_varlen.VARLEN_ORDER off (slots in sequence order) and on, causal fp16, GQA 4 / 1."""
    monkeypatch.setattr(backward_gluon_varlen, "VARLEN_ORDER", order)
    (q, k, v), varlen = rand_varlen([1100, 0, 300, 2049], [1100, 5, 300, 2049], 4, 1, 128, torch.float16, DEVICE)
    dout = torch.randn_like(q)
    dq, dk, dv = _grads(q, k, v, varlen, dout, True)
    _check_grads((dq, dk, dv), q, k, v, dout, varlen, torch.float16, window_right=0)


@pytest.mark.gpu
@hopper
def test_varlen_bwd_repeatable_gpu(fused_varlen_on):
    """dk / dv bitwise repeatable; dq repeats up to fp32 summation order."""
    (q, k, v), varlen = rand_varlen([1100, 300, 2049], [1100, 300, 2049], 8, 2, 128, torch.bfloat16, DEVICE)
    dout = torch.randn_like(q)
    a = _grads(q, k, v, varlen, dout, True)
    b = _grads(q, k, v, varlen, dout, True)
    assert torch.equal(a[1], b[1]) and torch.equal(a[2], b[2])
    assert (a[0].float() - b[0].float()).abs().max().item() <= 1e-2


@pytest.mark.gpu
@hopper
def test_varlen_bwd_route_by_default_gpu(monkeypatch):
    """At the table's length the default route takes the kernel (a window too, where the table lists it); not with
    deterministic=True or ALiBi."""
    calls = spy(monkeypatch, backward_gluon_varlen, "fused_varlen_into")
    table = policy.GLUON_BWD_FUSED_VARLEN_MIN_N
    n = max(1, max(t[128] for t in table.values() if 128 in t))        # max_seqlen_q at the entries
    (q, k, v), varlen = rand_varlen([n, 100], [n, 100], 4, 2, 128, torch.bfloat16, DEVICE, requires_grad=True)
    for kw, taken in ((dict(causal=True), "causal" in table), (dict(), "plain" in table),
                      (dict(causal=True, deterministic=True), False),
                      (dict(window_size=(64, 0)), 128 in table.get("window", {})),
                      (dict(alibi_slopes=torch.rand(4, device=DEVICE)), False)):
        before = len(calls)
        flashtriton.flash_attn_varlen_func(q, k, v, *varlen, **kw).sum().backward()
        assert len(calls) == before + int(taken), kw


@pytest.mark.gpu
@hopper
def test_regression_expanded_dout_takes_fused_varlen_route_gpu(fused_varlen_on):
    """out.sum().backward() hands the backward an expanded dout (stride 0), which TMA cannot read: session 50's
    first GPU run found such calls off the fused route (the policy saw the raw dout). launchers/backward.bwd now
    copies it first (common._descriptor_ready): the route is taken and the gradients are right."""
    (q, k, v), varlen = rand_varlen([300, 700], [300, 700], 4, 2, 128, torch.bfloat16, DEVICE, requires_grad=True)
    flashtriton.flash_attn_varlen_func(q, k, v, *varlen, causal=True).sum().backward()
    assert len(fused_varlen_on) == 1
    _check_grads((q.grad, k.grad, v.grad), q, k, v, torch.ones_like(q), varlen, torch.bfloat16, window_right=0)


@pytest.mark.gpu
@hopper
def test_regression_varlen_window_plan_not_shared_with_causal_gpu(fused_varlen_on, monkeypatch):
    """With launch plans on: a window (1024, 0) over sequences of at most 1000 is a causal call (its plan records
    the CAUSAL kernel); the same shapes with a 1900-long sequence make it a window, which must not replay that plan
    (session 50's review: the key now holds the effective window). Gradients against float64."""
    from flashtriton.launchers import plans
    monkeypatch.setenv("FLASHTRITON_PLANS", "1")
    plans.clear()
    window = (1024, 0)
    (q, k, v), varlen = rand_varlen([1000, 1000], [1000, 1000], 4, 2, 128, torch.bfloat16, DEVICE)
    q, k, v = (t.requires_grad_(True) for t in (q, k, v))
    flashtriton.flash_attn_varlen_func(q, k, v, *varlen, window_size=window).sum().backward()
    (q2, k2, v2), varlen2 = rand_varlen([1900, 100], [1900, 100], 4, 2, 128, torch.bfloat16, DEVICE)
    dout = torch.randn_like(q2)
    q2_, k2_, v2_ = (t.detach().requires_grad_(True) for t in (q2, k2, v2))
    out = flashtriton.flash_attn_varlen_func(q2_, k2_, v2_, *varlen2, window_size=window)
    grads = torch.autograd.grad(out, (q2_, k2_, v2_), dout)
    _check_grads(grads, q2, k2, v2, dout, varlen2, torch.bfloat16, window_left=window[0], window_right=window[1])


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("causal", [False, True])
def test_varlen_bwd_plan_replay_gpu(fused_varlen_on, monkeypatch, causal):
    """With launch plans on (FLASHTRITON_PLANS=1; the tests run with them off), the second backward of a signature
    replays the first's launches with its own tensors and SCHED table: other lengths (same totals, same batch)
    give their own reference's gradients."""
    from flashtriton.launchers import plans
    monkeypatch.setenv("FLASHTRITON_PLANS", "1")
    plans.clear()
    (q, k, v), varlen = rand_varlen([1100, 300, 2049], [1100, 300, 2049], 4, 2, 128, torch.bfloat16, DEVICE)
    _grads(q, k, v, varlen, torch.randn_like(q), causal)
    (q2, k2, v2), varlen2 = rand_varlen([2000, 1400, 49], [2000, 1400, 49], 4, 2, 128, torch.bfloat16, DEVICE)
    dout = torch.randn_like(q2)
    q2, k2, v2 = (t.detach().requires_grad_(True) for t in (q2, k2, v2))
    out = flashtriton.flash_attn_varlen_func(q2, k2, v2, *varlen2, causal=causal)
    before = plans.stats["replayed"]                  # (after the forward, which may replay a plan of its own)
    grads = torch.autograd.grad(out, (q2, k2, v2), dout)
    assert plans.stats["replayed"] == before + 1, "the second backward did not replay"
    assert any(key[0] == "bwd_varlen_gluon" for key in plans._PLANS)
    _check_grads(grads, q2, k2, v2, dout, varlen2, torch.bfloat16, window_right=0 if causal else -1)


DROPOUT_CASES = [
    # lens_q, lens_k, (H, Hk), D, causal
    ([1100, 300, 2049], [1100, 300, 2049], (4, 2), 128, False),
    ([1100, 300, 2049], [1100, 300, 2049], (4, 2), 128, True),
    ([600, 1, 113], [1500, 17, 1023], (4, 2), 128, False),              # Nq < Nk, keys past max_seqlen_k's tile
    ([1030, 0, 40], [700, 9, 1500], (4, 1), 128, True),                 # Nq > Nk, an empty query sequence
    ([1500, 64], [3000, 64], (4, 2), 64, True),
    ([1500, 64], [3000, 64], (4, 2), 64, False),
]


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("lens_q,lens_k,heads,d,causal", DROPOUT_CASES)
def test_varlen_bwd_dropout_matches_reference_gpu(fused_varlen_on, lens_q, lens_k, heads, d, causal):
    """DROPOUT (session 51): out, lse and dq, dk, dv against float64 under the call's own keep mask (the backend's
    dropout_mask for the seed, checked against S_dmask's signs), through the fused VARLEN route with dropout."""
    (q, k, v), varlen = rand_varlen(lens_q, lens_k, *heads, d, torch.bfloat16, DEVICE)
    res = check_attention("triton", q, k, v, varlen=varlen, dropout_p=0.17, seed=sum(lens_q), causal=causal)
    assert not res["keep"].all()
    assert len(fused_varlen_on) == 1, "the backward did not take the fused VARLEN route"


@pytest.mark.gpu
@hopper
def test_varlen_bwd_dropout_route_by_default_gpu(monkeypatch):
    """At the table's length a dropout backward takes the fused VARLEN kernel at the listed head dims; with a window
    it does not (the VARLEN WINDOW variant has no dropout)."""
    calls = spy(monkeypatch, backward_gluon_varlen, "fused_varlen_into")
    n = max(policy.GLUON_BWD_FUSED_VARLEN_MIN_N["plain"][128], policy.GLUON_BWD_FUSED_VARLEN_MIN_N["causal"][128])
    (q, k, v), varlen = rand_varlen([n, 100], [n, 100], 4, 2, 128, torch.bfloat16, DEVICE, requires_grad=True)
    flashtriton.flash_attn_varlen_func(q, k, v, *varlen, dropout_p=0.1, causal=True).sum().backward()
    assert len(calls) == int(128 in policy.GLUON_BWD_FUSED_VARLEN_DROPOUT)
    flashtriton.flash_attn_varlen_func(q, k, v, *varlen, dropout_p=0.1, window_size=(64, 0)).sum().backward()
    assert len(calls) == int(128 in policy.GLUON_BWD_FUSED_VARLEN_DROPOUT)


@pytest.mark.gpu
@hopper
def test_varlen_bwd_dropout_plan_replay_gpu(fused_varlen_on, monkeypatch):
    """With launch plans on: the second dropout backward of a signature replays the first's launches (the key table's
    launch included) with its own rng state: the gradients are those of its own mask (the seed's), bitwise the
    launcher's without plans."""
    from flashtriton.launchers import plans
    monkeypatch.setenv("FLASHTRITON_PLANS", "1")
    plans.clear()
    (q, k, v), varlen = rand_varlen([1100, 300, 2049], [1100, 300, 2049], 4, 2, 128, torch.bfloat16, DEVICE)
    dout = torch.randn_like(q)

    def grads(seed):
        qq, kk, vv = (t.detach().requires_grad_(True) for t in (q, k, v))
        torch.manual_seed(seed)
        out = flashtriton.flash_attn_varlen_func(qq, kk, vv, *varlen, dropout_p=0.2, causal=True)
        return torch.autograd.grad(out, (qq, kk, vv), dout)

    grads(1)
    before = plans.stats["replayed"]
    replayed = grads(2)
    assert plans.stats["replayed"] >= before + 1, "the second backward did not replay"
    monkeypatch.setenv("FLASHTRITON_PLANS", "0")
    again = grads(2)
    assert all(torch.equal(a, b) for a, b in zip(replayed[1:], again[1:]))     # dk, dv (dq: reduce order)
    other = grads(3)
    assert not torch.equal(other[2], again[2])                                 # another seed, another mask
