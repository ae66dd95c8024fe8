"""Sliding window, ALiBi and softcap, alone and combined, against the float64 reference.

Every kernel backend, plus the reference backend (the same semantics in plain
PyTorch, used as a backend too). The reference itself is checked against an
element-by-element implementation of the written semantics and by gradcheck.
"""
import itertools
import math

import pytest
import torch

import flashtriton
from flashtriton import flash_attn_func, reference

from conftest import DEVICE, kernel_backends
from helpers import check_attention, naive_attention, rand_qkv

BACKENDS = kernel_backends() + ["reference"]
HEADS = [(4, 4), (4, 2), (4, 1)]  # MHA, GQA, MQA
DTYPES = [torch.float16, torch.bfloat16]


def alibi_slopes(batch, nheads, per_batch=False):
    """Realistic ALiBi slopes 2^(-8 h / H), randomly perturbed (per batch row if asked)."""
    base = torch.tensor([2.0 ** (-8.0 * (h + 1) / nheads) for h in range(nheads)], dtype=torch.float32)
    if per_batch:
        return (base * (0.5 + torch.rand(batch, nheads))).to(DEVICE)
    return (base * (0.5 + torch.rand(nheads))).to(DEVICE)


# --- sliding window --------------------------------------------------------------

WINDOW_CASES = [
    # nq, nk, (left, right), head dim
    (17, 17, (4, 4), 40),
    (113, 17, (5, 3), 80),       # Nq > Nk: many rows see nothing
    (17, 113, (0, 0), 96),       # a single key per row
    (70, 50, (10, -1), 64),      # left edge only
    (50, 70, (-1, 10), 40),      # right edge only
    (113, 113, (45, 40), 80),    # wide band: fully visible tiles between two masked edges
    (40, 100, (-1, 0), 96),      # the causal diagonal written as a window
    (100, 40, (200, 200), 64),   # wider than the sequences: no effect
    (1, 65, (3, 2), 40),
]


@pytest.mark.parametrize("backend", kernel_backends())
@pytest.mark.parametrize("i,case", list(enumerate(WINDOW_CASES)))
def test_window(backend, i, case):
    nq, nk, window, d = case
    q, k, v = rand_qkv(2 if nq * nk < 5000 else 1, nq, nk, *HEADS[i % 3], d, DTYPES[i % 2], DEVICE)
    check_attention(backend, q, k, v, window_size=window)


@pytest.mark.parametrize("backend", BACKENDS)
def test_regression_huge_window(backend):
    """window_size=(2**31 - 1, 2**31 - 1), a common way to say "unbounded", overflowed
    the kernels' int32 index + window arithmetic: wrong outputs and gradients. A window
    edge past every sequence now becomes -1 in the launcher."""
    q, k, v = rand_qkv(1, 70, 70, 2, 2, 32, torch.float16, DEVICE)
    big = 2 ** 31 - 1
    check_attention(backend, q, k, v, window_size=(big, big))
    check_attention(backend, q, k, v, window_size=(big, 3))


@pytest.mark.parametrize("backend", kernel_backends())
@pytest.mark.parametrize("nq,nk,left", [(65, 65, 20), (30, 90, 7), (90, 30, 7), (113, 113, 0)])
def test_window_with_causal(backend, nq, nk, left):
    q, k, v = rand_qkv(1, nq, nk, 4, 2, 40, torch.float16, DEVICE)
    check_attention(backend, q, k, v, causal=True, window_size=(left, -1))


@pytest.mark.parametrize("backend", BACKENDS)
def test_causal_overrides_right_window_edge(backend):
    """flash-attn semantics: causal=True sets the right edge to 0 whatever window_size says;
    window (-1, 0) is exactly causal."""
    q, k, v = rand_qkv(1, 40, 60, 2, 2, 32, torch.float16, DEVICE)
    with flashtriton.use_backend(backend):
        a = flash_attn_func(q, k, v, causal=True, window_size=(9, 25))
        b = flash_attn_func(q, k, v, window_size=(9, 0))
        c = flash_attn_func(q, k, v, causal=True)
        d = flash_attn_func(q, k, v, window_size=(-1, 0))
    assert torch.equal(a, b)
    assert torch.equal(c, d)
    assert not torch.equal(a, c)


