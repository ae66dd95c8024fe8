"""flash_attn_with_kvcache against the reference (flashtriton.reference_decode).

Every kernel backend runs the same cases: the Triton kernels (on the GPU, or under
the interpreter on CPU tensors) and the CPU backend when it is present. Outputs and
lse are held to the project's criterion (helpers.assert_close: at most 2x the error
of plain PyTorch in the input dtype, against a float64 truth); the caches after an
append are compared entry by entry: untouched entries bitwise, written ones to the
reference within one unit in the last place (the rotation may round differently).
"""
import math

import pytest
import torch

import flashtriton
from flashtriton import backends, flash_attn_with_kvcache, kvcache, reference_decode
from flashtriton.launchers import decode as decode_launcher
from flashtriton.launchers import common as launcher_common
from flashtriton.launchers import plans as launcher_plans
from flashtriton.launchers.prefill import AttnParams

from conftest import DEVICE, kernel_backends
from helpers import assert_close

BACKENDS = kernel_backends()


def _need(backend):
    if not hasattr(backends.get(backend), "kvcache_fwd"):
        pytest.skip(f"the {backend} backend has no kvcache_fwd yet")


# ---------------------------------------------------------------------------------------
# inputs

def rotary_tables(seqlen, rotary_dim, dtype, device):
    inv_freq = 1.0 / (10000 ** (torch.arange(0, rotary_dim, 2, dtype=torch.float64) / rotary_dim))
    angles = torch.arange(seqlen, dtype=torch.float64)[:, None] * inv_freq[None, :]
    return angles.cos().to(dtype).to(device), angles.sin().to(dtype).to(device)


def make_inputs(batch, seqlen_q, nheads, nheads_k, d, dtype, capacity, lens, *, snew=0, page_size=0,
                batch_cache=None, rotary_dim=0, rotary_dtype=None, leftpad=None):
    """A decode step's tensors. lens (B,) tokens already cached; a paged cache gets a
    shuffled pool with spare blocks, and -1 in the table entries a sequence does not use
    (the kernels must never follow them)."""
    q = torch.randn(batch, seqlen_q, nheads, d, dtype=dtype, device=DEVICE)
    inp = dict(q=q, cache_seqlens=torch.tensor(lens, dtype=torch.int32, device=DEVICE))
    if page_size:
        max_blocks = capacity // page_size
        num_blocks = batch * max_blocks + 3
        perm = torch.randperm(num_blocks)[:batch * max_blocks].view(batch, max_blocks).to(torch.int32)
        for b in range(batch):
            used = math.ceil((lens[b] + snew) / page_size)
            perm[b, used:] = -1
        inp["block_table"] = perm.to(DEVICE)
        shape = (num_blocks, page_size, nheads_k, d)
    else:
        shape = (batch_cache or batch, capacity, nheads_k, d)
        if batch_cache is not None:
            idx = torch.randperm(batch_cache)[:batch].to(torch.int32)
            inp["cache_batch_idx"] = idx.to(DEVICE)
    inp["k_cache"] = torch.randn(shape, dtype=dtype, device=DEVICE)
    inp["v_cache"] = torch.randn(shape, dtype=dtype, device=DEVICE)
    if snew:
        inp["k"] = torch.randn(batch, snew, nheads_k, d, dtype=dtype, device=DEVICE)
        inp["v"] = torch.randn(batch, snew, nheads_k, d, dtype=dtype, device=DEVICE)
    if rotary_dim:
        inp["rotary_cos"], inp["rotary_sin"] = rotary_tables(capacity + seqlen_q, rotary_dim,
                                                             rotary_dtype or dtype, DEVICE)
    if leftpad is not None:
        inp["cache_leftpad"] = torch.tensor(leftpad, dtype=torch.int32, device=DEVICE)
    return inp


def _capacity(inp):
    if inp.get("block_table") is not None:
        return inp["block_table"].shape[1] * inp["k_cache"].shape[1]
    return inp["k_cache"].shape[1]


def params_for(inp, causal=False, window_size=(-1, -1), softcap=0.0, softmax_scale=None):
    """The API's canonical parameters (causal is right = 0; a window as long as the cache is none)."""
    left, right = window_size
    if causal:
        right = 0
    cap = _capacity(inp)
    left = -1 if left >= cap else left
    right = -1 if right >= cap else right
    scale = softmax_scale or 1 / math.sqrt(inp["q"].shape[-1])
    return AttnParams(scale, left, right, softcap, 0.0)


def written_mask(inp):
    """(dim0, dim1) bool of the cache rows an append writes."""
    kc = inp["k_cache"]
    mask = torch.zeros(kc.shape[:2], dtype=torch.bool, device=kc.device)
    if inp.get("k") is None:
        return mask
    paged = inp.get("block_table") is not None
    snew = inp["k"].shape[1]
    for b, end in enumerate(inp["cache_seqlens"].tolist()):
        pos = torch.arange(end, end + snew, device=kc.device)
        mask[reference_decode.cache_index(b, pos, inp.get("cache_batch_idx"), inp.get("block_table"),
                                          kc.shape[1] if paged else 0)] = True
    return mask


def _clone_strided(t):
    """A copy of t with t's strides (clone() makes a non-dense view, e.g. every other row or
    one half of a combined K/V pool, contiguous: the kernels would never see its strides)."""
    if any(st == 0 and n > 1 for n, st in zip(t.shape, t.stride())):
        return t.clone()                     # (overlapping: no strided copy can hold it)
    return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=t.device).copy_(t)


def _clone_caches(inp):
    out = dict(inp)
    out["k_cache"] = _clone_strided(inp["k_cache"])
    out["v_cache"] = _clone_strided(inp["v_cache"])
    return out


def _ref(inp, params, interleaved, alibi, compute_dtype):
    r = _clone_caches(inp)
    out, lse = reference_decode.kvcache_fwd(
        r["q"], r["k_cache"], r["v_cache"], r.get("k"), r.get("v"), r.get("rotary_cos"), r.get("rotary_sin"),
        r["cache_seqlens"], r.get("cache_batch_idx"), r.get("cache_leftpad"), r.get("block_table"), params,
        interleaved, alibi, 0, compute_dtype=compute_dtype)
    return out, lse, r["k_cache"], r["v_cache"]


def assert_cache(name, ours, ref, original, written):
    w = written.view(written.shape + (1, 1)).expand_as(ours)
    same_bits = torch.equal(ours[~w].view(torch.uint8), original[~w].view(torch.uint8))  # NaN == NaN here
    assert same_bits, f"{name}: entries outside the appended rows changed"
    a, b = ours[w].double(), ref[w].double()
    tol = torch.finfo(ours.dtype).eps * b.abs() + 1e-6
    bad = (a - b).abs() > tol
    assert not bad.any(), f"{name}: {int(bad.sum())} appended entries differ from the reference by > 1 ulp " \
                          f"(max {(a - b).abs().max().item():.3e})"


def run_case(backend, inp, *, causal=False, window_size=(-1, -1), softcap=0.0, alibi_slopes=None, num_splits=0,
             rotary_interleaved=True, softmax_scale=None, check_cache=True):
    """Runs the kernel on copies of the caches, checks out / lse / caches against the
    reference, and returns (out, lse, k_cache, v_cache) of the kernel."""
    _need(backend)
    params = params_for(inp, causal, window_size, softcap, softmax_scale)
    ours = _clone_caches(inp)
    call = {k: v for k, v in ours.items() if k != "q"}
    with flashtriton.use_backend(backend):
        out, lse = flash_attn_with_kvcache(ours["q"], softmax_scale=softmax_scale, causal=causal,
                                           window_size=window_size, softcap=softcap, alibi_slopes=alibi_slopes,
                                           rotary_interleaved=rotary_interleaved, num_splits=num_splits,
                                           return_softmax_lse=True, **call)
    truth = _ref(inp, params, rotary_interleaved, alibi_slopes, torch.float64)
    lowp = _ref(inp, params, rotary_interleaved, alibi_slopes, inp["q"].dtype)
    q = inp["q"]
    b, sq, h, _ = q.shape
    assert out.shape == q.shape and out.dtype == q.dtype
    assert lse.shape == (b, h, sq) and lse.dtype == torch.float32
    assert_close("out", out, truth[0], lowp[0], 2, q.dtype)
    assert_close("lse", lse, truth[1], lowp[1], 2, q.dtype)
    if check_cache:
        written = written_mask(inp)
        assert_cache("k_cache", ours["k_cache"], truth[2], inp["k_cache"], written)
        assert_cache("v_cache", ours["v_cache"], truth[3], inp["v_cache"], written)
    return out, lse, ours["k_cache"], ours["v_cache"]


# ---------------------------------------------------------------------------------------
# correctness

HEADS = [(4, 4), (4, 2), (6, 2), (4, 1)]   # MHA, GQA, GQA with a group of 3, MQA


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("splits", [1, 3, 8])
@pytest.mark.parametrize("heads", HEADS)
def test_random_lengths(backend, splits, heads):
    """Per-sequence lengths, 0 included, over a contiguous cache, split 1, 3 and 8 ways."""
    dtype = torch.bfloat16 if heads[1] % 2 == 0 else torch.float16
    inp = make_inputs(4, 1, *heads, 32, dtype, 100, [0, 1, 57, 100])
    run_case(backend, inp, num_splits=splits)


