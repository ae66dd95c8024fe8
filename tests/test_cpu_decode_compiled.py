"""The CPU backend's compiled decode kernel (flashtriton/cpu/native.py, the default
decode path, config.DECODE_PATH = "compiled") against the float64 reference, with the
error bound of the other decode tests (<= 2x the same-dtype PyTorch math's error):
lengths from 0 and ragged tails of the 16-key blocks, paged caches (pages of 1, 16
and 64 positions, shuffled pools), GQA / MQA / MHA, speculative causal rows, windows,
left padding, append + rotary, every head dim the kernel takes, splits, thread counts,
path selection and the error raised when the kernel cannot be built. One compile
(a few seconds, then the on-disk cache) serves the whole file.

Every test that runs the default library runs twice: with config.DECODE_AMX = "off"
(the AVX-512 / portable kernel) and "on" (bf16 caches on AMX tiles, head_amx; skipped,
with the reason, where the CPU, the build or the permission does not allow it).
_run_compiled checks that the expected kernel ran ("compiled-amx" for bf16 under "on").
"""
import os

import pytest
import torch

import flashtriton
from flashtriton import backends, flash_attn_with_kvcache, kvcache

from conftest import DEVICE
from test_cpu_decode import _copy, _garbage_cache_inputs, _inputs, _run, _twice_then_one_thread

pytestmark = pytest.mark.skipif(not backends.cpu_available() or DEVICE != "cpu", reason="CPU backend tests")

if backends.cpu_available():
    from flashtriton.cpu import config, decode, native


# tests that swap in a variant library (native.load monkeypatched) or test the plain
# build: only the AVX-512 selection applies to them
_NO_AMX = {"test_build_failure_raises", "test_fma_bf16_score_path", "test_blk512_matches_portable_step",
           "test_blk512_softmax_step_widths", "test_prefetch_next_block_matches_touch",
           "test_regression_score_loads_in_registers", "test_alibi_softcap_variants"}
_AMX_ON = [False]   # the current test's mode (set by the fixture)


def _amx_skip_reason():
    try:
        native.load_amx()
    except native.NativeUnavailable as e:
        return f"no AMX decode kernel here: {e}"
    return None


@pytest.fixture(autouse=True, params=["off", "on"], ids=["avx512", "amx"])
def compiled_path(monkeypatch, request):
    monkeypatch.setattr(config, "DECODE_PATH", "compiled")
    monkeypatch.setattr(config, "DECODE_AMX", request.param)
    if request.param == "on":
        if request.node.originalname in _NO_AMX:
            pytest.skip("swaps in a non-AMX library variant: runs under DECODE_AMX=off only")
        reason = _amx_skip_reason()
        if reason:
            pytest.skip(reason)
    _AMX_ON[0] = request.param == "on"


@pytest.fixture(autouse=True)
def fresh_steps():
    """Empties kvcache's step memo before and after each test: a memo entry holds the CompiledLaunch (and with
    it the library) of its tensor signature, so a library a test swaps in (_use_library) must not meet a launch
    built on another one, nor leave its own to a later test."""
    kvcache._STRUCTURES.clear()
    yield
    kvcache._STRUCTURES.clear()


def _use_library(monkeypatch, lib, name="load"):
    """Runs later calls on `lib` (a load_variant build): native.load (or load_amx) swapped and the step memo
    emptied (its launches keep the library they were built on: session 63 found the variant tests comparing
    the default build with itself through them)."""
    monkeypatch.setattr(native, name, lambda: lib)
    kvcache._STRUCTURES.clear()


def _expected_path(dtype, d=64):
    """AMX takes bf16 head dims that are multiples of 32 (48 / 80 / 112 stay on the AVX-512 step)."""
    return "compiled-amx" if _AMX_ON[0] and dtype == torch.bfloat16 and d % 32 == 0 else "compiled"


def _run_compiled(inp, **kw):
    res = _run(inp, **kw)
    assert decode.LAST_PATH == _expected_path(inp["k_cache"].dtype, inp["q"].shape[-1])
    return res


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("heads", [(8, 2), (4, 4), (8, 1), (32, 8)])
def test_random_lengths(dtype, heads):
    """Lengths 0, 1, 15, 16, 17 and random ones: empty items and partial 16-key blocks."""
    g = torch.Generator().manual_seed(heads[0] * 10 + heads[1])
    lens = [0, 1, 15, 16, 17] + torch.randint(18, 300, (3,), generator=g).tolist()
    inp = _inputs(len(lens), 1, *heads, 64, dtype, 300, lens)
    for splits in (0, 1, 3):
        _run_compiled(inp, num_splits=splits)


@pytest.mark.parametrize("page", [1, 16, 64])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_paged_shuffled_pool(page, dtype):
    """Pages anywhere in the pool; blocks, splits and prefetches cross pages."""
    inp = _inputs(3, 1, 8, 2, 64, dtype, 384, [383, 77, 0], page=page)
    for splits in (0, 3):
        _run_compiled(inp, num_splits=splits)