# --- ALiBi -----------------------------------------------------------------------

@pytest.mark.parametrize("backend", kernel_backends())
@pytest.mark.parametrize("nq,nk,causal,heads,d,per_batch", [
    (17, 113, False, (4, 2), 40, False),
    (113, 17, True, (4, 1), 96, True),
    (65, 65, True, (4, 4), 80, False),
    (1, 40, False, (4, 2), 64, True),
])
def test_alibi(backend, nq, nk, causal, heads, d, per_batch):
    q, k, v = rand_qkv(2, nq, nk, *heads, d, torch.bfloat16 if causal else torch.float16, DEVICE)
    check_attention(backend, q, k, v, causal=causal, alibi_slopes=alibi_slopes(2, heads[0], per_batch))


@pytest.mark.parametrize("backend", BACKENDS)
def test_alibi_steep_slopes(backend):
    """Slopes so steep that each row effectively attends to its diagonal key only."""
    q, k, v = rand_qkv(1, 50, 70, 2, 1, 32, torch.float16, DEVICE)
    check_attention(backend, q, k, v, alibi_slopes=torch.tensor([4.0, 16.0], device=DEVICE))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("nq, nk, slope, scale", [(200, 17, 2.0, -0.2), (200, 2, 0.5, None), (120, 9, 1.0, None)])
def test_regression_fp32_alibi_rows_before_keys(backend, nq, nk, slope, scale):
    """Regression (README limitation of session 66, fixed in session 67): fp32, not causal, Nq > Nk,
    so the first Nq - Nk rows sit before every key and their ALiBi biases are hundreds of units.
    The float32 lse carried that constant, rounded at its size, and the backward's P inherited
    the rounding: dQ / dV 2.7-3.8x the bound at 17 keys, dV 8-42x at one key (CPU; Triton alike;
    one-key rows are not checked here: PyTorch's gradient error is exactly 0 on them).
    The prefill kernels now anchor the bias at max(i + Nk - Nq, 0) and the public lse adds the
    constant back (flashtriton/alibi_anchor.py); check_attention also holds that lse and
    S_dmask to the reference. Batch 2 with (B, H) slopes, GQA 4 / 2."""
    torch.manual_seed(nq + nk)
    q, k, v = rand_qkv(2, nq, nk, 4, 2, 40, torch.float32, DEVICE)
    slopes = slope * torch.tensor([[1.0, 0.5, 0.25, 0.125], [0.75, 1.0, 0.3, 2.0]], device=DEVICE)
    check_attention(backend, q, k, v, alibi_slopes=slopes, softmax_scale=scale, seed=nk)


def test_regression_fp32_alibi_rows_before_keys_varlen():
    """The same rows in a packed batch (sequences 150 x 9, 0 x 3, 7 x 20, 60 x 2): the per-row
    anchors and the public lse's per-sequence offsets (alibi_anchor._row_offsets), on every backend."""
    torch.manual_seed(67)
    lens_q, lens_k = [150, 0, 7, 60], [9, 3, 20, 2]
    cu_q = torch.tensor([0] + list(itertools.accumulate(lens_q)), dtype=torch.int32, device=DEVICE)
    cu_k = torch.tensor([0] + list(itertools.accumulate(lens_k)), dtype=torch.int32, device=DEVICE)
    q = torch.randn(sum(lens_q), 4, 40, device=DEVICE)
    k, v = (torch.randn(sum(lens_k), 2, 40, device=DEVICE) for _ in range(2))
    slopes = torch.tensor([2.0, 1.0, 0.5, 0.25], device=DEVICE)
    for backend in BACKENDS:
        check_attention(backend, q, k, v, varlen=(cu_q, cu_k, max(lens_q), max(lens_k)), alibi_slopes=slopes,
                        seed=3)


