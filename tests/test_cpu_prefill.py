"""The CPU backend's prefill paths that the shared suite (small shapes, one tile) does
not reach: many key tiles (online softmax, lazy rescaling and its fallback), row
sub-blocks at the causal diagonal and window edges, tile skipping, tile-local
dropout, and the bound on the size of every score tile.

Most cases shrink the tiles (config.FWD_ROWS etc.) so that small sequences cross
many tile boundaries; every result is checked against the float64 reference with
the suite's criterion (tests/helpers.py). Every test runs on both forward paths
(config.FWD_PATH): the compiled kernel of cpu/native_prefill.py (the default where
it builds; its own tests are in test_cpu_prefill_compiled.py) and the torch-ops loop
of cpu/forward.py; tests of the loop's internals run on "ops" only.
"""
import math

import pytest
import torch

import flashtriton
from flashtriton import backends, flash_attn_func, reference
from flashtriton.launchers.prefill import AttnParams

from conftest import DEVICE
from helpers import (assert_close, check_attention, dropout_rng, prefill_kernel_available, rand_qkv, rand_varlen,
                     reference_pair)

pytestmark = pytest.mark.skipif(not backends.cpu_available() or DEVICE != "cpu", reason="CPU backend tests")

if backends.cpu_available():
    from flashtriton.cpu import config, engine, forward, native_prefill


def amx_unavailable() -> str | None:
    """Why the AMX forward kernel (bf16) cannot run here, or None when it can."""
    try:
        native_prefill.load_amx()
        return None
    except native_prefill.NativeUnavailable as e:
        return str(e)


@pytest.fixture(autouse=True, params=["compiled", "compiled-amx", "ops"])
def forward_path(request, monkeypatch):
    """Runs the test on the compiled forward (its AVX-512 kernel; its AMX kernel, which
    takes bf16 only, float32 staying on AVX-512) and on the torch-ops loop."""
    if request.param != "ops" and not prefill_kernel_available():
        pytest.skip("the compiled forward (cpu/native_prefill.py) does not build / run on this machine")
    if request.param == "compiled-amx" and amx_unavailable():
        pytest.skip(f"no AMX forward here: {amx_unavailable()}")
    monkeypatch.setattr(config, "FWD_PATH", "ops" if request.param == "ops" else "compiled")
    monkeypatch.setattr(config, "FWD_AMX", "on" if request.param == "compiled-amx" else "off")
    return request.param


def ops_only(path):
    if path != "ops":
        pytest.skip("tests the torch-ops loop's internals (config.FWD_PATH = 'ops')")


@pytest.fixture
def tiny_tiles(monkeypatch):
    """Tiles of a few rows / keys: a 100-token sequence spans many of them."""
    monkeypatch.setattr(config, "FWD_ROWS", 24)
    monkeypatch.setattr(config, "FWD_KEYS", 16)
    monkeypatch.setattr(config, "FWD_SUB_ROWS", 8)
    monkeypatch.setattr(config, "BWD_KEYS", 16)
    monkeypatch.setattr(config, "BWD_ROWS", 24)


HEADS = [(4, 4), (4, 2), (6, 2), (4, 1)]   # MHA, GQA, GQA with a group of 3, MQA


@pytest.mark.parametrize("heads", HEADS)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("causal", [False, True])
def test_many_tiles(tiny_tiles, heads, dtype, causal):
    q, k, v = rand_qkv(2, 77, 101, *heads, 32, dtype, DEVICE)
    check_attention("cpu", q, k, v, causal=causal)


@pytest.mark.parametrize("window", [(5, 3), (0, 0), (20, -1), (-1, 7), (40, 40), (3, 200)])
def test_windows_many_tiles(tiny_tiles, window):
    q, k, v = rand_qkv(1, 90, 70, 4, 2, 40, torch.bfloat16, DEVICE)
    check_attention("cpu", q, k, v, window_size=window)


def test_alibi_softcap_window_many_tiles(tiny_tiles):
    q, k, v = rand_qkv(2, 60, 85, 6, 2, 48, torch.float16, DEVICE)
    alibi = (torch.rand(2, 6) * 0.5).to(DEVICE)
    check_attention("cpu", q, k, v, causal=True, window_size=(30, -1), softcap=8.0, alibi_slopes=alibi)