@pytest.mark.parametrize("page", [0, 16])
@pytest.mark.parametrize("interleaved", [True, False])
def test_append_rotary_speculative(page, interleaved):
    """Sq = 3 new tokens appended (rotary), causal rows see different key counts."""
    inp = _inputs(2, 3, 8, 2, 64, torch.bfloat16, 192, [100, 0], snew=3, page=page, rotary_dim=32)
    _run_compiled(inp, causal=True, interleaved=interleaved, num_splits=2)
    _run_compiled(inp, causal=False, interleaved=interleaved)


@pytest.mark.parametrize("page", [0, 16])
def test_fp16_append_alibi_softcap(page):
    """fp16 caches (session 63: widened to float32 by vcvtph2ps - exact products, float32 sums - the output
    rounded to fp16): appended tokens with rotary, causal speculative rows, ALiBi with softcap, splits."""
    torch.manual_seed(16 + page)
    inp = _inputs(2, 3, 8, 2, 128, torch.float16, 400, [300, 0], snew=3, page=page, rotary_dim=64)
    _run_compiled(inp, causal=True, num_splits=2)
    _run(inp, causal=True, alibi=torch.rand(2, 8) * 0.3, softcap=20.0)
    assert decode.LAST_PATH == "compiled"


@pytest.mark.parametrize("splits", [1, 3])
def test_regression_fp32_alibi_rows_before_keys(splits):
    """Regression (session 68): fp32 ALiBi on query rows before every key (8 queries over 1 and 3
    keys, slopes up to 80, so biases of hundreds of units). The kernel took the plain bias, and its
    lse, (M + log2 L) ln 2 rounded at that size twice, read 1.33x the bound over six draws. Rows are
    now measured from the anchor max(i + n - Sq, 0) (item()'s dg) and the merge adds slope * p back
    in natural units, once, as alibi_anchor.to_public: 0.48x."""
    slopes = 40.0 * torch.tensor([[1.0, 0.5, 0.25, 0.125], [0.75, 1.0, 0.3, 2.0]])
    for seed in range(6):
        torch.manual_seed(seed)
        inp = _inputs(2, 8, 4, 2, 32, torch.float32, 16, [1, 3])
        _run(inp, alibi=slopes, num_splits=splits)
        assert decode.LAST_PATH == "compiled"


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_windows_leftpad(dtype):
    inp = _inputs(3, 2, 8, 2, 64, dtype, 208, [180, 60, 9], leftpad=[17, 60, 0])
    _run_compiled(inp, causal=True, window_size=(50, 0), num_splits=3)
    _run_compiled(inp, window_size=(30, 20), num_splits=1)
    _run_compiled(inp, window_size=(0, 0))


@pytest.mark.parametrize("d", [32, 40, 80, 96, 128, 256])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_head_dims(d, dtype):
    inp = _inputs(2, 1, 8, 2, d, dtype, 100, [100, 37])
    _run_compiled(inp)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_partial_vector_head_dims(dtype):
    """Session 64: every multiple of 8 runs compiled. D = 8 / 40 / 56 / 112 / 200 (the run-time-D copy: a row's last
    float32 / fp16 vector of 8 columns, a bf16 row's last 32-column group of 8 / 24 / 16; 200: 13 vectors) and 80
    (its own copy: an odd vector count, bf16 half a group), the partial vectors read by masked loads. Windows, left
    padding, causal rows, pages, splits, softcap and ALiBi against the reference; caches whose rows sit in wider
    rows with NaN after each head's D columns give bitwise the contiguous caches' result (a read past a row would
    bring the NaN in)."""
    torch.manual_seed(64)
    for d in (8, 40, 56, 80, 112, 200):
        inp = _inputs(3, 2, 8, 2, d, dtype, 208, [180, 60, 9], leftpad=[17, 60, 0])
        _run_compiled(inp, causal=True, window_size=(50, 0), num_splits=3)
        _run_compiled(_inputs(2, 1, 32, 8, d, dtype, 1088, [1088, 37], page=16))
        _run(_inputs(2, 1, 12, 4, d, dtype, 100, [100, 1]), softcap=5.0, alibi=torch.rand(2, 12) * 0.2)
        assert decode.LAST_PATH == "compiled"
        _nothing_past_rows(d, dtype)


def _nothing_past_rows(d, dtype):
    """K / V caches whose head rows sit in wider rows with NaN after their d columns give bitwise the result of the
    same values contiguous: the kernel reads nothing past a row (a read there brings NaN in)."""
    wide = [torch.full((1, 100, 2, d + 16), float("nan"), dtype=dtype) for _ in range(2)]
    k, v = (w[..., :d].copy_(torch.randn(1, 100, 2, d)) for w in wide)
    q, lens = torch.randn(1, 1, 8, d, dtype=dtype), torch.tensor([100], dtype=torch.int32)
    with flashtriton.use_backend("cpu"):
        got = flash_attn_with_kvcache(q, k, v, cache_seqlens=lens)
        want = flash_attn_with_kvcache(q, k.contiguous(), v.contiguous(), cache_seqlens=lens)
    assert torch.equal(got, want), d