# --- softcap ---------------------------------------------------------------------

@pytest.mark.parametrize("backend", kernel_backends())
@pytest.mark.parametrize("softcap,scale,causal,d", [
    (0.5, None, False, 40),     # strong saturation: most scores sit on the plateau
    (5.0, 0.5, True, 96),       # large scale: scores well into tanh's curve
    (30.0, None, True, 80),     # mild: nearly linear
])
def test_softcap(backend, softcap, scale, causal, d):
    q, k, v = rand_qkv(1, 50, 113, 4, 2, d, torch.float16, DEVICE)
    check_attention(backend, q, k, v, softcap=softcap, softmax_scale=scale, causal=causal)


# --- softmax_scale ----------------------------------------------------------------

@pytest.mark.parametrize("backend", BACKENDS)
def test_regression_negative_softmax_scale(backend):
    """Validation allows any finite softmax_scale. The forward kernel's unmasked tiles
    took the row max of the raw dots times the scale, which is the row *min* of the
    scores for a negative scale: exp2 overflowed and the output was inf/NaN. A wide
    score range (scaled inputs) on tiles with no mask reproduces it."""
    n = max(2 * _tile(backend), 64)
    q, k, v = rand_qkv(1, n, n, 2, 1, 64, torch.float16, DEVICE)
    check_attention(backend, q * 2, k * 2, v, softmax_scale=-1.0)
    check_attention(backend, q, k, v, softmax_scale=-0.125, causal=True)


# --- combinations ----------------------------------------------------------------

COMBOS = [
    # nq, nk, heads, d, dtype, options
    (17, 17, (4, 2), 40, torch.float16, dict(alibi=True, softcap=3.0)),
    (113, 65, (4, 1), 80, torch.bfloat16, dict(alibi=True, softcap=8.0, causal=True)),
    (65, 113, (4, 2), 96, torch.float16, dict(window_size=(20, 5), alibi=True, softcap=2.0)),
    (113, 113, (4, 4), 40, torch.bfloat16, dict(window_size=(33, -1), causal=True, alibi=True)),  # batch 1
    (1, 17, (4, 2), 80, torch.float16, dict(window_size=(3, 3), softcap=1.0)),
]


@pytest.mark.parametrize("backend", kernel_backends())
@pytest.mark.parametrize("nq,nk,heads,d,dtype,opts", COMBOS)
def test_combinations(backend, nq, nk, heads, d, dtype, opts):
    opts = dict(opts)
    batch = 2 if nq * nk < 10000 else 1
    alibi = alibi_slopes(batch, heads[0], per_batch=nq % 2 == 1) if opts.pop("alibi", False) else None
    q, k, v = rand_qkv(batch, nq, nk, *heads, d, dtype, DEVICE)
    check_attention(backend, q, k, v, alibi_slopes=alibi, **opts)


REFERENCE_BACKEND_CASES = [
    dict(window_size=(5, 3)),
    dict(causal=True, window_size=(7, -1)),
    dict(alibi=True, softcap=2.0),
    dict(causal=True, alibi=True, softcap=4.0, window_size=(9, -1)),
]


@pytest.mark.parametrize("opts", REFERENCE_BACKEND_CASES)
@pytest.mark.parametrize("nq,nk", [(17, 40), (40, 17)])
def test_reference_backend(opts, nq, nk):
    """The reference backend (plain PyTorch behind the op) meets the same criterion."""
    opts = dict(opts)
    alibi = alibi_slopes(2, 4, per_batch=nq > nk) if opts.pop("alibi", False) else None
    q, k, v = rand_qkv(2, nq, nk, 4, 2, 40, torch.float16, DEVICE)
    check_attention("reference", q, k, v, alibi_slopes=alibi, **opts)


# --- tiles outside the band are never loaded ----------------------------------------