@pytest.mark.parametrize("p", [0.2, 0.7])
def test_dropout_many_tiles(tiny_tiles, p):
    """The forward draws its keep mask per (row block, key tile), the backward per
    (key tile, row block) with other sizes: both must match dropout_mask()."""
    q, k, v = rand_qkv(2, 50, 66, 4, 2, 32, torch.float32, DEVICE)
    check_attention("cpu", q, k, v, dropout_p=p, causal=True, seed=7)


def test_varlen_many_tiles(tiny_tiles):
    (q, k, v), varlen = rand_varlen([33, 0, 70, 1], [40, 12, 70, 0], 4, 2, 32, torch.bfloat16, DEVICE)
    check_attention("cpu", q, k, v, varlen=varlen, causal=True)
    check_attention("cpu", q, k, v, varlen=varlen, window_size=(9, 4), dropout_p=0.3, seed=3)


def test_lazy_rescale_fallback(tiny_tiles):
    """Keys in a late tile score far above everything before them (a jump of ~300 in
    log2 units): exp2(s - stale max) would overflow, so the step must fall back to a
    real rescale. A missing fallback gives inf / NaN here."""
    q, k, v = rand_qkv(1, 40, 64, 2, 2, 32, torch.float32, DEVICE)
    k[:, 48:] *= 60.0
    q = q * 4.0
    check_attention("cpu", q, k, v, grads=False)
    # and the reverse: a first tile far above the rest (later keys underflow to 0)
    k2 = k.clone()
    k2[:, :16] *= 60.0
    k2[:, 48:] /= 60.0
    check_attention("cpu", q, k2, v, grads=False)


def test_row_without_keys_in_first_tile(tiny_tiles):
    """Window rows whose first visible key lies in a later tile start from the floor
    of the running max; rows that see nothing output 0 with lse +inf."""
    q, k, v = rand_qkv(1, 60, 30, 2, 1, 32, torch.bfloat16, DEVICE)
    res = check_attention("cpu", q, k, v, window_size=(3, 0))
    assert torch.all(res["out"][:, :27] == 0) and torch.all(torch.isinf(res["lse"][:, :, :27]))


def _score_tiles(monkeypatch, n=2048, **kw):
    """Runs a forward pass and returns the element counts of every product (torch-ops
    loop), or of the scores the compiled kernel computed (one count per sequence)."""
    sizes = []
    real = engine.mm_nt

    def counting(x, w):
        res = real(x, w)
        sizes.append(res.numel())
        return res

    real_seq = native_prefill.forward_sequence
    monkeypatch.setattr(engine, "mm_nt", counting)
    monkeypatch.setattr(native_prefill, "forward_sequence", lambda *a: sizes.append(real_seq(*a)) or sizes[-1])
    q, k, v = rand_qkv(1, n, n, 2, 2, 16, torch.float32, DEVICE)
    params = AttnParams(0.25, **kw)
    forward.fwd(q, k, v, params)
    return sizes


def test_causal_tiles_are_skipped(monkeypatch, forward_path):
    """Causal computes about half the scores of non-causal. Torch-ops loop: with nb
    row blocks, block b computes keys [0, (b + 1) * rows) (the diagonal square whole,
    masked), a share of (nb + 1) / (2 nb) = 0.625 at N = 2048 with 512-row blocks; a
    narrow sliding window is cut into row sub-blocks and computes far less. Compiled
    kernel: blocks of 8 rows x 32 keys that no row sees are skipped, so causal is
    within 1% of the half and the window (64, 0) within 4% of its 3%."""
    full = sum(_score_tiles(monkeypatch))
    assert full >= 2 * 2048 * 2048  # two heads, every score once (+ the small P @ V products)
    nb = 2048 // config.FWD_ROWS
    causal = sum(_score_tiles(monkeypatch, window_right=0))
    window = sum(_score_tiles(monkeypatch, window_left=64, window_right=0))
    if forward_path == "ops":
        assert causal <= ((nb + 1) / (2 * nb) + 0.01) * full
        assert window <= 0.15 * full
    else:
        assert full == 2 * 2048 * 2048
        assert 0.5 * full <= causal <= 0.51 * full
        assert 0.03 * full <= window <= 0.07 * full