def test_many_rows_per_head():
    """MQA with 16 query heads and 4 speculative rows: 64 rows per KV head."""
    inp = _inputs(1, 4, 16, 1, 64, torch.bfloat16, 140, [130], snew=4)
    _run_compiled(inp, causal=True)


def test_bench_shape_long_cache():
    """The benchmark's heads (Hq = 32, Hk = 8, D = 128) over 5000 positions, default splits."""
    inp = _inputs(1, 1, 32, 8, 128, torch.bfloat16, 5000, [4999], snew=1)
    _run_compiled(inp)


def test_empty_cache():
    inp = _inputs(2, 1, 4, 1, 32, torch.float32, 64, [0, 0])
    out, lse, _, _ = _run_compiled(inp)
    assert torch.all(out == 0) and torch.all(torch.isinf(lse)) and torch.all(lse > 0)


def test_cache_garbage_is_never_read():
    """NaN beyond the sequences, in unused pages, and in a page's tail."""
    with flashtriton.use_backend("cpu"):
        out = flash_attn_with_kvcache(num_splits=2, **_copy(_garbage_cache_inputs()))
    assert decode.LAST_PATH == _expected_path(_garbage_cache_inputs()["k_cache"].dtype)
    assert torch.isfinite(out).all()


def test_batch_idx_and_strided_cache():
    """cache_batch_idx picks rows; a cache that is a strided view (its D columns a
    slice of wider rows) is read in place; both equal the plain call bitwise."""
    torch.manual_seed(0)
    q = torch.randn(2, 1, 8, 64, dtype=torch.bfloat16)
    wide_k, wide_v = (torch.randn(3, 90, 2, 96, dtype=torch.bfloat16) for _ in range(2))
    k, v = wide_k[..., 16:80], wide_v[..., 16:80]         # strided views, stride(-1) = 1
    lens = torch.tensor([90, 41], dtype=torch.int32)
    idx = torch.tensor([2, 0], dtype=torch.int32)
    with flashtriton.use_backend("cpu"):
        a = flash_attn_with_kvcache(q, k, v, cache_seqlens=lens, cache_batch_idx=idx)
        assert decode.LAST_PATH == _expected_path(torch.bfloat16)
        b = flash_attn_with_kvcache(q, k[idx.long()].contiguous(), v[idx.long()].contiguous(), cache_seqlens=lens)
    assert torch.equal(a, b)


def test_splits_agree_repeatable_threads():
    """1, 3, 8 splits and the heuristic agree to rounding; bitwise repeatable; one
    thread gives the same bits (the pieces do not depend on the thread count when
    num_splits is given)."""
    inp = _inputs(2, 1, 8, 2, 64, torch.float32, 704, [700, 333], page=16)
    outs = [_run_compiled(inp, num_splits=s)[:2] for s in (1, 3, 8, 0)]
    for o, l in outs[1:]:
        assert (o - outs[0][0]).abs().max().item() <= 1e-5
        assert (l - outs[0][1]).abs().max().item() <= 1e-5
    a, b, c = _twice_then_one_thread(inp)
    assert torch.equal(a, b) and torch.equal(a, c)


def test_path_selection(monkeypatch):
    """The kernel takes bf16 / fp16 / float32 caches (with softcap or ALiBi too, never on AMX then; fp16 where the
    build has _Float16: an FT_NO_F16 build sends it to the torch-ops paths); the rest (and
    FLASHTRITON_CPU_DECODE=ops) takes the torch-ops paths; a bad value raises."""
    inp = _inputs(1, 1, 4, 2, 64, torch.bfloat16, 50, [50])
    _run_compiled(inp)
    _run(inp, softcap=5.0)
    assert decode.LAST_PATH == "compiled"
    _run(inp, alibi=torch.rand(1, 4) * 0.2)
    assert decode.LAST_PATH == "compiled"
    fp16 = _inputs(1, 1, 4, 2, 64, torch.float16, 50, [50])
    _run_compiled(fp16)
    no_f16 = native.load_variant("FT_NO_F16", dims=())
    assert no_f16.ft_f16() == 0 and native.load().ft_f16() == 1
    _use_library(monkeypatch, no_f16)
    _run(fp16)
    assert decode.LAST_PATH == "ops"
    _run(_inputs(1, 17, 16, 1, 32, torch.float32, 64, [50]), causal=True)   # 272 rows a KV head: over MAX_ROWS
    assert decode.LAST_PATH == "ops"
    monkeypatch.setattr(config, "DECODE_PATH", "ops")
    _run(inp)
    assert decode.LAST_PATH == "ops"
    monkeypatch.setattr(config, "DECODE_PATH", "fast")
    with pytest.raises(ValueError, match="FLASHTRITON_CPU_DECODE"):
        _run(inp)