def _tile(backend, head_dim=64):
    """Largest tile dimension the Triton launchers use on this machine, at any sequence
    length (0 for other backends)."""
    if backend != "triton":
        return 0
    from flashtriton.kernels import configs
    from flashtriton.launchers import prefill
    bd = prefill.block_d(head_dim)
    # every 16-bit default table: long, short and sliding-window sequences
    tiles = [table[bd] for table in configs.DEFAULTS.values() if bd in table]
    return max(max(t.block_m, t.block_n) for t in tiles)


@pytest.mark.parametrize("backend", [b for b in kernel_backends() if b == "triton"])
def test_tiles_outside_the_band_are_skipped(backend):
    """A NaN planted in a key/value row propagates through any tile that loads it (even
    fully masked: 0 * NaN = NaN in P V). So rows whose band never reaches that key stay
    finite only if its tile is skipped entirely, as the spec requires."""
    t = _tile(backend) or 32
    n = 4 * t
    # causal: key n - 1 is in the last key tile; query blocks below 2t never load it
    q, k, v = rand_qkv(1, n, n, 2, 1, 64, torch.float16, DEVICE, requires_grad=True)
    with torch.no_grad():
        k[0, n - 1, 0, 5] = float("nan")
        v[0, n - 1, 0, 7] = float("nan")
    with flashtriton.use_backend(backend):
        out = flash_attn_func(q, k, v, causal=True)
        dq, = torch.autograd.grad(out, q, torch.randn_like(out))
    assert torch.isfinite(out[0, :2 * t]).all() and torch.isfinite(dq[0, :2 * t]).all()
    assert torch.isnan(out[0, n - 1]).any()  # the row that does see it

    # sliding window: key 0 is out of reach for rows >= left + 1; rows from 2t + left on
    # have a band starting in a later tile
    left = 5
    q, k, v = rand_qkv(1, n, n, 2, 1, 64, torch.float16, DEVICE, requires_grad=True)
    with torch.no_grad():
        v[0, 0, 0, 3] = float("nan")
    with flashtriton.use_backend(backend):
        out = flash_attn_func(q, k, v, window_size=(left, 0))
        dq, dk, dv = torch.autograd.grad(out, (q, k, v), torch.randn_like(out))
    assert torch.isfinite(out[0, 2 * t + left:]).all() and torch.isfinite(dq[0, 2 * t + left:]).all()
    assert torch.isnan(out[0, 0]).any()

    # backward, the other way round: a NaN in query row 0 (hence in its lse) reaches the
    # dK/dV of keys whose tiles see row 0's tile only
    q, k, v = rand_qkv(1, n, n, 2, 1, 64, torch.float16, DEVICE, requires_grad=True)
    with flashtriton.use_backend(backend):
        out = flash_attn_func(q, k, v, causal=True)
        dout = torch.randn_like(out)
        dout[0, 0, :, 1] = float("nan")
        dq, dk, dv = torch.autograd.grad(out, (q, k, v), dout)
    assert torch.isfinite(dk[0, 2 * t:]).all() and torch.isfinite(dv[0, 2 * t:]).all()
    assert torch.isnan(dv[0, 0]).any()


# --- the reference's own semantics -----------------------------------------------------

REF_CASES = [
    dict(),
    dict(window_left=1, window_right=2),
    dict(window_right=0),
    dict(window_left=0, window_right=-1),
    dict(softcap=0.7),
    dict(alibi="h"),
    dict(alibi="bh", window_right=0, softcap=2.0),
    dict(dropout_p=0.4),
    dict(dropout_p=0.3, alibi="h", softcap=1.5, window_left=2, window_right=1),
]


def _ref_kwargs(case, b, h, nq, nk):
    kw = dict(case)
    alibi = kw.pop("alibi", None)
    if alibi == "h":
        kw["alibi_slopes"] = torch.rand(h) * 0.5
    elif alibi == "bh":
        kw["alibi_slopes"] = torch.rand(b, h) * 0.5
    if kw.get("dropout_p", 0) > 0:
        kw["dropout_mask"] = torch.rand(b, h, nq, nk) >= kw["dropout_p"]
    return kw