@pytest.mark.parametrize("backend", BACKENDS)
def test_splits_agree(backend):
    """Split counts 1, 3, 8 and the heuristic (0) give the same result within tolerance."""
    inp = make_inputs(2, 2, 8, 2, 64, torch.bfloat16, 160, [160, 77])
    outs = [run_case(backend, inp, num_splits=s, causal=True)[:2] for s in (1, 3, 8, 0)]
    for out, lse in outs[1:]:
        assert (out.float() - outs[0][0].float()).abs().max().item() < 2e-2
        assert (lse - outs[0][1]).abs().max().item() < 1e-4


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("page_size", [1, 4, 16, 64])
def test_paged_shuffled_pool(backend, page_size):
    """Pages anywhere in the pool, in any order; small pages are gathered row by row,
    large ones looked up once per tile (the interpreter's tile is 16 keys)."""
    capacity = 128
    inp = make_inputs(3, 1, 4, 2, 32, torch.float16, capacity, [5, 128, 70], page_size=page_size)
    run_case(backend, inp, num_splits=3)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("layout", ["contiguous", "batch_idx", "paged4", "paged32"])
@pytest.mark.parametrize("snew", [1, 21])
def test_append_then_attend(backend, layout, snew):
    """k and v are written in place at cache_seqlens, then attended; the caches are
    checked after the call."""
    kw = dict(contiguous={}, batch_idx=dict(batch_cache=5), paged4=dict(page_size=4),
              paged32=dict(page_size=32))[layout]
    inp = make_inputs(3, 1, 4, 2, 32, torch.bfloat16, 96, [0, 40, 96 - snew], snew=snew, **kw)
    run_case(backend, inp, num_splits=2 if snew == 1 else 3)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("interleaved", [True, False])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("rotary_dim", [32, 16])
def test_rotary(backend, interleaved, causal, rotary_dim):
    """Both rotary styles, on all features or the first half; q rotated per row when
    causal, at the cache length otherwise."""
    inp = make_inputs(2, 3, 4, 2, 32, torch.float16, 64, [10, 50], snew=3, rotary_dim=rotary_dim,
                      rotary_dtype=torch.float32 if rotary_dim == 16 else None, page_size=8 if causal else 0)
    run_case(backend, inp, causal=causal, rotary_interleaved=interleaved, num_splits=2)


@pytest.mark.parametrize("backend", BACKENDS)
def test_rotary_with_zero_new_tokens(backend):
    """k and v of length 0 with rotary: nothing is appended, q still rotates."""
    inp = make_inputs(2, 2, 4, 2, 32, torch.float16, 48, [30, 47], rotary_dim=32)
    inp["k"] = torch.empty(2, 0, 2, 32, dtype=torch.float16, device=DEVICE)
    inp["v"] = torch.empty(2, 0, 2, 32, dtype=torch.float16, device=DEVICE)
    run_case(backend, inp, causal=True, num_splits=2)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("sq,heads", [(4, (8, 2)), (16, (4, 1)), (16, (16, 2)), (32, (8, 2))])
def test_speculative_causal(backend, sq, heads):
    """Sq > 1 with a causal mask aligned bottom-right to the cache length. 16 queries x a
    group of 8 are 128 rows: two m-blocks, each reading the chunk, m-block 0 appending.
    With 32 queries and new tokens, m-block 0's rows do not see the last 16 new tokens,
    which it must still write."""
    inp = make_inputs(2, sq, *heads, 32, torch.bfloat16, 80, [80 - sq, 9], snew=sq, rotary_dim=32)
    run_case(backend, inp, causal=True, num_splits=3)


@pytest.mark.parametrize("backend", BACKENDS)
def test_more_queries_than_keys(backend):
    """Causal with Sq > n: the first rows see no key (out 0, lse +inf)."""
    inp = make_inputs(1, 6, 2, 1, 32, torch.float16, 16, [2])
    out, lse, _, _ = run_case(backend, inp, causal=True, num_splits=2)
    assert torch.all(out[:, :4] == 0)
    assert torch.all(torch.isinf(lse[:, :, :4]) & (lse[:, :, :4] > 0))


@pytest.mark.parametrize("backend", BACKENDS)
def test_empty_cache(backend):
    """A sequence with nothing cached and nothing appended outputs 0 with lse = +inf."""
    inp = make_inputs(2, 1, 4, 2, 32, torch.float16, 32, [0, 0])
    out, lse, _, _ = run_case(backend, inp, num_splits=3)
    assert torch.all(out == 0) and torch.all(torch.isinf(lse))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", ["window", "softcap", "alibi", "alibi_batch", "all"])
def test_options(backend, case):
    """Sliding window, softcap and ALiBi on the decode path (Sq = 4, appended keys)."""
    b, h = 2, 4
    kw = {}
    if case in ("window", "all"):
        kw["window_size"] = (9, 0)
    if case in ("softcap", "all"):
        kw["softcap"] = 5.0
    if case in ("alibi", "all"):
        kw["alibi_slopes"] = torch.rand(h, dtype=torch.float32, device=DEVICE) * 0.5
    if case == "alibi_batch":
        kw["alibi_slopes"] = torch.rand(b, h, dtype=torch.float32, device=DEVICE) * 0.5
    inp = make_inputs(b, 4, h, 2, 32, torch.bfloat16, 80, [33, 74], snew=2, page_size=16 if case == "all" else 0)
    run_case(backend, inp, num_splits=3, **kw)


@pytest.mark.parametrize("splits", [2, 4])
@pytest.mark.parametrize("case", ["plain", "window", "leftpad", "paged"])
def test_append_split_takes_the_ragged_tile(splits, case):
    """Regression (2026-11-29): with the append on a split of its own, that split also
    attends the ragged last tile of the cache (the interpreter's tile is 16 keys).
    Lengths on, just past and just before a tile edge, one shorter than a tile, and 0."""
    lens = [32, 33, 47, 5, 0]
    kw = dict(window=dict(window_size=(20, 0)), leftpad={}, paged={}, plain={})[case]
    inp = make_inputs(5, 1, 4, 2, 32, torch.bfloat16, 64, lens, snew=1, rotary_dim=32,
                      leftpad=[3, 0, 17, 5, 0] if case == "leftpad" else None,
                      page_size=32 if case == "paged" else 0)
    assert decode_launcher.append_split(5 * 2, splits, launcher_common.DEFAULT_SMS)
    run_case("triton", inp, causal=True, num_splits=splits, **kw)


@pytest.mark.parametrize("backend", BACKENDS)
def test_window_wider_than_queries_append(backend):
    """Appending more tokens than the window shows: the hidden new tokens still land in
    the cache."""
    inp = make_inputs(2, 1, 4, 2, 32, torch.float16, 64, [20, 3], snew=12)
    run_case(backend, inp, window_size=(2, 0), num_splits=2)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("paged", [False, True])
def test_leftpad(backend, paged):
    """cache_leftpad: positions before it are ignored; rotary positions stay absolute."""
    inp = make_inputs(3, 2, 4, 2, 32, torch.float16, 64, [30, 50, 7], snew=2, leftpad=[5, 0, 7],
                      page_size=8 if paged else 0, rotary_dim=32)
    run_case(backend, inp, causal=True, num_splits=3)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("paged", [False, True])
def test_regression_strided_index_tensors(backend, paged):
    """Session 26: cache_seqlens / cache_leftpad / cache_batch_idx with a stride other than
    1 and a block_table with a column stride of 2 were read by the kernels as if packed (a
    silent wrong answer). They are strided views here, of the same values."""
    inp = make_inputs(3, 2, 4, 2, 32, torch.float16, 64, [30, 50, 7], snew=2, leftpad=[5, 0, 7],
                      page_size=8 if paged else 0, batch_cache=None if paged else 5, rotary_dim=32)

    def strided(t, dim):
        return torch.stack([t, torch.full_like(t, 10 ** 6)], dim + 1).select(dim + 1, 0)

    for name in ("cache_seqlens", "cache_leftpad", "cache_batch_idx"):
        if inp.get(name) is not None:
            inp[name] = strided(inp[name], 0)
            assert inp[name].stride(0) == 2
    if paged:
        inp["block_table"] = strided(inp["block_table"], 1)
        assert inp["block_table"].stride(1) == 2
    run_case(backend, inp, causal=True, num_splits=3)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("d", [40, 64, 128])
def test_head_dims(backend, d):
    inp = make_inputs(2, 1, 4, 2, d, torch.float16, 48, [47, 20], snew=1, rotary_dim=d - 8 if d == 40 else d)
    run_case(backend, inp, num_splits=2)


@pytest.mark.parametrize("backend", BACKENDS)
def test_float32(backend):
    inp = make_inputs(2, 2, 4, 2, 32, torch.float32, 48, [46, 20], snew=2, rotary_dim=32)
    run_case(backend, inp, causal=True, num_splits=3)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("d", [128, 192])
@pytest.mark.parametrize("scale", [-0.2, 0.2])
def test_float32_one_query_sharp_scale(backend, d, scale):
    """fp32 decode steps (one query row, GQA) at sharp softmax scales: session 55's one-query gap of the prefill
    kernels (tests/test_fp32.py::test_fp32_one_query_sharp_scale), here for flash_attn_with_kvcache, whose
    reference computes each head's one-row product as PyTorch does (cuBLAS on a GPU); kernels/decode.py takes the
    same 16-column score slices (kernels/common.qk_dot, launchers/common.qk_levels)."""
    for seed in range(4):
        torch.manual_seed(seed)
        inp = make_inputs(2, 1, 8, 2, d, torch.float32, 128, [113, 77])
        run_case(backend, inp, softmax_scale=scale)


@pytest.mark.parametrize("backend", BACKENDS)
def test_int_and_none_seqlens(backend):
    """cache_seqlens as an int, and None (the whole capacity)."""
    _need(backend)
    inp = make_inputs(2, 1, 4, 2, 32, torch.float16, 40, [40, 40])
    with flashtriton.use_backend(backend):
        a = flash_attn_with_kvcache(inp["q"], inp["k_cache"], inp["v_cache"], cache_seqlens=40)
        b = flash_attn_with_kvcache(inp["q"], inp["k_cache"], inp["v_cache"])
        c = flash_attn_with_kvcache(inp["q"], inp["k_cache"], inp["v_cache"], cache_seqlens=inp["cache_seqlens"])
    assert torch.equal(a, c) and torch.equal(b, c)
    run_case(backend, inp)