def test_copies_mask(monkeypatch):
    """Session 65: load_variant(dims=...) keeps only the named head dims' specialised copies (FT_COPIES, the variant
    tests' shorter builds); every other D runs the run-time-ND copy, whose values are bitwise the specialised
    copy's (the same products summed in the same order): a build with none (dims=()) gives the default build's
    out and lse bit for bit at D = 80 / 128, bf16 and float32. dims outside COPY_DIMS raise."""
    if _AMX_ON[0]:
        pytest.skip("AMX runs bf16 multiples of 32 (head_amx), not the copies")
    torch.manual_seed(65)
    lean = native.load_variant("FT_NO_F16", dims=())     # test_path_selection's build
    for d in (80, 128):
        for dtype in (torch.bfloat16, torch.float32):
            inp = _inputs(2, 1, 16, 4, d, dtype, 300, [300, 77])
            want = _out_lse(inp, native.load(), monkeypatch, num_splits=2)
            got = _out_lse(inp, lean, monkeypatch, num_splits=2)
            assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1]), (d, dtype)
    with pytest.raises(ValueError, match="dims"):
        native.load_variant("FT_NO_F16", dims=(40,))


FEATURES = {"alibi": (True, 0.0), "softcap": (False, 5.0), "both": (True, 30.0)}


@pytest.mark.parametrize("feature", list(FEATURES))
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("heads,d", [((4, 2), 64), ((8, 1), 128), ((6, 3), 96), ((2, 2), 256)])
def test_alibi_softcap(dtype, heads, d, feature):
    """ALiBi and softcap in the kernel (session 62; before, both took the torch-ops path): one (H,) vector,
    (B, H) slopes and a batch-strided view, lengths 0 .. 1023 with ragged blocks, causal speculative rows and
    non-causal ones (keys right of a row's diagonal: the distance's absolute value), windows, left padding, pages
    and splits, against the reference bound; never the AMX step."""
    torch.manual_seed(heads[0] * 1000 + d)
    h = heads[0]
    alibi, softcap = FEATURES[feature]
    lens = [1, 17, 113, 1023]
    slopes = (torch.rand(h) * 0.5, torch.rand(4, h) * 0.5, (torch.rand(4, 2 * h) * 0.5)[:, :h])
    for x, (sq, page, causal, window, pad) in enumerate(((1, 0, False, (-1, -1), None), (3, 16, True, (-1, -1), None),
                                                         (4, 0, False, (-1, -1), [0, 5, 50, 300]),
                                                         (2, 64, False, (40, 3), None))):
        inp = _inputs(4, sq, h, heads[1], d, dtype, 1408, [n + (pad[i] if pad else 0) for i, n in enumerate(lens)],
                      page=page, leftpad=pad)
        _run(inp, alibi=slopes[x % 3] if alibi else None, softcap=softcap, causal=causal, window_size=window,
             num_splits=(0, 3)[x % 2])
        assert decode.LAST_PATH == "compiled"


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_softcap_tanh_range(dtype):
    """The kernel's double-precision tanh over its whole range: tanh arguments below 1e-4 (its x branch), around
    the branch, in the bulk, saturated (|x| in the hundreds, t clamped at e^-40), on the reference bound."""
    torch.manual_seed(5)
    inp = _inputs(2, 1, 8, 2, 64, dtype, 600, [577, 64])
    for scale, softcap in ((1e-7, 1.0), (2e-5, 0.5), (0.125, 2.0), (0.125, 50.0), (40.0, 1.0)):
        _run(inp, softcap=softcap, softmax_scale=scale)
        assert decode.LAST_PATH == "compiled"


def test_alibi_softcap_append_and_memo():
    """ALiBi with appended tokens through a decode loop of one tensor signature (the held launch and its
    packed constants, kvcache.py's steps): each step against the reference, new slope values each step (the
    kernel reads them per call), a (B, H) tensor whose batch stride the launch packs."""
    torch.manual_seed(7)
    inp = _inputs(2, 1, 8, 2, 128, torch.bfloat16, 300, [40, 200], snew=1)
    slopes = torch.rand(2, 8) * 0.3
    for step in range(4):
        k_cache, v_cache = _run(inp, alibi=slopes, softcap=10.0)[2:]
        assert decode.LAST_PATH == "compiled"
        inp = dict(inp, k_cache=k_cache, v_cache=v_cache, cache_seqlens=inp["cache_seqlens"] + 1,
                   q=torch.randn_like(inp["q"]), k=torch.randn_like(inp["k"]), v=torch.randn_like(inp["v"]))
        slopes.uniform_(0.0, 0.3)


@pytest.mark.parametrize("define", ["FT_NO_BLK512", "FT_NO_DPBF16", "PF_SPLIT=0"])
def test_alibi_softcap_variants(monkeypatch, define):
    """ALiBi and softcap on the portable step (CPUs without AVX-512), the float32-FMA bf16 score path (no
    AVX512-BF16) and the one-pass bf16 block (PF_SPLIT = 0; the default's two-phase block applies them in its
    score phase)."""
    if define != "FT_NO_BLK512" and not native.load().ft_blk512():
        pytest.skip("built without AVX-512")
    # the same builds (dims included) as the tests below that take these defines
    dims = {"FT_NO_BLK512": (80, 128), "FT_NO_DPBF16": (80, 96, 128)}.get(define, (128,))
    _use_library(monkeypatch, native.load_variant(define, dims=dims))
    torch.manual_seed(11)
    for dtype in (torch.bfloat16, torch.float32):
        inp = _lengths_inputs(dtype, 4, 3, 16, leftpad=True, d=128)
        for slopes in (torch.rand(8) * 0.5, torch.rand(5, 8) * 0.5):
            _run_compiled(inp, alibi=slopes, causal=True, num_splits=2)
            _run_compiled(inp, alibi=slopes, window_size=(30, 2))
        _run_compiled(inp, softcap=5.0, causal=True, num_splits=2)
        _run_compiled(inp, alibi=torch.rand(8) * 0.5, softcap=2.0, window_size=(30, 2))