@pytest.mark.parametrize("nq,nk", [(5, 5), (3, 6), (6, 3)])
@pytest.mark.parametrize("case", REF_CASES)
def test_reference_matches_written_semantics(nq, nk, case):
    """flashtriton.reference against a loop over elements written from the spec."""
    b, h, hk, d = 2, 4, 2, 8
    q, k, v = (t.double() for t in rand_qkv(b, nq, nk, h, hk, d, torch.float64, "cpu"))
    kw = _ref_kwargs(case, b, h, nq, nk)
    out, lse = reference.attention(q, k, v, softmax_scale=0.4, **kw)
    out_n, lse_n = naive_attention(q, k, v, softmax_scale=0.4, **kw)
    torch.testing.assert_close(out, out_n, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(lse, lse_n, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("case", REF_CASES[1:])
def test_reference_gradients_are_exact(case):
    """The reference's autograd gradients (the tests' truth for dq, dk, dv) against
    finite differences, softcap and ALiBi included."""
    b, h, hk, nq, nk, d = 1, 2, 1, 4, 5, 8
    q, k, v = rand_qkv(b, nq, nk, h, hk, d, torch.float64, "cpu", requires_grad=True)
    kw = _ref_kwargs(case, b, h, nq, nk)
    assert torch.autograd.gradcheck(lambda q, k, v: reference.attention(q, k, v, softmax_scale=0.6, **kw)[0],
                                    (q, k, v))


def test_reference_rows_without_keys():
    """A row whose band holds no key: output 0, lse +inf, zero gradients, no NaN."""
    q, k, v = rand_qkv(1, 6, 3, 2, 2, 8, torch.float64, "cpu", requires_grad=True)
    out, lse = reference.attention(q, k, v, softmax_scale=0.5, window_right=0)
    assert torch.all(out[:, :3] == 0) and torch.all(lse[:, :, :3] == math.inf)
    grads = torch.autograd.grad(out, (q, k, v), torch.randn_like(out))
    assert all(torch.isfinite(g).all() for g in grads) and torch.all(grads[0][:, :3] == 0)


def test_reference_visible_mask_and_alibi_formulas():
    nq, nk = 4, 7
    for left, right in [(-1, -1), (1, -1), (-1, 0), (2, 1), (0, 0)]:
        mask = reference.visible_mask(nq, nk, left, right, "cpu")
        for i in range(nq):
            for j in range(nk):
                want = ((left < 0 or j >= i + nk - nq - left) and (right < 0 or j <= i + nk - nq + right))
                assert (True if mask is None else bool(mask[i, j])) == want
    slopes = torch.tensor([[0.5, 0.25]])
    bias = reference.alibi_bias(slopes, 1, 2, nq, nk, torch.float64)
    for h in range(2):
        for i in range(nq):
            for j in range(nk):
                assert bias[0, h, i, j] == -slopes[0, h] * abs(i + nk - nq - j)


@pytest.mark.parametrize("backend", BACKENDS)
def test_neutral_settings_change_nothing(backend):
    """Zero ALiBi slopes and a window wider than the sequences are exact no-ops; a huge
    softcap is the identity up to rounding."""
    q, k, v = rand_qkv(2, 33, 47, 4, 2, 40, torch.float16, DEVICE)
    with flashtriton.use_backend(backend):
        plain = flash_attn_func(q, k, v, causal=True)
        zero_alibi = flash_attn_func(q, k, v, causal=True, alibi_slopes=torch.zeros(4, device=DEVICE))
        wide = flash_attn_func(q, k, v, causal=True, window_size=(100, 100))
        capped = flash_attn_func(q, k, v, causal=True, softcap=1e4)
    torch.testing.assert_close(zero_alibi, plain, rtol=0, atol=2e-3)
    torch.testing.assert_close(wide, plain, rtol=0, atol=2e-3)
    torch.testing.assert_close(capped, plain, rtol=0, atol=2e-3)