@pytest.mark.parametrize("combine", ["auto", "fused", "kernel"])
@pytest.mark.parametrize("append", ["fused", "separate"])
@pytest.mark.parametrize("kv_load,block_m", [("tma", 0), ("pointer", 0), ("tma", 64)])
def test_triton_variants_agree(combine, append, kv_load, block_m):
    """The switchable launch variants (fused or separate combine and append, TMA or
    pointer loads, padded row blocks) compute the same thing; each is checked against
    the reference."""
    inp = make_inputs(3, 2, 8, 2, 32, torch.bfloat16, 64, [0, 31, 60], snew=4, page_size=16, rotary_dim=32)
    with decode_launcher.options(combine=combine, append=append, kv_load=kv_load, block_m=block_m):
        run_case("triton", inp, causal=True, num_splits=3)


@pytest.mark.parametrize("kv_load", ["tma", "pointer"])
@pytest.mark.parametrize("layout,d", [("contiguous", 32), ("contiguous", 40), ("paged32", 40), ("paged4", 32),
                                      ("strided", 32)])
def test_garbage_beyond_sequences(kv_load, layout, d):
    """NaN in every cache row outside the sequences never reaches the output: masked
    tiles zero what they read past the end (TMA reads whole boxes). D = 40 < BLOCK_D = 64:
    TMA boxes also cover the next head's columns, which must not matter. A strided
    (non-contiguous) cache takes the pointer path."""
    page = {"paged32": 32, "paged4": 4}.get(layout, 0)
    inp = make_inputs(3, 1, 4, 2, d, torch.float16, 64, [9, 64, 33], page_size=page, leftpad=[3, 0, 1])
    if layout == "strided":  # every other row of a cache twice as long
        for name in ("k_cache", "v_cache"):
            big = torch.randn(3, 128, 2, d, dtype=torch.float16, device=DEVICE)
            inp[name] = big[:, ::2]
    written = torch.zeros(inp["k_cache"].shape[:2], dtype=torch.bool, device=DEVICE)
    for b, (lo, hi) in enumerate(zip(inp["cache_leftpad"].tolist(), inp["cache_seqlens"].tolist())):
        pos = torch.arange(lo, hi, device=DEVICE)
        written[reference_decode.cache_index(b, pos, None, inp.get("block_table"), page)] = True
    for name in ("k_cache", "v_cache"):
        inp[name][~written] = float("nan")
    with decode_launcher.options(kv_load=kv_load):
        run_case("triton", inp, num_splits=2)


@pytest.mark.parametrize("gather,offsets", [("pages", "int32"), ("pages", "int64"), ("rows", "int64")])
@pytest.mark.parametrize("layout,d", [("paged1", 32), ("paged4", 32), ("paged8", 40)])
def test_page_gather(monkeypatch, gather, offsets, layout, d):
    """Both gathers of small pages, gather="pages" (page by page, the default) at each
    offset width and "rows" (row by row): NaN beyond the sequences, left padding, appended
    tokens and a causal mask."""
    if offsets == "int64":
        monkeypatch.setattr(decode_launcher, "GATHER_INT32_LIMIT", 0)
    page = int(layout[len("paged"):])
    inp = make_inputs(3, 2, 4, 2, d, torch.float16, 64, [9, 60, 33], snew=2, page_size=page, leftpad=[3, 0, 1])
    written = torch.zeros(inp["k_cache"].shape[:2], dtype=torch.bool, device=DEVICE)
    for b, (lo, hi) in enumerate(zip(inp["cache_leftpad"].tolist(), inp["cache_seqlens"].tolist())):
        pos = torch.arange(lo, hi + 2, device=DEVICE)
        written[reference_decode.cache_index(b, pos, None, inp.get("block_table"), page)] = True
    for name in ("k_cache", "v_cache"):
        inp[name][~written] = float("nan")
    launched = _page_gather_launches(monkeypatch)
    with decode_launcher.options(gather=gather):
        run_case("triton", inp, causal=True, num_splits=2)
    want = 0 if gather == "rows" else 2 if offsets == "int32" else 1
    assert launched and set(launched) == {want}, launched              # the variant under test ran


def _page_gather_launches(monkeypatch):
    """The PAGE_GATHER of every decode_split_kernel launch from now on (a list)."""
    from flashtriton.kernels.decode import decode_split_kernel
    seen, real = [], launcher_plans.launch

    def record(kernel, grid, *args, **kwargs):
        if kernel is decode_split_kernel:
            seen.append(kwargs.get("PAGE_GATHER"))
        return real(kernel, grid, *args, **kwargs)
    monkeypatch.setattr(launcher_plans, "launch", record)
    return seen


@pytest.mark.parametrize("view,want", [("kv_pool", 2), ("padded_rows", 0), ("wide_pages", 2)])
def test_page_gather_cache_views(monkeypatch, view, want):
    """(review, session 28) The page gather (the default) on caches that are views: K and V
    halves of one pool (k_cache.stride() != v_cache.stride() pattern of a contiguous cache,
    and different bases), rows padded to a stride the alignment hint cannot promise (34
    elements a head: the row gather instead), and pages spaced wider than their rows. The
    kernel reads them with their own strides (run_case keeps them) and the launch took the
    expected variant."""
    page, d, hk = 4, 32, 2
    inp = make_inputs(3, 1, 4, hk, d, torch.float16, 64, [9, 60, 33], snew=1, page_size=page, leftpad=[3, 0, 1])
    nb = inp["k_cache"].shape[0]
    if view == "kv_pool":                    # (blocks, page, 2, Hk, D): k = [:, :, 0], v = [:, :, 1]
        pool = torch.stack((inp["k_cache"], inp["v_cache"]), dim=2)
        inp["k_cache"], inp["v_cache"] = pool[:, :, 0], pool[:, :, 1]
    elif view == "padded_rows":              # a head's row padded to 34 elements: row stride 68
        for name in ("k_cache", "v_cache"):
            big = torch.full((nb, page, hk, d + 2), float("nan"), dtype=torch.float16, device=DEVICE)
            big[..., :d] = inp[name]
            inp[name] = big[..., :d]
    else:                                    # every other page of a pool twice as long
        for name in ("k_cache", "v_cache"):
            big = torch.full((2 * nb, page, hk, d), float("nan"), dtype=torch.float16, device=DEVICE)
            big[::2] = inp[name]
            inp[name] = big[::2]
    assert not inp["k_cache"].is_contiguous()
    assert decode_launcher.page_gather(decode_launcher.DecodeOptions(), page, 16, False, inp["k_cache"],
                                       inp["v_cache"]) == want
    launched = _page_gather_launches(monkeypatch)
    _, _, k_out, _ = run_case("triton", inp, causal=True, num_splits=2)
    assert k_out.stride() == inp["k_cache"].stride()                   # the kernel saw the view
    assert launched and set(launched) == {want}, launched


def test_page_gather_rule():
    """Which kernel variant gather="pages" picks: only for pages smaller than the tile and
    without TMA, with row strides that keep its alignment hint true; int32 offsets while
    both caches span < 2**31 elements."""
    pages = decode_launcher.DecodeOptions()
    assert pages.gather == "pages"                                   # the default since session 28
    rows = decode_launcher.DecodeOptions(gather="rows")
    kc = torch.zeros(8, 16, 2, 32)
    pick = decode_launcher.page_gather
    assert pick(pages, 16, 64, False, kc, kc) == 2
    assert pick(rows, 16, 64, False, kc, kc) == 0
    assert pick(pages, 64, 64, False, kc, kc) == 0 and pick(pages, 16, 64, True, kc, kc) == 0
    assert pick(pages, 0, 64, False, kc, kc) == 0
    odd = torch.zeros(8, 16, 2, 36)[..., :30]                        # row stride 72, D stride 1
    assert pick(pages, 16, 64, False, odd, odd) == 2
    odd = torch.zeros(8, 16, 1, 30)                                  # row stride 30: not a multiple of 8
    assert pick(pages, 16, 64, False, odd, odd) == 0

    class Wide:  # a pool of 2**20 pages of 16 x 1 x 128: 2**31 elements (only shape and strides are read)
        shape = (1 << 20, 16, 1, 128)

        def stride(self, i=None):
            return (2048, 128, 128, 1) if i is None else (2048, 128, 128, 1)[i]
    assert pick(pages, 16, 64, False, Wide(), kc) == 1 and pick(pages, 16, 64, False, kc, Wide()) == 1


def test_fused_combine_leaves_counters_zero():
    """The fused combine's ticket counters reset themselves: no memset per step."""
    inp = make_inputs(2, 1, 4, 2, 32, torch.float16, 64, [64, 30])
    with decode_launcher.options(combine="fused"):
        for _ in range(2):
            run_case("triton", inp, num_splits=4)
    for buf in decode_launcher._counters.values():
        assert int(buf.abs().sum()) == 0


def test_num_splits_heuristic():
    """The split counts the heuristic gives the benchmark's shapes (132 SMs, Hk = 8)."""
    h = decode_launcher.num_splits_heuristic
    assert h(8, 131072, 132, 256) == 16          # B=1, 128k: capped (16 x 8 = 128 programs)
    assert h(8, 8192, 132, 256) == 16            # B=1, 8k: capped
    assert h(8, 1024, 132, 256) == 4             # B=1, 1k: 256-key chunks
    assert h(64, 131072, 132, 256) == 6          # B=8: 384 programs, under the cap
    assert h(256, 32768, 132, 256) == 2          # B=32
    assert h(1024, 32768, 132, 256) == 1         # B=128: enough programs already
    assert h(64, 1024, 132, 256) == 4            # B=8, 1k: capped
    assert h(8, 100, 132, 256) == 1              # shorter than one chunk