def test_build_failure_raises(monkeypatch, tmp_path):
    """No silent fallback: a compiler that fails names the cause."""
    monkeypatch.setattr(native._library, "lib", None)
    monkeypatch.setattr(native._library, "error", None)
    monkeypatch.setenv("FLASHTRITON_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("CC", "false")   # runs, exits 1
    inp = _inputs(1, 1, 4, 2, 64, torch.bfloat16, 50, [50])
    with pytest.raises(native.NativeUnavailable, match="compiling the decode kernel with false failed"):
        with flashtriton.use_backend("cpu"):
            flash_attn_with_kvcache(**_copy(inp))
    assert not os.listdir(tmp_path) or all(not f.endswith(".so") for f in os.listdir(tmp_path))


def test_fma_bf16_score_path(monkeypatch):
    """The bf16 score path of CPUs without AVX512-BF16 (float32 FMAs on even / odd
    halves of each 32 columns, q permuted to match), built separately here."""
    lib = native.load_variant("FT_NO_DPBF16", dims=(80, 96, 128))
    assert lib.ft_dpbf16() == 0
    _use_library(monkeypatch, lib)
    inp = _inputs(3, 2, 8, 2, 96, torch.bfloat16, 208, [200, 33, 0], page=16)
    _run_compiled(inp, causal=True, num_splits=3)
    _run_compiled(_inputs(2, 1, 12, 2, 128, torch.bfloat16, 100, [100, 61]))
    _run_compiled(_inputs(2, 1, 12, 2, 80, torch.bfloat16, 100, [100, 61]))     # a half last group


def _lengths_inputs(dtype, group, sq, page, leftpad=False, d=64):
    """Five sequences (2 KV heads, `group` query heads each) of 1, 17, 113, 1023 and 0
    keys; with Sq > 1 the Sq rows are appended first (so at least Sq keys), with Sq = 1
    nothing is appended (the empty cache stays empty); contiguous or paged; optionally
    left-padded."""
    lens = [1, 17, 113, 1023, 0]
    pad = [3, 0, 50, 1, 0] if leftpad else [0] * 5
    snew = sq if sq > 1 else 0
    before = [max(n - snew, 0) + p for n, p in zip(lens, pad)]
    return _inputs(5, sq, 2 * group, 2, d, dtype, 1088, before, snew=snew, page=page,
                   leftpad=pad if leftpad else None)


@pytest.mark.parametrize("group", [1, 2, 4, 8])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_blk512_step_groups_lengths(group, dtype):
    """The AVX-512 step (head_blk: bf16 scores and P @ V by vdpbf16ps, P rounded to
    bf16; float32 by FMA) against the float64 reference within the usual bound (2x
    the same-dtype PyTorch math's error): GQA groups 1 / 2 / 4 / 8, lengths 1, 17,
    113, 1023 and 0 (odd block tails: the unpaired last key of a vdpbf16ps pair),
    Sq = 1 and 3 causal rows, contiguous and paged caches."""
    if not native.load().ft_blk512():
        pytest.skip("built without AVX-512")
    torch.manual_seed(group)
    for sq, page in ((1, 0), (3, 16), (1, 64)):
        inp = _lengths_inputs(dtype, group, sq, page)
        _run_compiled(inp, causal=sq > 1)
        _run_compiled(inp, causal=sq > 1, num_splits=3)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_blk512_step_windows_leftpad(dtype):
    """Windows (rows that see no key of a block, blocks no row sees) and left padding
    through the AVX-512 step."""
    if not native.load().ft_blk512():
        pytest.skip("built without AVX-512")
    torch.manual_seed(1)
    inp = _lengths_inputs(dtype, 4, 2, 16, leftpad=True, d=128)
    _run_compiled(inp, causal=True, window_size=(40, 0), num_splits=2)
    _run_compiled(inp, window_size=(7, 5))
    _run_compiled(inp, window_size=(0, 0), num_splits=1)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_blk512_matches_portable_step(monkeypatch, dtype):
    """The AVX-512 step and the portable vector-extension one (FT_NO_BLK512, what CPUs
    without AVX-512 run) both meet the bound and agree closely (float32: to rounding;
    bf16: the same inputs, P rounded to bf16 only in the AVX-512 step); each is
    bitwise repeatable, also on one thread."""
    if not native.load().ft_blk512():
        pytest.skip("built without AVX-512")
    portable = native.load_variant("FT_NO_BLK512", dims=(80, 128))
    assert portable.ft_blk512() == 0
    torch.manual_seed(2)
    inp = _inputs(2, 1, 32, 8, 128, dtype, 2100, [2100, 999])
    # D = 80: a half last group / an odd vector count; 40: partial last vectors (session 64)
    part = [_inputs(2, 1, 8, 2, d, dtype, 300, [300, 77]) for d in (80, 40)]
    fast = [_run_compiled(x)[0] for x in (inp, *part)]
    a, b, c = _twice_then_one_thread(inp)
    assert torch.equal(a, b) and torch.equal(a, c)
    _use_library(monkeypatch, portable)
    slow = [_run_compiled(x)[0] for x in (inp, *part)]
    tol = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 2e-2}[dtype]   # fp16: an output rounding
    for f, s in zip(fast, slow):
        assert (f.double() - s.double()).abs().max().item() <= tol
    _nothing_past_rows(40, dtype)