def test_score_tiles_are_bounded(monkeypatch, forward_path):
    """Nothing materialises N x N: every product is at most one tile (the compiled
    kernel's bound: test_cpu_prefill_compiled.py::test_scratch_does_not_grow_with_n)."""
    ops_only(forward_path)
    sizes = _score_tiles(monkeypatch)
    assert max(sizes) <= config.FWD_ROWS * config.FWD_KEYS


def test_forward_bitwise_repeatable_multi_tile(tiny_tiles):
    q, k, v = rand_qkv(2, 100, 90, 6, 2, 32, torch.bfloat16, DEVICE)
    alibi = torch.rand(6).to(DEVICE)
    with flashtriton.use_backend("cpu"):
        a = flash_attn_func(q, k, v, causal=True, alibi_slopes=alibi, softcap=5.0)
        b = flash_attn_func(q, k, v, causal=True, alibi_slopes=alibi, softcap=5.0)
    assert torch.equal(a, b)


def test_dropout_mask_tiles_agree():
    """A tile drawn on its own equals the same slice of the full mask."""
    from flashtriton.cpu.dropout import Dropout
    rng = dropout_rng(5, DEVICE)
    drop = Dropout(0.4, rng, nheads=6, mq=50, mk=70)
    full = drop.full_mask(3)
    tile = drop.keep(seq=2, h0=3, group=3, i0=10, i1=31, j0=17, j1=66)   # (21, 3, 49)
    assert torch.equal(tile, full[2, 3:6, 10:31, 17:66].permute(1, 0, 2))
    other = Dropout(0.4, dropout_rng(6, DEVICE), nheads=6, mq=50, mk=70).full_mask(3)
    assert (other != full).float().mean() > 0.3  # another seed, another mask


def test_no_cpu_dropout_without_rng():
    from flashtriton.cpu.dropout import Dropout
    with pytest.raises(ValueError, match="rng_state"):
        Dropout(0.1, None, 2, 4, 4)


def test_engine_matches_float64():
    g = torch.Generator().manual_seed(3)
    x, w = torch.randn(70, 96, generator=g), torch.randn(45, 96, generator=g)
    ref = x.double() @ w.double().t()
    err = (engine.mm_nt(x, w).double() - ref).abs().max().item()
    assert err <= 1e-5 * ref.abs().max().item()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_large_head_dim_and_long_rows(dtype):
    """Default tiles, a sequence longer than one tile in both directions."""
    q, k, v = rand_qkv(1, 600, 1100, 2, 1, 96, dtype, DEVICE, requires_grad=True)
    with flashtriton.use_backend("cpu"):
        out = flash_attn_func(q, k, v, causal=True)
        dout = torch.randn_like(out)
        grads = torch.autograd.grad(out, (q, k, v), dout)
    truth, lowp = reference_pair(q, k, v, dout, softmax_scale=1 / math.sqrt(96), window_right=0)
    assert_close("out", out, truth["out"], lowp["out"], 2, dtype)
    for name, g in zip(("dq", "dk", "dv"), grads):
        assert_close(name, g, truth[name], lowp[name], 3, dtype)


def test_fp32_stays_fp32():
    """fp32 inputs: the error is at fp32 level (a bf16 shortcut anywhere would be
    ~1e-3)."""
    q, k, v = rand_qkv(1, 300, 300, 2, 2, 64, torch.float32, DEVICE)
    with flashtriton.use_backend("cpu"):
        out = flash_attn_func(q, k, v)
    ref = reference.attention(q.double(), k.double(), v.double(), softmax_scale=1 / 8)[0]
    assert (out.double() - ref).abs().max().item() < 1e-5