def test_default_launch_plan():
    """The regimes and tiles the launcher picks for the benchmark's shapes (132 SMs,
    Hk = 8, D = 128, G * Sq = 4 rows: one m-block), and when the append gets a split."""
    regime, tile, h = decode_launcher.batch_regime, decode_launcher.default_tile, decode_launcher.num_splits_heuristic
    for batch, seqlen, batch_mode in [(1, 8192, False), (1, 131072, False), (8, 131072, False), (32, 1024, False),
                                      (32, 8192, True), (32, 32768, True), (128, 1024, False), (128, 8192, True)]:
        programs = batch * 8
        assert regime(programs, seqlen // h(programs, seqlen, 132, 256), 132) == batch_mode, (batch, seqlen)
    assert tile(128, 0, False) == (64, 4, 3)
    assert tile(128, 16, False) == (64, 4, 5)     # paged: two more stages
    assert tile(128, 0, True) == (128, 4, 3)
    assert tile(128, 256, True) == (128, 4, 5)
    assert tile(128, 16, True) == (32, 4, 5)      # pages under the batch tile: the row-gather tile
    assert tile(64, 0, True) == tile(64, 0, False)
    # split regime: splits of >= 2048 keys take the wide tile (B = 1, 32k and 128k at 16 splits),
    # except over pages too small to load it by TMA
    assert tile(128, 0, False, 8192 // 16) == (64, 4, 3)
    assert tile(128, 0, False, 32768 // 16) == (128, 4, 3)
    assert tile(128, 256, False, 131072 // 16) == (128, 4, 5)
    assert tile(128, 16, False, 131072 // 16) == (64, 4, 5)
    # ... and row-gathered pages split further while a split keeps >= 4096 keys
    assert decode_launcher.gather_splits(16, 131072) == 32
    assert decode_launcher.gather_splits(16, 32768) == 16
    assert decode_launcher.gather_splits(16, 8192) == 16
    assert decode_launcher.append_split(8, 16, 132)
    assert not decode_launcher.append_split(8, 1, 132)
    assert not decode_launcher.append_split(256, 2, 132)
    # outside CUDA-graph capture the split regime merges in the split kernel (one launch)
    assert decode_launcher.auto_combine(True, torch.device(DEVICE)) == "fused"
    assert decode_launcher.auto_combine(False, torch.device(DEVICE)) == "fused"


def test_regression_decode_fp32_tiles_fit_shared_memory():
    """Session 61, H100: flash_attn_with_kvcache with an fp32 cache at D = 128, B = 1, L = 32k took the 128-key
    wide-split tile sized for 2-byte caches: OutOfResources (278,544 bytes of shared memory asked, 232,448 there;
    the batch regime's tile is the same). default_tile now halves BLOCK_N while the K / V tiles in flight overflow
    KV_SMEM_BUDGET; 2-byte caches keep their tiles (test_default_launch_plan)."""
    tile, smem = decode_launcher.default_tile, decode_launcher.kv_smem_bytes
    for d in (16, 32, 40, 64, 80, 96, 128, 192, 256):
        bd = decode_launcher.block_d(d)
        for page in (0, 16, 64, 128, 256):
            for batch in (False, True):
                for split_keys in (0, 2048, 8192):
                    for elem in (2, 4):
                        bn, _, stages = tile(d, page, batch, split_keys, elem)
                        assert smem(bn, bd, stages, page > 0, elem) <= decode_launcher.KV_SMEM_BUDGET, (d, page, elem)
    assert smem(128, 128, 3, False, 4) > decode_launcher.KV_SMEM_BUDGET     # the tile that failed
    assert tile(16, 0, True, 0, 4) == (128, 4, 4)      # (block_d 16: no FP32_TILES entry)
    assert tile(16, 0, False, 32768 // 16, 4) == (128, 4, 4)


def test_decode_fp32_tiles_without_spills():
    """Session 63: fp32 caches at D = 64 / 128 / 256 take the 8-warp tiles of FP32_TILES in every regime (the
    2-byte tiles spilled 1-34 KB a thread there; H100: 1.2-1.4x faster at D = 64, 2.0-2.4x at 128 / 256, 7x at
    D = 256 with 4 query rows); paged caches two more stages; 2-byte caches keep their tiles. Session 65: D = 32
    (block_d 32) takes (64, 4, 4), 0.94-0.95x the time of its 2-byte tile on the H100 and the H200."""
    tile = decode_launcher.default_tile
    for batch, split_keys in ((False, 0), (False, 32768 // 16), (True, 0)):
        assert tile(128, 0, batch, split_keys, 4) == (32, 8, 3)
        assert tile(128, 256, batch, split_keys, 4) == (32, 8, 5)
        assert tile(128, 16, batch, split_keys, 4) == (32, 8, 5)
        assert tile(256, 0, batch, split_keys, 4) == (16, 8, 3)
        assert tile(96, 0, batch, split_keys, 4) == tile(128, 0, batch, split_keys, 4)   # block_d 128
        assert tile(64, 0, batch, split_keys, 4) == (32, 8, 3) and tile(40, 0, batch, split_keys, 4) == (32, 8, 3)
    assert tile(128, 0, False, 0, 2) == (64, 4, 3) and tile(128, 0, True, 0, 2) == (128, 4, 3)
    assert tile(256, 0, False, 0, 2) == (32, 4, 3) and tile(64, 0, False, 0, 2) == (128, 4, 3)
    assert tile(32, 0, False, 0, 4) == (64, 4, 4) and tile(24, 16, True, 0, 4) == (64, 4, 6)
    assert tile(32, 0, False, 0, 2) == (128, 4, 4)


@pytest.mark.gpu
@pytest.mark.parametrize("case", ["wide-split", "batch", "batch-paged256"])
def test_regression_decode_fp32_long_cache_gpu(case):
    """The same bug end to end: fp32 caches at D = 128 in the regimes whose 2-byte tile has 128 keys (B = 1 at 32k:
    splits of 2048 keys; B * Hk = 136 programs of 4096 keys: the batch regime, contiguous and in 256-key pages)."""
    batch, capacity, page = {"wide-split": (1, 32768, 0), "batch": (17, 4096, 0),
                             "batch-paged256": (17, 4096, 256)}[case]
    inp = make_inputs(batch, 1, 16, 8, 128, torch.float32, capacity, [capacity] * batch, page_size=page)
    run_case("triton", inp)


@pytest.mark.parametrize("snew", [0, 3])
def test_batch_regime_launch(monkeypatch, snew):
    """The batch regime's launch (no split of its own for the appended tokens, the last
    cache split appends), forced on small shapes by pretending the GPU has 4 SMs."""
    monkeypatch.setattr(decode_launcher, "sm_count", lambda device: 4)
    inp = make_inputs(3, 2, 8, 2, 32, torch.bfloat16, 64, [0, 31, 61], snew=snew, page_size=16,
                      rotary_dim=32 if snew else 0)
    assert not decode_launcher.append_split(3 * 2, 3, 4)
    run_case("triton", inp, causal=True, num_splits=3)
    run_case("triton", inp, causal=True)


def test_bitwise_repeatable():
    inp = make_inputs(2, 1, 4, 2, 32, torch.bfloat16, 64, [64, 30])
    a = run_case("triton", inp, num_splits=3)[0]
    b = run_case("triton", inp, num_splits=3)[0]
    assert torch.equal(a, b)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("combine,splits,snew", [("fused", 1, 0), ("fused", 3, 0), ("kernel", 3, 0),
                                                 ("kernel", 2, 2)])
def test_regression_fp32_alibi_rows_before_keys_kvcache(backend, combine, splits, snew):
    """Regression (README limitation of session 67, fixed in session 68): fp32, not causal, more
    query rows than keys, so the first rows sit before every key and their ALiBi biases are
    hundreds of units. The Triton decode kernel kept the plain bias, and out read 0.95x the bound
    under the interpreter (1.05x on an H100). It now measures the bias from max(qi + diag, 0) and
    moves the lse back at the store (kernels/decode._anchor_shift): with one split, after the fused
    combine, and after the separate one (which finds the shift in LSE). Lengths 17 and 40 of a
    240-row q, (B, H) slopes up to 8, GQA 2; splits 1 / 2 / 3, new tokens appended; four draws (the
    old kernel's worst read 2.1-2.6x PyTorch's error on out or lse, this one 0.06x / 0.53x). The CPU's torch-ops
    path anchored its bias already, but returned the anchored lse (off by slope * 200 here)."""
    slopes = 4.0 * torch.tensor([[1.0, 0.5, 0.25, 0.125], [0.75, 1.0, 0.3, 2.0]], device=DEVICE)
    for seed in range(4):
        torch.manual_seed(100 * seed + splits + snew)
        inp = make_inputs(2, 240, 4, 2, 32, torch.float32, 48, [17, 40 - snew], snew=snew)
        with decode_launcher.options(combine=combine):
            run_case(backend, inp, alibi_slopes=slopes, num_splits=splits)


# ---------------------------------------------------------------------------------------
# validation: clear errors before any launch

def _good(**over):
    inp = make_inputs(2, 1, 4, 2, 32, torch.float16, 32, [10, 20], snew=1, rotary_dim=32)
    inp.update(over)
    return inp


def _paged(**over):
    inp = make_inputs(2, 1, 4, 2, 32, torch.float16, 32, [10, 20], snew=1, page_size=8)
    inp.update(over)
    return inp


BAD = [
    ("cache_seqlens int64", lambda: _good(cache_seqlens=torch.tensor([1, 2])), TypeError, "cache_seqlens: dtype"),
    ("cache_seqlens shape", lambda: _good(cache_seqlens=torch.tensor([1, 2, 3], dtype=torch.int32)), ValueError,
     "cache_seqlens: shape"),
    ("cache_seqlens negative", lambda: _good(cache_seqlens=torch.tensor([-1, 2], dtype=torch.int32)), ValueError,
     "cache_seqlens: entry 0 is -1"),
    ("append overflows", lambda: _good(cache_seqlens=torch.tensor([1, 32], dtype=torch.int32)), ValueError,
     "too small for the append"),
    ("int append overflows", lambda: _good(cache_seqlens=32), ValueError, "too small for the append"),
    ("seqlens past capacity", lambda: _good(k=None, v=None, rotary_cos=None, rotary_sin=None,
                                            cache_seqlens=torch.tensor([1, 33], dtype=torch.int32)),
     ValueError, "capacity 32"),
    ("block_table out of range", lambda: _paged(block_table=torch.tensor([[0, 99, -1, -1], [2, 3, 4, -1]],
                                                                         dtype=torch.int32)),
     ValueError, "block_table: entry [0, 1] is 99"),
    ("block_table negative", lambda: _paged(block_table=torch.tensor([[0, 1, -1, -1], [2, -5, 4, -1]],
                                                                     dtype=torch.int32)),
     ValueError, "block_table: entry [1, 1] is -5"),
    ("block_table int64", lambda: _paged(block_table=torch.zeros(2, 4, dtype=torch.int64)), TypeError,
     "block_table: dtype"),
    ("block_table rows", lambda: _paged(block_table=torch.zeros(3, 4, dtype=torch.int32)), ValueError,
     "block_table: shape"),
    ("page size not 2^k", lambda: _paged(k_cache=torch.randn(9, 6, 2, 32, dtype=torch.float16),
                                         v_cache=torch.randn(9, 6, 2, 32, dtype=torch.float16)),
     ValueError, "power of two"),
    ("batch idx with pages", lambda: _paged(cache_batch_idx=torch.tensor([0, 1], dtype=torch.int32)), ValueError,
     "cache_batch_idx: must be None with a paged cache"),
    ("batch idx out of range", lambda: _good(k_cache=torch.randn(3, 32, 2, 32, dtype=torch.float16),
                                             v_cache=torch.randn(3, 32, 2, 32, dtype=torch.float16),
                                             cache_batch_idx=torch.tensor([0, 3], dtype=torch.int32)),
     ValueError, "cache_batch_idx: entry 1 is 3"),
    ("batch idx repeated", lambda: _good(k_cache=torch.randn(3, 32, 2, 32, dtype=torch.float16),
                                         v_cache=torch.randn(3, 32, 2, 32, dtype=torch.float16),
                                         cache_batch_idx=torch.tensor([1, 1], dtype=torch.int32)),
     ValueError, "more than once"),
    ("cache batch mismatch", lambda: _good(k_cache=torch.randn(3, 32, 2, 32, dtype=torch.float16),
                                           v_cache=torch.randn(3, 32, 2, 32, dtype=torch.float16)),
     ValueError, "k_cache: batch_cache 3"),
    ("leftpad past seqlens", lambda: _good(cache_leftpad=torch.tensor([11, 0], dtype=torch.int32)), ValueError,
     "cache_leftpad: entry 0 is 11"),
    ("k without v", lambda: _good(v=None), ValueError, "k, v: give both"),
    ("k bad shape", lambda: _good(k=torch.randn(2, 1, 4, 32, dtype=torch.float16)), ValueError, "k: shape"),
    ("k dtype", lambda: _good(k=torch.randn(2, 1, 2, 32, dtype=torch.bfloat16)), TypeError, "k: dtype"),
    ("rotary without k", lambda: _good(k=None, v=None), ValueError, "rotary_cos: rotary embedding needs"),
    ("rotary too wide", lambda: _good(rotary_cos=torch.ones(64, 20, dtype=torch.float16),
                                      rotary_sin=torch.ones(64, 20, dtype=torch.float16)),
     ValueError, "rotary_dim"),
    ("rotary too short", lambda: _good(rotary_cos=torch.ones(20, 16, dtype=torch.float16),
                                       rotary_sin=torch.ones(20, 16, dtype=torch.float16)),
     ValueError, "sequence 1 needs position 20"),
    ("rotary only cos", lambda: _good(rotary_sin=None), ValueError, "give both or neither"),
    ("cache dtype", lambda: _good(v_cache=torch.randn(2, 32, 2, 32, dtype=torch.bfloat16)), TypeError,
     "v_cache: dtype"),
    ("cache shapes", lambda: _good(v_cache=torch.randn(2, 31, 2, 32, dtype=torch.float16)), ValueError,
     "v_cache: shape"),
    ("heads", lambda: _good(q=torch.randn(2, 1, 3, 32, dtype=torch.float16)), ValueError, "must divide"),
    ("head dim", lambda: _good(q=torch.randn(2, 1, 4, 16, dtype=torch.float16)), ValueError, "head dim"),
    ("q dims", lambda: _good(q=torch.randn(2, 4, 32, dtype=torch.float16)), ValueError, "q: expected 4 dims"),
    ("no seqlens with append", lambda: _good(cache_seqlens=None), ValueError, "cache_seqlens: required"),
    ("seqlens float", lambda: _good(cache_seqlens=3.0), TypeError, "cache_seqlens: expected"),
]


@pytest.mark.parametrize("name,make,exc,msg", BAD, ids=[b[0] for b in BAD])
def test_bad_input(name, make, exc, msg):
    inp = {k: (v.to(DEVICE) if isinstance(v, torch.Tensor) else v) for k, v in make().items()}
    kc, vc = inp["k_cache"].clone(), inp["v_cache"].clone()
    q = inp.pop("q")
    with flashtriton.use_backend("triton"), pytest.raises(exc) as info:
        flash_attn_with_kvcache(q, **inp)
    assert msg in str(info.value), str(info.value)
    assert torch.equal(kc, inp["k_cache"]) and torch.equal(vc, inp["v_cache"]), "a failed call wrote the cache"


@pytest.mark.parametrize("kw,exc,msg", [
    (dict(num_splits=-1), ValueError, "num_splits"), (dict(num_splits=1000), ValueError, "num_splits"),
    (dict(num_splits=True), ValueError, "num_splits"), (dict(causal=1), TypeError, "causal"),
    (dict(window_size=(3,)), ValueError, "window_size"), (dict(softcap=-1.0), ValueError, "softcap"),
    (dict(alibi_slopes=torch.ones(3)), ValueError, "alibi_slopes"),
    (dict(rotary_interleaved=None), TypeError, "rotary_interleaved"),
    (dict(return_softmax_lse=1), TypeError, "return_softmax_lse: must be a bool, got int"),
    (dict(window_size=[2, True, 0]), ValueError, "window_size"), (dict(window_size=[-2, 0]), ValueError, "window_size"),
    (dict(window_size=(0, 1.0)), ValueError, "window_size"),
])
def test_bad_options(kw, exc, msg):
    inp = _good()
    inp = {k: (v.to(DEVICE) if isinstance(v, torch.Tensor) else v) for k, v in inp.items()}
    kw = {k: (v.to(DEVICE) if isinstance(v, torch.Tensor) else v) for k, v in kw.items()}
    q = inp.pop("q")
    with flashtriton.use_backend("triton"), pytest.raises(exc, match=msg):
        flash_attn_with_kvcache(q, **inp, **kw)


def test_value_checks_switch(monkeypatch):
    """value_checks(False) skips the host-synchronising checks (for serving loops and
    CUDA graphs); the structure checks still run."""
    calls = []
    monkeypatch.setattr(kvcache, "_check_values", lambda *a, **k: calls.append(1))
    inp = make_inputs(2, 1, 4, 2, 32, torch.float16, 32, [10, 20])
    q = inp.pop("q")
    with flashtriton.use_backend("triton"):
        flash_attn_with_kvcache(q, **inp)
        assert calls == [1]
        with kvcache.value_checks(False):
            flash_attn_with_kvcache(q, **inp)
            with pytest.raises(TypeError, match="cache_seqlens: dtype"):
                flash_attn_with_kvcache(q, **dict(inp, cache_seqlens=inp["cache_seqlens"].long()))
    assert calls == [1]


def test_structure_checked_once_per_signature(monkeypatch):
    """kvcache._checked_structure: a signature (each tensor's shape, strides, dtype and
    device, an int cache_seqlens' value, the backend) that passed the structure checks
    skips them on the next call; any change makes them run again, and a bad call raises
    every time (nothing failing is remembered)."""
    checks = []
    real = kvcache._check_structure
    monkeypatch.setattr(kvcache, "_check_structure", lambda *a: checks.append(1) or real(*a))
    monkeypatch.setattr(kvcache, "_STRUCTURES", {})
    inp = make_inputs(2, 1, 4, 2, 32, torch.float16, 32, [10, 20])
    q = inp.pop("q")
    with flashtriton.use_backend("triton"), kvcache.value_checks(False):
        flash_attn_with_kvcache(q, **inp)
        flash_attn_with_kvcache(torch.randn_like(q), **inp)                    # same signature, new values
        assert len(checks) == 1
        flash_attn_with_kvcache(q, **dict(inp, cache_seqlens=5))               # an int: checked, then remembered
        flash_attn_with_kvcache(q, **dict(inp, cache_seqlens=5))
        assert len(checks) == 2
        for _ in range(2):
            with pytest.raises(ValueError, match="cache_seqlens: 40 must be in"):
                flash_attn_with_kvcache(q, **dict(inp, cache_seqlens=40))       # past the capacity 32
            with pytest.raises(TypeError, match="cache_seqlens: dtype"):
                flash_attn_with_kvcache(q, **dict(inp, cache_seqlens=inp["cache_seqlens"].long()))
            with pytest.raises(ValueError, match="the last \\(headdim\\) dimension must have stride 1"):
                flash_attn_with_kvcache(q, **dict(inp, k_cache=inp["k_cache"].transpose(1, 3).contiguous()
                                                  .transpose(1, 3)))
        assert len(checks) == 8


def test_value_checks_context(monkeypatch):
    """kvcache.value_checks: the innermost block wins, an exception inside restores the
    outer setting, it works as a decorator (every call), and a non-bool raises when the
    block is entered, leaving nothing behind; without a block the environment decides."""
    def on():
        return kvcache._value_checks_on(torch.device("cpu"))

    monkeypatch.delenv("FLASHTRITON_KVCACHE_CHECKS", raising=False)
    assert on()
    with kvcache.value_checks(False):
        assert not on()
        with kvcache.value_checks(True):
            assert on()
        assert not on()
    assert on()
    with pytest.raises(RuntimeError, match="inside"):
        with kvcache.value_checks(False):
            raise RuntimeError("inside")
    assert on() and not kvcache._checks_override

    @kvcache.value_checks(False)
    def decorated():
        return on()

    assert decorated() is False and decorated() is False and on()
    with pytest.raises(TypeError, match="enabled: must be a bool, got int"):
        with kvcache.value_checks(1):
            pass
    assert not kvcache._checks_override
    monkeypatch.setenv("FLASHTRITON_KVCACHE_CHECKS", "0")
    assert not on()
    with kvcache.value_checks(True):
        assert on()


def test_attn_params_memo():
    """kvcache._attn_params: exactly the AttnParams the call would build (each field's type
    and the sign of a zero included), one object for a repeated value; a bool window bound
    or a negative zero never gets the object made for an equal value."""
    import dataclasses

    def same(a, b):
        return all(type(x) is type(y) and repr(x) == repr(y)
                   for x, y in zip(dataclasses.astuple(a), dataclasses.astuple(b)))

    cases = [(0.125, -1, 0, 0.0), (0.125, 1, 0, 0.0), (0.125, True, 0, 0.0), (0.125, -1, False, 0.0),
             (0.125, -1, 0, -0.0), (0.0, -1, 0, 0.0), (-0.0, -1, 0, 0.0), (0.125, 5, -1, 2.0), (-0.5, -1, 0, 0.0)]
    for _ in range(2):
        for args in cases:
            got = kvcache._attn_params(*args)
            assert same(got, AttnParams(*args, 0.0)), args
    assert kvcache._attn_params(0.125, 5, -1, 2.0) is kvcache._attn_params(0.125, 5, -1, 2.0)
    assert kvcache._attn_params(0.125, -1, 0, 0.0) is not kvcache._attn_params(0.125, -1, 0, 3.0)


def test_plan_per_signature_token(monkeypatch):
    """flash_attn_with_kvcache keys its launch plan by its structure memo's token for the
    call's signature (kvcache._SignatureToken): calls of one signature replay one plan; a
    cache that differs only in its base's 16-byte alignment records a plan of its own (the
    compiled kernels assume aligned pointers), each replay gives bitwise what the launchers
    give, and a cleared memo records again."""
    monkeypatch.setenv("FLASHTRITON_PLANS", "1")
    inp = make_inputs(1, 1, 4, 2, 32, torch.float16, 32, [10])
    q = inp.pop("q")
    aligned = (inp.pop("k_cache"), inp.pop("v_cache"))
    shifted = []
    for t in aligned:
        buf = torch.empty(t.numel() + 1, dtype=t.dtype, device=DEVICE)
        shifted.append(buf[1:].view(t.shape).copy_(t))        # base 2 bytes off 16-byte alignment
    with flashtriton.use_backend("triton"), kvcache.value_checks(False):
        def step(caches):
            return flash_attn_with_kvcache(q, *caches, return_softmax_lse=True, **inp)

        before = dict(launcher_plans.stats)
        got = [step(c) for c in (aligned, aligned, shifted, shifted, aligned)]
        assert launcher_plans.stats["recorded"] == before["recorded"] + 2
        assert launcher_plans.stats["replayed"] == before["replayed"] + 3
        monkeypatch.setattr(kvcache, "_STRUCTURES", {})
        step(aligned)
        assert launcher_plans.stats["recorded"] == before["recorded"] + 3
        monkeypatch.setenv("FLASHTRITON_PLANS", "0")
        want = step(aligned)
    for out, lse in got:
        assert torch.equal(out, want[0]) and torch.equal(lse, want[1])


def _kvcache_step_memo_case(monkeypatch, kernel_rows):
    """A contiguous decode step replayed through kvcache's step memo (plans on), value checks on."""
    monkeypatch.setenv("FLASHTRITON_PLANS", "1")
    monkeypatch.setattr(kvcache, "_KERNEL_VALUE_ROWS", kernel_rows)
    inp = make_inputs(2, 1, 4, 2, 32, torch.float16, 32, [10, 20])
    return inp.pop("q"), inp


@pytest.mark.skipif("triton" not in kernel_backends(), reason="the step memo keeps the triton backend's plans")
@pytest.mark.parametrize("kernel_rows", [False, True])
def test_step_memo_replays_and_revalidates(monkeypatch, kernel_rows):
    """kvcache's step memo (_Step: a call of a signature and options seen before replays its
    plans without the long way's checks): the replay runs no structure check, replays the
    value checks' plan (kernel rows) and the decode's, and equals the launchers bitwise;
    yet every bad call still raises as before - a cache swapped for one with other strides
    or another dtype (a new signature: checked again), out-of-range values under the
    remembered signature (the value checks run on every replay), an option of the wrong
    type beside a remembered equal value (causal=1, num_splits=True, a float window bound),
    a bad environment - and plans.clear() makes the next call record again."""
    q, inp = _kvcache_step_memo_case(monkeypatch, kernel_rows)
    checks = []
    real = kvcache._check_structure
    monkeypatch.setattr(kvcache, "_check_structure", lambda *a: checks.append(1) or real(*a))
    monkeypatch.setattr(kvcache, "_STRUCTURES", {})

    def call(**kw):
        return flash_attn_with_kvcache(q, **dict(inp, **kw), causal=True, return_softmax_lse=True)

    with flashtriton.use_backend("triton"):
        call()                                                  # the long way: records the plans
        before = dict(launcher_plans.stats)
        got = call()
        assert len(checks) == 1, "the replayed step ran the structure checks"
        assert launcher_plans.stats["recorded"] == before["recorded"]
        assert launcher_plans.stats["replayed"] == before["replayed"] + (2 if kernel_rows else 1)
        (structure,) = kvcache._STRUCTURES.values()
        assert len(structure.steps) == 1
        for _ in range(2):                                      # remembered? never for a failing call
            with pytest.raises(ValueError, match="the last \\(headdim\\) dimension must have stride 1"):
                call(k_cache=inp["k_cache"].transpose(1, 3).contiguous().transpose(1, 3))
            with pytest.raises(TypeError, match="k_cache: dtype torch.float32 differs"):
                call(k_cache=inp["k_cache"].float())
            with pytest.raises(ValueError, match="cache_seqlens: entry 1 is 40 > the cache capacity 32"):
                call(cache_seqlens=torch.tensor([10, 40], dtype=torch.int32, device=DEVICE))
            with pytest.raises(ValueError, match="cache_seqlens: entry 0 is -1; must be >= 0"):
                call(cache_seqlens=torch.tensor([-1, 4], dtype=torch.int32, device=DEVICE))
            with pytest.raises(TypeError, match="causal: must be a bool, got int"):
                flash_attn_with_kvcache(q, **inp, causal=1, return_softmax_lse=True)
            with pytest.raises(ValueError, match="num_splits: must be an int"):
                flash_attn_with_kvcache(q, **inp, causal=True, return_softmax_lse=True, num_splits=True)
            with pytest.raises(ValueError, match="window_size: must be a pair"):
                flash_attn_with_kvcache(q, **inp, window_size=(1.0, -1), return_softmax_lse=True)
        monkeypatch.setenv("FLASHTRITON_DECODE_COMBINE", "bogus")
        with pytest.raises(ValueError, match="decode option combine"):
            call()
        monkeypatch.delenv("FLASHTRITON_DECODE_COMBINE")
        launcher_plans.clear()
        before = dict(launcher_plans.stats)
        again = call()
        assert launcher_plans.stats["recorded"] == before["recorded"] + (2 if kernel_rows else 1)
        monkeypatch.setenv("FLASHTRITON_PLANS", "0")
        want = call()
    for a, b in zip(got + again, want + want):
        assert torch.equal(a, b)


@pytest.mark.skipif("triton" not in kernel_backends(), reason="the step memo keeps the triton backend's plans")
def test_step_memo_keys(monkeypatch):
    """kvcache._step_key: None (no step kept) for options of another type than the API's
    defaults take (so that no equal value of a failing type finds a step), ALiBi slopes
    that are no plain tensor, and inside a decode options() block; otherwise a key that
    changes with the value checks' switch, the environment the launchers read and the
    options."""
    q, _ = _kvcache_step_memo_case(monkeypatch, False)
    base = dict(softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0, rotary_interleaved=True,
                alibi_slopes=None, num_splits=0, return_softmax_lse=False)

    def key(**kw):
        return kvcache._step_key(q, **dict(base, **kw))

    assert key() is not None and key() == key()
    for kw in (dict(causal=1), dict(rotary_interleaved=0), dict(return_softmax_lse=None), dict(num_splits=True),
               dict(num_splits=1.0), dict(softcap=0), dict(softmax_scale=1), dict(window_size=[-1, -1]),
               dict(window_size=(-1.0, -1)), dict(window_size=(-1, -1, 0)), dict(alibi_slopes=[0.5])):
        assert key(**kw) is None, kw
    with decode_launcher.options(combine="fused"):
        assert key() is None
    plain = key()
    assert key(causal=True) != plain and key(softmax_scale=0.5) != plain and key(num_splits=2) != plain
    with kvcache.value_checks(False):
        assert key() != plain
    monkeypatch.setenv("FLASHTRITON_DECODE_TILE", "32,4,2")
    assert key() != plain
    monkeypatch.delenv("FLASHTRITON_DECODE_TILE")
    assert key() == plain


@pytest.mark.skipif("triton" not in kernel_backends(), reason="the step memo keeps the triton backend's plans")
def test_step_memo_skips_copied_index_tensors(monkeypatch):
    """A call whose index tensors the long way copies (strided views) keeps no step (its
    plan's inputs are the copies), and its results stay right on every call."""
    q, inp = _kvcache_step_memo_case(monkeypatch, False)
    monkeypatch.setattr(kvcache, "_STRUCTURES", {})
    lens = torch.tensor([10, 0, 20, 0], dtype=torch.int32, device=DEVICE)[::2]
    with flashtriton.use_backend("triton"):
        got = [flash_attn_with_kvcache(q, **dict(inp, cache_seqlens=lens)) for _ in range(3)]
        assert kvcache._STRUCTURES and all(not s.steps for s in kvcache._STRUCTURES.values())
        want = flash_attn_with_kvcache(q, **inp)
    for out in got:
        assert torch.equal(out, want)


@pytest.mark.skipif("triton" not in kernel_backends(), reason="the step memo keeps the triton backend's plans")
def test_regression_step_memo_taken_and_keyed(monkeypatch):
    """Regression (review of session 27): the step memo's tests passed with its replay
    switched off (the long way replays the same plans, with the same counts) and with
    ALiBi's signature left out of _step_key. Here a call seen before must go through
    _replay_step, and steps that differ only in ALiBi (none, (H,), (B, H)) or in
    return_softmax_lse must each replay their own plan: every result equals the
    launchers' (plans off), new ALiBi values included (they are read at replay)."""
    q, inp = _kvcache_step_memo_case(monkeypatch, False)
    monkeypatch.setattr(kvcache, "_STRUCTURES", {})
    replays = []
    real = kvcache._replay_step
    monkeypatch.setattr(kvcache, "_replay_step", lambda *a: replays.append(1) or real(*a))
    batch, nheads = q.shape[0], q.shape[2]
    alibis = [None, torch.rand(nheads, device=DEVICE), torch.rand(batch, nheads, device=DEVICE)]

    def call(alibi, lse):
        got = flash_attn_with_kvcache(q, **inp, causal=True, alibi_slopes=alibi, return_softmax_lse=lse)
        return got if lse else (got,)

    with flashtriton.use_backend("triton"):
        results = []
        for lse in (False, True):
            for alibi in alibis:
                for rep in range(2):
                    n = len(replays)
                    results.append((alibi, lse, call(alibi, lse)))
                    assert len(replays) == n + rep, f"alibi {alibi is not None}, lse {lse}, call {rep + 1}"
        results.append((alibis[1] * 3, True, call(alibis[1] * 3, True)))      # new values, same signature
        assert len(replays) == 7
        monkeypatch.setenv("FLASHTRITON_PLANS", "0")
        for alibi, lse, got in results:
            want = call(alibi, lse)
            for a, b in zip(got, want):
                assert torch.equal(a, b), (alibi, lse)


@pytest.mark.skipif("triton" not in kernel_backends(), reason="the step memo keeps the triton backend's plans")
def test_regression_step_memo_forgets_cleared_plans(monkeypatch):
    """Regression (review of session 27): plans.clear() forgot the plans, but the step memo
    kept each step's plan (never replayed again: its generation is past) alive, with its
    compiled kernels and persistent workspaces, until a call of the same step key came
    again. clear() now drops the steps too; the next call records and keeps a new one."""
    import gc
    import weakref
    q, inp = _kvcache_step_memo_case(monkeypatch, False)
    monkeypatch.setattr(kvcache, "_STRUCTURES", {})
    with flashtriton.use_backend("triton"):
        want = flash_attn_with_kvcache(q, **inp)
        (structure,) = kvcache._STRUCTURES.values()
        (step,) = structure.steps.values()
        plan = weakref.ref(step.plan)
        del step
        launcher_plans.clear()
        gc.collect()
        assert plan() is None, "a step kept a cleared plan alive"
        assert not structure.steps
        got = flash_attn_with_kvcache(q, **inp)
        assert len(structure.steps) == 1
    assert torch.equal(got, want)


def test_decode_options_checked(monkeypatch):
    """launchers.decode.current_options: a bad FLASHTRITON_DECODE_* value raises on every
    call (nothing bad is remembered), through flash_attn_with_kvcache too; an options()
    block may override the bad field; a bad options() raises when entered and leaves
    nothing behind; a changed environment is read."""
    monkeypatch.setenv("FLASHTRITON_DECODE_COMBINE", "bogus")
    for _ in range(2):
        with pytest.raises(ValueError, match="decode option combine"):
            decode_launcher.current_options()
    inp = make_inputs(1, 1, 4, 2, 32, torch.float16, 32, [10])
    q = inp.pop("q")
    with flashtriton.use_backend("triton"), pytest.raises(ValueError, match="decode option combine"):
        flash_attn_with_kvcache(q, **inp)
    with decode_launcher.options(combine="fused"):
        assert decode_launcher.current_options().combine == "fused"
        with decode_launcher.options(kv_load="pointer"):
            assert decode_launcher.current_options() == decode_launcher.DecodeOptions(combine="fused",
                                                                                      kv_load="pointer")
        with flashtriton.use_backend("triton"):
            flash_attn_with_kvcache(q, **inp)
    monkeypatch.setenv("FLASHTRITON_DECODE_COMBINE", "kernel")
    assert decode_launcher.current_options().combine == "kernel"
    with pytest.raises(ValueError, match="decode option append"):
        with decode_launcher.options(append="nope"):
            pass
    assert not decode_launcher._override
    with pytest.raises(ValueError, match="decode option gather"):
        with decode_launcher.options(gather="page"):
            pass
    monkeypatch.setenv("FLASHTRITON_DECODE_GATHER", "pages")
    assert decode_launcher.current_options().gather == "pages"
    monkeypatch.delenv("FLASHTRITON_DECODE_GATHER")
    monkeypatch.delenv("FLASHTRITON_DECODE_COMBINE")
    assert decode_launcher.current_options() == decode_launcher.DecodeOptions()


# ---------------------------------------------------------------------------------------
# GPU: the serving shapes (skipped without CUDA; the lead runs these on the H200)

@pytest.mark.gpu
@pytest.mark.parametrize("layout", ["contiguous", "paged16", "paged256"])
@pytest.mark.parametrize("lens", [[1, 4097, 16384, 777], [16384] * 4])
def test_large_gpu(layout, lens):
    page = {"contiguous": 0, "paged16": 16, "paged256": 256}[layout]
    inp = make_inputs(4, 1, 32, 8, 128, torch.bfloat16, 16640, lens, snew=1, page_size=page, rotary_dim=128)
    run_case("triton", inp)


@pytest.mark.gpu
@pytest.mark.parametrize("gather,offsets", [("pages", "int32"), ("pages", "int64"), ("rows", "int64")])
def test_page_gather_gpu(monkeypatch, gather, offsets):
    """Both gathers on the GPU (sm_90a: "pages" issues cp.async through the alignment
    hint), split and batch regimes, ragged lengths, left padding, an appended token."""
    if offsets == "int64":
        monkeypatch.setattr(decode_launcher, "GATHER_INT32_LIMIT", 0)
    for batch, lens in ((1, [8191]), (4, [1, 4097, 16384, 777])):
        inp = make_inputs(batch, 1, 32, 8, 128, torch.bfloat16, 16640, lens, snew=1, page_size=16, rotary_dim=128,
                          leftpad=[min(5, n - 1) if n > 1 else 0 for n in lens])
        with decode_launcher.options(gather=gather):
            run_case("triton", inp)


@pytest.mark.gpu
@pytest.mark.parametrize("d", [64, 128, 256])
@pytest.mark.parametrize("sq", [1, 4, 16])
def test_head_dims_and_speculation_gpu(d, sq):
    inp = make_inputs(3, sq, 32, 8, d, torch.float16, 4096, [4096 - sq, 1000, 0], snew=sq, rotary_dim=d,
                      page_size=64)
    run_case("triton", inp, causal=True)


@pytest.mark.gpu
@pytest.mark.parametrize("combine", ["fused", "kernel"])
@pytest.mark.parametrize("append", ["fused", "separate"])
@pytest.mark.parametrize("splits", [0, 1, 7, 64])
def test_variants_gpu(combine, append, splits):
    inp = make_inputs(8, 1, 32, 8, 128, torch.bfloat16, 8192, [8191, 5000, 1, 0, 300, 8000, 4096, 17], snew=1,
                      rotary_dim=64, page_size=16)
    with decode_launcher.options(combine=combine, append=append):
        run_case("triton", inp, num_splits=splits)


@pytest.mark.gpu
@pytest.mark.parametrize("tile", [(32, 4, 2), (64, 4, 4), (128, 4, 3), (128, 8, 3), (64, 8, 2)])
def test_every_decode_tile_gpu(tile):
    """The tiles the benchmark's variant sweep may pick compute the right answer."""
    inp = make_inputs(4, 4, 32, 8, 128, torch.bfloat16, 4096, [4092, 100, 2000, 3333], snew=4, rotary_dim=128,
                      page_size=16)
    bn, warps, stages = tile
    from triton.runtime.errors import OutOfResources
    try:
        with decode_launcher.options(block_n=bn, num_warps=warps, num_stages=stages):
            run_case("triton", inp, causal=True)
    except OutOfResources as exc:  # the benchmark's sweep records these as errors too
        pytest.skip(f"tile {tile} does not fit: {exc}")


@pytest.mark.gpu
@pytest.mark.parametrize("case", ["split-capped", "batch-contiguous", "batch-paged16", "batch-paged256"])
@pytest.mark.parametrize("snew", [0, 1])
def test_default_paths_gpu(case, snew):
    """Every default the launcher can pick on the H200 at D = 128: the split regime at
    its split cap (B = 1: 16 splits, plus the append's own split), and the batch regime
    (B = 32, 8k: 2 splits of 4096 keys) with its 128-key tile (contiguous, pages of 256)
    and its row-gather tile (pages of 16)."""
    if case == "split-capped":  # 16 splits of 2048 keys: the wide tile
        batch, capacity, page = 1, 32768, 0
        lens = [32768 - snew]
    else:
        batch, capacity = 32, 8192
        page = {"batch-contiguous": 0, "batch-paged16": 16, "batch-paged256": 256}[case]
        lens = [(8192 - snew) if i % 4 == 0 else (i * 997) % (8192 - snew) for i in range(batch)]
    programs = batch * 8
    sms = decode_launcher.sm_count(torch.device("cuda"))
    splits = decode_launcher.num_splits_heuristic(programs, capacity, sms, 256)
    batch_mode = decode_launcher.batch_regime(programs, capacity // splits, sms)
    assert batch_mode == (case != "split-capped"), "this GPU's SM count moves the case to the other regime"
    if case == "split-capped":
        assert splits == decode_launcher.SMALL_GRID_MAX_SPLITS and decode_launcher.append_split(programs, splits, sms)
    inp = make_inputs(batch, 1, 32, 8, 128, torch.bfloat16, capacity, lens, snew=snew, page_size=page,
                      rotary_dim=128 if snew else 0)
    run_case("triton", inp, causal=bool(snew))


@pytest.mark.gpu
def test_cuda_graph_replay_gpu():
    """A decode step captured in a CUDA graph (value checks skip themselves while
    capturing) and replayed with new lengths and new tokens."""
    inp = make_inputs(4, 1, 32, 8, 128, torch.bfloat16, 4096, [100, 2000, 4000, 7], snew=1, page_size=16,
                      rotary_dim=128)
    static = _clone_caches(inp)
    q = static.pop("q")
    flash_attn_with_kvcache(q, **static)  # warm-up: compile outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = flash_attn_with_kvcache(q, **static)
    for step in range(3):
        new = make_inputs(4, 1, 32, 8, 128, torch.bfloat16, 4096, [101 + step, 2001, 3990, 8 + step], snew=1,
                          page_size=16, rotary_dim=128)
        ref_inp = dict(_clone_caches(static), q=new["q"], k=new["k"], v=new["v"],
                       cache_seqlens=new["cache_seqlens"])
        for name in ("k", "v", "cache_seqlens"):
            static[name].copy_(new[name])
        q.copy_(new["q"])
        graph.replay()
        truth = _ref(ref_inp, params_for(ref_inp), True, None, torch.float64)
        lowp = _ref(ref_inp, params_for(ref_inp), True, None, torch.bfloat16)
        assert_close("out", out, truth[0], lowp[0], 2, torch.bfloat16)
        written = written_mask(ref_inp)
        assert_cache("k_cache", static["k_cache"], truth[2], ref_inp["k_cache"], written)


# ---------------------------------------------------------------------------------------
# the benchmark harness (its GPU run is the lead's; here only that it runs end to end)

def test_decode_bench_smoke(tmp_path):
    """`python -m flashtriton.bench.decode --smoke`: inputs, validation against the
    reference, timing, JSON, table and plot, on tiny CPU shapes."""
    if DEVICE != "cpu":
        pytest.skip("the smoke run is the CPU path; on a GPU run the benchmark itself")
    pytest.importorskip("matplotlib")
    import json

    from flashtriton.bench import decode as bench
    rows = bench.main(out_dir=str(tmp_path), smoke=True)
    assert rows and not [r for r in rows if "error" in r], [r["error"] for r in rows if "error" in r]
    (sub,) = tmp_path.iterdir()
    data = json.loads((sub / "decode-smoke.json").read_text())
    assert len(data["rows"]) == len(rows)
    assert "### Contiguous cache" in (sub / "decode-smoke.md").read_text()
    assert (sub / "decode-smoke.png").stat().st_size > 0
    kinds = {r["kind"] for r in rows}
    assert kinds == {"grid", "paged", "append", "variant"}


def test_decode_bench_paged_rows(monkeypatch):
    """(review, session 28) bench_paged's interleaved rounds: one row a layout (the best of
    its rounds, eager and graph separately), a layout that fails a round an error row only
    (not an error row plus a timed one), and markdown's paged table compares each page with
    the contiguous reference timed beside it (not the grid section's row), labelling a
    failed reference as such. Providers stubbed: no kernel runs."""
    from flashtriton.bench import decode as bench

    monkeypatch.setattr(bench, "make_inputs", lambda b, n, device, page_size=0: dict(page=page_size))
    monkeypatch.setattr(bench, "ours", lambda inp: inp["page"])
    monkeypatch.setattr(bench, "reference_out", lambda inp: None)
    monkeypatch.setattr(bench, "_checked", lambda fn, ref, name: 1e-3)
    # (eager ms, graph ms, zeroing-flush graph ms) a round, by page; "boom" raises in that round
    plan = {0: [(0.020, 0.019, 0.021), (0.021, 0.018, 0.022)],
            16: [(0.025, 0.020, None), (0.022, 0.021, None)],
            256: [(0.030, 0.025, 0.026), "boom"]}
    calls = {p: 0 for p in plan}

    def fake_time(fn, device, graphs):
        page = fn()
        t = plan[page][calls[page]]
        calls[page] += 1
        if t == "boom":
            raise RuntimeError("CUDA error: boom")
        return t
    monkeypatch.setattr(bench, "_time", fake_time)
    monkeypatch.setattr(bench, "PAGED_ROUNDS", 2)
    rows = bench.bench_paged(1, 8192, "cuda", True)
    by_page = {}
    for r in rows:
        by_page.setdefault(r["page_size"], []).append(r)
    assert sorted(by_page) == [0, 16, 256] and all(len(v) == 1 for v in by_page.values()), rows
    (c,), (p16,), (p256,) = by_page[0], by_page[16], by_page[256]
    assert c["us"] == pytest.approx(20.0) and c["graph_us"] == pytest.approx(18.0)
    assert c["graph_zero_flush_us"] == pytest.approx(21.0)
    assert p16["us"] == pytest.approx(22.0) and p16["graph_us"] == pytest.approx(20.0)
    assert "graph_zero_flush_us" not in p16
    assert "error" in p256 and "us" not in p256 and "boom" in p256["error"]

    grid = dict(kind="grid", provider="flashtriton", batch=1, seqlen=8192, us=40.0, gbs=1.0, rel_err=1e-3)
    env = dict(device="test", sms=1, torch="x", triton="y", date="today")
    md = bench.markdown([grid] + rows, env)
    table = md.split("### Paged cache")[1].split("###")[0]
    lines = [ln for ln in table.splitlines() if ln.startswith("| 1 |")]
    assert len(lines) == 2, table                                     # page 16 and 256; the reference not a row
    assert "| 16 |" in lines[0] and "| 1.100 (1.111) |" in lines[0], lines[0]   # 22 / 20, graph 20 / 18
    assert "page 256: RuntimeError: CUDA error: boom" in md
    failed_ref = [bench._error_row("paged", "flashtriton", 1, 8192, RuntimeError("oom"), page_size=0)]
    md = bench.markdown([grid] + failed_ref + [p16], env)
    assert "contiguous (paged section's reference): RuntimeError: oom" in md
    assert "| 0.550" in md                                            # the grid row then: 22 / 40


@pytest.mark.gpu
@pytest.mark.parametrize("snew", [0, 1])
def test_gathered_pages_split_further_gpu(monkeypatch, snew):
    """The split regime over pages smaller than the tile (row gather) doubles its splits
    while each keeps GATHER_SPLIT_MIN_KEYS keys (32 splits at B = 1, L = 128k on the H200;
    here the threshold is lowered so that a small cache takes the same path), eagerly
    and inside a CUDA graph (where the combine runs as its own kernel)."""
    monkeypatch.setattr(decode_launcher, "GATHER_SPLIT_MIN_KEYS", 128)
    capacity = 8192
    sms = decode_launcher.sm_count(torch.device("cuda"))
    splits = decode_launcher.num_splits_heuristic(8, capacity, sms, 256)
    assert decode_launcher.gather_splits(splits, capacity) == decode_launcher.GATHER_MAX_SPLITS
    inp = make_inputs(1, 1, 32, 8, 128, torch.bfloat16, capacity, [capacity - 7 - snew], snew=snew, page_size=16,
                      rotary_dim=128 if snew else 0)
    run_case("triton", inp, causal=bool(snew))
    static = _clone_caches(inp)
    q = static.pop("q")
    eager = flash_attn_with_kvcache(q, **{k: v.clone() if k in ("k_cache", "v_cache") else v
                                          for k, v in static.items()})
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = flash_attn_with_kvcache(q, **static)
    graph.replay()
    torch.testing.assert_close(out, eager, atol=2e-3, rtol=2e-2)  # the two combines sum in other orders