@pytest.mark.parametrize("dtype,define", [(torch.bfloat16, "NSUB_BF16=1"), (torch.bfloat16, "NSUB_BF16=2"),
                                          (torch.float32, "NSUB_F32=4")])
def test_blk512_softmax_step_widths(monkeypatch, dtype, define):
    """head_blk's online-softmax step over NS score vectors of 16 keys (NSUB_BF16 = 4 and
    NSUB_F32 = 1 by default, the values the defaults do not run built here): lengths
    1, 17, 113, 1023 (partial sub-blocks), windows whose edges fall inside a block, left
    padding, causal Sq > 1, paged, split; against the reference bound."""
    if not native.load().ft_blk512():
        pytest.skip("built without AVX-512")
    _use_library(monkeypatch, native.load_variant(define, dims=(64, 128)))
    torch.manual_seed(3)
    for sq, page in ((1, 0), (3, 16)):
        inp = _lengths_inputs(dtype, 4, sq, page)
        _run_compiled(inp, causal=sq > 1, num_splits=3)
    inp = _lengths_inputs(dtype, 4, 2, 16, leftpad=True, d=128)
    _run_compiled(inp, causal=True, window_size=(40, 0), num_splits=2)
    _run_compiled(inp, window_size=(7, 5))


def test_regression_swapped_library_runs(monkeypatch):
    """Session 63: kvcache's step memo keeps each signature's CompiledLaunch, library included, so the variant
    tests that swapped native.load after a call of the same signature (in the test or an earlier one) ran the
    default build again: their bitwise comparisons compared it with itself. _use_library empties the memo; the
    swapped-in library is the one whose kernel runs, and the default one again after the swap back."""
    default, variant = native.load(), native.load_variant("FT_NO_INREG", dims=(64, 128))
    ran = []
    real = decode.CompiledLaunch.run
    monkeypatch.setattr(decode.CompiledLaunch, "run", lambda self, *a, **k: ran.append(self.lib) or real(self, *a, **k))
    inp = _inputs(2, 1, 8, 2, 64, torch.float32, 100, [100, 37])
    for lib in (default, variant, default):
        _use_library(monkeypatch, lib)
        _run_compiled(inp)
    assert [x is y for x, y in zip(ran, (default, variant, default))] == [True, True, True]


def _out_lse(inp, lib, monkeypatch, **kw):
    """out, lse of the compiled path on library `lib` (checked against the float64 bound by _run)."""
    _use_library(monkeypatch, lib)
    out, lse = _run_compiled(inp, **kw)[:2]
    return out, lse


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("page", [0, 1, 16])
def test_prefetch_next_block_matches_touch(monkeypatch, dtype, page):
    """Session 42: head_blk fetches the next block's K / V lines into L2 while it computes the current
    block (pf_step), and only an item's first block is touched (float32; bf16 since session 43 too, in two
    phases per block, PF_SPLIT). Prefetches change no value: the default build, the FT_NO_PF build (every
    block touched first, the earlier scheme), the FT_NO_INREG build (score loads folded into the FMAs as
    before) and, for bf16, PF_BF16=0 (touch every block), PF_SPLIT=0 (one-pass prefetch, as float32),
    PF_TOUCH=1 (prefetched and touched), SPLIT_TOUCH_K=1, PF_DIST_BF16=2 (prefetch two blocks ahead) give
    bitwise the same out and lse, each within the float64 bound. Many blocks
    per item with ragged tails (next blocks of 1 .. 63 keys, fewer positions than Hk = 8: some heads
    prefetch nothing), the bench's G = 4 and D = 128, contiguous and paged (page 1: every prefetched row
    on its own shuffled page), one and several splits, a window (blocks no row sees are skipped)."""
    if not native.load().ft_blk512():
        pytest.skip("built without AVX-512")
    default = native.load()
    # (dims: the builds keep the D = 128 copy only, session 65's CI trim; FT_NO_INREG's as the tests below)
    variants = [native.load_variant("FT_NO_PF", dims=(128,)), native.load_variant("FT_NO_INREG", dims=(64, 128))]
    if dtype == torch.bfloat16:
        variants += [native.load_variant(*d, dims=(128,)) for d in (("PF_BF16=0",), ("PF_SPLIT=0",), ("PF_TOUCH=1",),
                                                                    ("SPLIT_TOUCH_K=1",), ("PF_DIST_BF16=2",),
                                                                    ("PF_SPLIT=0", "PF_DIST_BF16=2"))]
    torch.manual_seed(42 + page)
    lens = [1000, 17, 65, 0, 129]
    inp = _inputs(len(lens), 1, 32, 8, 128, dtype, 1024, lens, page=page)
    for kw in ({}, {"num_splits": 1}, {"num_splits": 3}, {"window_size": (40, 0), "num_splits": 2}):
        want = _out_lse(inp, default, monkeypatch, **kw)
        for lib in variants:
            got = _out_lse(inp, lib, monkeypatch, **kw)
            assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1]), kw