@pytest.mark.parametrize("n", [40, 101])   # one piece per block (_one_piece) / many tiles (_Block)
def test_hidden_nan_stays_hidden(tiny_tiles, monkeypatch, n):
    """Regression (the fast mask, min(s, +-inf bound), keeps a hidden NaN score NaN):
    a NaN key that only the last query sees must not reach the other rows; the forward
    detects the NaN and recomputes the block with masked_fill_."""
    if n == 40:
        monkeypatch.setattr(config, "FWD_ROWS", 64)
        monkeypatch.setattr(config, "FWD_KEYS", 64)
    q, k, v = rand_qkv(1, n, n, 2, 2, 32, torch.float32, DEVICE)
    k[:, -1] = float("nan")
    with flashtriton.use_backend("cpu"):
        out = flash_attn_func(q, k, v, causal=True)
    ref = reference.attention(q.double(), k.double(), v.double(), softmax_scale=32 ** -0.5, window_right=0)[0]
    assert torch.isnan(out[:, -1]).all()
    assert torch.isfinite(out[:, :-1]).all()
    assert (out[:, :-1].double() - ref[:, :-1]).abs().max().item() <= 1e-5


def test_fast_mask_equals_masked_fill():
    """tiles.mask_'s fast form (min with a +-inf bound) gives masked_fill_'s result,
    +inf scores included, on diagonal, window and strided (partial-column) cases."""
    from flashtriton.cpu.tiles import Band, mask_
    for band, (i0, i1, j0, j1) in [(Band(64, 64, -1, 0), (0, 32, 0, 48)), (Band(64, 80, 5, 3), (16, 48, 8, 72)),
                                   (Band(64, 64, -1, 0), (32, 64, 0, 64))]:
        s = torch.randn(i1 - i0, 3, j1 - j0)
        s[0, 0, -1] = math.inf
        a, b = s.clone(), s.clone()
        mask_(a, band, i0, i1, j0, j1, fast=False)
        mask_(b, band, i0, i1, j0, j1, fast=True)
        assert torch.equal(a, b)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_diagonal_row_sub_blocks(tiny_tiles, monkeypatch, dtype, forward_path):
    """config.FWD_DIAG_ROWS > 0 cuts tiles on the causal diagonal into row sub-blocks
    (off by default: measured no faster, bench/NOTES.md); results stay exact."""
    ops_only(forward_path)
    monkeypatch.setattr(config, "FWD_DIAG_ROWS", 8)
    q, k, v = rand_qkv(2, 77, 101, 4, 2, 32, dtype, DEVICE)
    check_attention("cpu", q, k, v, causal=True, grads=False)
    check_attention("cpu", q, k, v, window_size=(-1, 5), grads=False)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("kw", [dict(causal=True), dict(window_size=(9, 4), softcap=5.0), dict(alibi=True),
                                dict(varlen=True, causal=True)])
def test_short_sequence_path_matches_per_head(monkeypatch, dtype, kw, forward_path):
    """Sequences of one row block over one key piece take forward._short_sequence
    (all heads per pass); it must give the per-head path's result bit for bit."""
    ops_only(forward_path)
    kw = dict(kw)
    q, k, v = rand_qkv(3, 40, 56, 6, 2, 32, dtype, DEVICE)
    if kw.pop("alibi", False):
        kw["alibi_slopes"] = torch.rand(3, 6) * 0.3
    calls = []
    real = forward._short_sequence
    monkeypatch.setattr(forward, "_short_sequence", lambda *a: calls.append(1) or real(*a))

    def run():
        with flashtriton.use_backend("cpu"):
            if kw.get("varlen"):
                args = {x: y for x, y in kw.items() if x != "varlen"}
                cu_q = torch.tensor([0, 40, 70, 120], dtype=torch.int32)
                cu_k = torch.tensor([0, 56, 90, 168], dtype=torch.int32)
                return flashtriton.flash_attn_varlen_func(q.reshape(-1, 6, 32), k.reshape(-1, 2, 32),
                                                          v.reshape(-1, 2, 32), cu_q, cu_k, 50, 78,
                                                          return_attn_probs=True, **args)[:2]
            return flash_attn_func(q, k, v, return_attn_probs=True, **kw)[:2]
    out, lse = run()
    assert calls
    monkeypatch.setattr(forward, "_single_piece", lambda *a: None)
    out2, lse2 = run()
    assert torch.equal(out, out2) and torch.equal(lse, lse2)