def test_regression_score_loads_in_registers(monkeypatch):
    """Session 42 (a performance bug, not a wrong value): GCC folded the float32 score loop's K and q
    loads into every FMA (32 loads per 16 FMAs, the loop load-bound at half the FMA rate); INREG keeps
    them in registers. Its values: bitwise those of the build without it, on the bench's shape (Hq = 32,
    Hk = 8, D = 128) over 2100 / 999 keys, repeatable, also on one thread."""
    if not native.load().ft_blk512():
        pytest.skip("built without AVX-512")
    torch.manual_seed(7)
    inp = _inputs(2, 1, 32, 8, 128, torch.float32, 2100, [2100, 999])
    want = _out_lse(inp, native.load(), monkeypatch)
    a, b, c = _twice_then_one_thread(inp)
    assert torch.equal(a, b) and torch.equal(a, c)
    got = _out_lse(inp, native.load_variant("FT_NO_INREG", dims=(64, 128)), monkeypatch)
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])


@pytest.mark.parametrize("d", [64, 80, 128, 256])
def test_bf16_scores_q_in_registers(monkeypatch, d):
    """Session 54: with vdpbf16ps and D <= 128 the score loop holds a row group's q in registers for the
    whole block (QREG) and takes 2 keys a step, adding reduce16's first level in registers (KQ = 2);
    GCC had folded a q load into every product. The same products summed in the same order: bitwise the
    out and lse of the QREG=0 build (q loaded per product, 4 keys a step) and of KQ=1 (no in-register
    first level), on D = 64 / 80 / 128 (the new loop; 80: a half last group) and 256 (the old one), G = 4 and
    G = 8 (two row
    groups), two query rows (Sq = 2: causal rows), ragged lengths (partial 16-key groups, a block with
    no live key in a step), several splits and a window."""
    if not (native.load().ft_blk512() and native.load().ft_dpbf16()):
        pytest.skip("built without AVX-512 BF16")
    if _AMX_ON[0]:
        pytest.skip("the AVX-512 step's score loop (AMX runs head_amx)")
    torch.manual_seed(d)
    variants = [native.load_variant(x, dims=(64, 80, 128, 256)) for x in ("QREG=0", "KQ=1")]
    lens = [300, 17, 64, 0, 129]
    for sq, hq in ((1, 16), (1, 32), (2, 16)):
        inp = _inputs(len(lens), sq, hq, 4, d, torch.bfloat16, 320, lens)
        for kw in ({}, {"num_splits": 3}, {"causal": True, "window_size": (40, 0), "num_splits": 2}):
            want = _out_lse(inp, native.load(), monkeypatch, **kw)
            for lib in variants:
                got = _out_lse(inp, lib, monkeypatch, **kw)
                assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1]), (sq, hq, kw)


# --- the AMX step (bf16 caches, head_amx): selection, shapes, repeatability -------------------------------

def _need_amx():
    if not _AMX_ON[0]:
        pytest.skip("an AMX test: runs under the amx parametrisation only")


def test_amx_selected_by_default(monkeypatch):
    """DECODE_AMX = "auto" (the default) runs bf16 caches on the AMX build wherever it
    loads, float32 on the AVX-512 kernel; "off" runs bf16 on the AVX-512 kernel; a bad
    value raises."""
    _need_amx()
    monkeypatch.setattr(config, "DECODE_AMX", "auto")
    _run(_inputs(1, 1, 8, 2, 64, torch.bfloat16, 50, [50]))
    assert decode.LAST_PATH == "compiled-amx"
    _run(_inputs(1, 1, 8, 2, 64, torch.float32, 50, [50]))
    assert decode.LAST_PATH == "compiled"
    monkeypatch.setattr(config, "DECODE_AMX", "off")
    _run(_inputs(1, 1, 8, 2, 64, torch.bfloat16, 50, [50]))
    assert decode.LAST_PATH == "compiled"
    monkeypatch.setattr(config, "DECODE_AMX", "maybe")
    with pytest.raises(ValueError, match="FLASHTRITON_CPU_DECODE_AMX"):
        _run(_inputs(1, 1, 8, 2, 64, torch.bfloat16, 50, [50]))


@pytest.mark.parametrize("d", [32, 64, 96, 128, 192, 256])
@pytest.mark.parametrize("group", [1, 4, 8])
def test_amx_head_dims_groups_lengths(d, group):
    """Every head dim the kernel takes (1-8 tiles of 32 columns), GQA 1 / 4 / 8, lengths
    1, 17, 113, 1023 and 0 (short last 16-key groups staged with zero rows), contiguous
    and paged (page 16: groups read in place; page 64 with left padding: groups that
    cross a page are staged), against the float64 reference."""
    _need_amx()
    torch.manual_seed(d + group)
    for sq, page, pad in ((1, 0, False), (1, 16, False), (3, 64, True)):
        inp = _lengths_inputs(torch.bfloat16, group, sq, page, leftpad=pad, d=d)
        _run_compiled(inp, causal=sq > 1)
        _run_compiled(inp, causal=sq > 1, num_splits=3)


@pytest.mark.parametrize("d", [64, 128, 256])
def test_amx_8k(d):
    """L = 8k (the benchmark's length), Hq = 32 / Hk = 8 at D = 128, the default splits;
    D = 64 and 256 with MQA and 4-row groups."""
    _need_amx()
    torch.manual_seed(d)
    heads = (32, 8) if d == 128 else (4, 1)
    _run_compiled(_inputs(1, 1, *heads, d, torch.bfloat16, 8192, [8192]))


def test_amx_garbage_never_read():
    """NaN in unused pages and in the tail of a sequence's last page (bf16): tiles read 16
    rows, so a short group must be staged, never loaded in place past the sequence."""
    _need_amx()
    inp = _garbage_cache_inputs()
    for name in ("q", "k_cache", "v_cache"):
        inp[name] = inp[name].to(torch.bfloat16)
    with flashtriton.use_backend("cpu"):
        out = flash_attn_with_kvcache(num_splits=2, **_copy(inp))
    assert decode.LAST_PATH == "compiled-amx" and torch.isfinite(out).all()


def test_amx_repeatable_and_matches_avx512(monkeypatch):
    """Bitwise repeatable, and the same bits on one thread (fixed splits); close to the
    AVX-512 kernel (the same inputs and P rounding, another float32 summation order)."""
    _need_amx()
    torch.manual_seed(5)
    inp = _inputs(2, 1, 32, 8, 128, torch.bfloat16, 3072, [3000, 1234], page=64, leftpad=[5, 0])
    a, b, c = _twice_then_one_thread(inp)
    assert decode.LAST_PATH == "compiled-amx"
    assert torch.equal(a, b) and torch.equal(a, c)
    monkeypatch.setattr(config, "DECODE_AMX", "off")
    x = _run(inp, num_splits=4)[0]
    assert decode.LAST_PATH == "compiled"
    assert (a.double() - x.double()).abs().max().item() <= 2e-2


@pytest.mark.parametrize("define", ["NSUB_AMX=1", "NSUB_AMX=4"])
def test_amx_block_widths(monkeypatch, define):
    """head_amx with blocks of 16 / 64 keys (the default is NSUB_AMX = 8: 128 keys), built
    here: lengths 1, 17, 113, 1023, windows inside a block, left padding, paged."""
    _need_amx()
    lib = native.load_variant("FT_AMX", define, dims=(64, 128))
    _use_library(monkeypatch, lib, "load_amx")
    torch.manual_seed(7)
    for sq, page in ((1, 0), (3, 16)):
        _run_compiled(_lengths_inputs(torch.bfloat16, 4, sq, page), causal=sq > 1, num_splits=3)
    inp = _lengths_inputs(torch.bfloat16, 4, 2, 16, leftpad=True, d=128)
    _run_compiled(inp, causal=True, window_size=(40, 0), num_splits=2)
    _run_compiled(inp, window_size=(7, 5))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_no_lse_writes_scratch(dtype):
    """need_lse=False (return_softmax_lse=False, session 46): the compiled path writes the lse into this thread's
    scratch and the backend returns None for it; out is bitwise the need_lse=True call's, an lse returned
    earlier is not touched by a later call without one, and the scratch grows for a larger call."""
    inp = _inputs(2, 1, 8, 2, 64, dtype, 300, [300, 123])
    out_lse, lse, _, _ = _run_compiled(inp)
    kept = lse.clone()
    args = _copy(inp)
    from flashtriton.launchers.prefill import AttnParams
    params = AttnParams(1 / 8, -1, -1, 0.0, 0.0)
    with flashtriton.use_backend("cpu"):
        out = flash_attn_with_kvcache(**args)
        assert torch.equal(out, out_lse) and torch.equal(lse, kept)
        got = decode.kvcache_fwd(args["q"], args["k_cache"], args["v_cache"], None, None, None, None,
                                 args["cache_seqlens"], None, None, None, params, True, None, 0, need_lse=False)
    assert got[1] is None and torch.equal(got[0], out_lse)
    big = _inputs(3, 2, 16, 2, 64, dtype, 64, [64, 5, 30])            # 96 lse rows > the 16 above
    _run_compiled(big)
    with flashtriton.use_backend("cpu"):
        assert torch.equal(flash_attn_with_kvcache(**_copy(big)), _run_compiled(big)[0])
    assert decode._local.lse[1] >= 3 * 16 * 2           # (tensor, numel, address): grown to the larger call
