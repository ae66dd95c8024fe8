"""The CPU backend's flash_attn_with_kvcache, torch-ops paths (config.DECODE_PATH =
"ops"; the compiled kernel: test_cpu_decode_compiled.py), beyond the shared kvcache suite: many
chunks per split (config.DECODE_CHUNK shrunk), splits advancing in lock step,
paged caches whose pages are cut by chunk and split boundaries, append + rotary in
both pairings, GQA / MQA, speculative (Sq > 1) causal decoding, lengths from 0, and
the float64 reference of flashtriton.reference_decode as the truth.
"""
import math

import pytest
import torch

import flashtriton
from flashtriton import backends, flash_attn_with_kvcache, reference_decode
from flashtriton.launchers.prefill import AttnParams

from conftest import DEVICE
from helpers import assert_close

pytestmark = pytest.mark.skipif(not backends.cpu_available() or DEVICE != "cpu", reason="CPU backend tests")

if backends.cpu_available():
    from flashtriton.cpu import config


def _inputs(batch, sq, h, hk, d, dtype, capacity, lens, *, snew=0, page=0, rotary_dim=0, leftpad=None):
    q = torch.randn(batch, sq, h, d, dtype=dtype)
    inp = dict(q=q, cache_seqlens=torch.tensor(lens, dtype=torch.int32))
    if page:
        per_seq = capacity // page
        nblocks = batch * per_seq + 5
        table = torch.randperm(nblocks)[:batch * per_seq].view(batch, per_seq).to(torch.int32)
        inp["block_table"] = table
        shape = (nblocks, page, hk, d)
    else:
        shape = (batch, capacity, hk, d)
    inp["k_cache"] = torch.randn(shape, dtype=dtype)
    inp["v_cache"] = torch.randn(shape, dtype=dtype)
    if snew:
        inp["k"] = torch.randn(batch, snew, hk, d, dtype=dtype)
        inp["v"] = torch.randn(batch, snew, hk, d, dtype=dtype)
    if rotary_dim:
        inv = 1.0 / (10000 ** (torch.arange(0, rotary_dim, 2, dtype=torch.float64) / rotary_dim))
        ang = torch.arange(capacity + sq, dtype=torch.float64)[:, None] * inv[None, :]
        inp["rotary_cos"], inp["rotary_sin"] = ang.cos().float(), ang.sin().float()
    if leftpad is not None:
        inp["cache_leftpad"] = torch.tensor(leftpad, dtype=torch.int32)
    return inp


def _copy(inp):
    return {k: (v.clone() if k in ("k_cache", "v_cache") else v) for k, v in inp.items()}


def _run(inp, *, causal=False, window_size=(-1, -1), num_splits=0, interleaved=True, alibi=None, softcap=0.0,
         softmax_scale=None):
    """Runs the CPU backend and returns (out, lse, k_cache, v_cache), after checking
    out and lse against the float64 reference and the caches bit for bit."""
    ours = _copy(inp)
    with flashtriton.use_backend("cpu"):
        out, lse = flash_attn_with_kvcache(return_softmax_lse=True, causal=causal, window_size=window_size,
                                           num_splits=num_splits, rotary_interleaved=interleaved,
                                           alibi_slopes=alibi, softcap=softcap, softmax_scale=softmax_scale,
                                           **ours)
    cap = inp["k_cache"].shape[1] * (inp["block_table"].shape[1] if "block_table" in inp else 1)
    left, right = window_size[0], 0 if causal else window_size[1]
    left, right = (-1 if left >= cap else left), (-1 if right >= cap else right)
    scale = 1 / math.sqrt(inp["q"].shape[-1]) if softmax_scale is None else softmax_scale
    params = AttnParams(scale, left, right, softcap, 0.0)
    res = {}
    for cd in (torch.float64, inp["q"].dtype):
        r = _copy(inp)
        o, l = reference_decode.kvcache_fwd(r["q"], r["k_cache"], r["v_cache"], r.get("k"), r.get("v"),
                                            r.get("rotary_cos"), r.get("rotary_sin"), r["cache_seqlens"], None,
                                            r.get("cache_leftpad"), r.get("block_table"), params, interleaved,
                                            alibi, 0, compute_dtype=cd)
        res[cd] = (o, l, r["k_cache"], r["v_cache"])
    truth, lowp = res[torch.float64], res[inp["q"].dtype]
    dtype = inp["q"].dtype
    assert_close("out", out, truth[0], lowp[0], 2, dtype)
    assert_close("lse", lse, truth[1], lowp[1], 2, dtype)
    # the appended rows are the reference's (rotary in float32, rounded once)
    assert torch.equal(ours["k_cache"], truth[2]) and torch.equal(ours["v_cache"], truth[3])
    return out, lse, ours["k_cache"], ours["v_cache"]


@pytest.fixture
def ops_path(monkeypatch):
    """The torch-ops paths (lock-step and direct), which this file tests; the compiled
    kernel (the default) is tested in test_cpu_decode_compiled.py."""
    monkeypatch.setattr(config, "DECODE_PATH", "ops")


@pytest.fixture
def small_chunks(monkeypatch, ops_path):
    monkeypatch.setattr(config, "DECODE_CHUNK", 32)
    monkeypatch.setattr(config, "DECODE_DIRECT_CHUNK", 32)


@pytest.mark.parametrize("heads", [(8, 2), (4, 4), (6, 1)])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_contiguous_many_chunks(small_chunks, heads, dtype):
    inp = _inputs(3, 1, *heads, 64, dtype, 300, [0, 257, 131])
    _run(inp, num_splits=3)


@pytest.mark.parametrize("page", [1, 16, 64])
def test_paged_shuffled_pool_many_chunks(small_chunks, page):
    """Pages anywhere in the pool; chunks (32 positions) and splits cut pages."""
    inp = _inputs(2, 1, 8, 2, 64, torch.bfloat16, 256, [250, 77], page=page)
    _run(inp, num_splits=3)


@pytest.mark.parametrize("interleaved", [True, False])
@pytest.mark.parametrize("page", [0, 16])
def test_append_rotary(small_chunks, interleaved, page):
    inp = _inputs(2, 3, 8, 2, 64, torch.bfloat16, 192, [100, 0], snew=3, page=page, rotary_dim=32)
    _run(inp, causal=True, interleaved=interleaved, num_splits=2)
    _run(inp, causal=False, interleaved=interleaved, num_splits=2)  # queries all at position end


@pytest.mark.parametrize("sq", [2, 5])
def test_speculative_causal_gqa(small_chunks, sq):
    inp = _inputs(2, sq, 12, 4, 32, torch.float16, 160, [150, 40], snew=sq)
    _run(inp, causal=True, num_splits=4)


def test_leftpad_window_alibi_softcap(small_chunks):
    inp = _inputs(3, 2, 4, 2, 32, torch.float32, 200, [180, 60, 9], leftpad=[17, 60, 0])
    alibi = torch.rand(3, 4) * 0.2
    _run(inp, causal=True, window_size=(50, 0), alibi=alibi, softcap=6.0, num_splits=3)


def test_empty_and_tiny_caches(small_chunks):
    inp = _inputs(4, 1, 4, 1, 32, torch.bfloat16, 64, [0, 1, 0, 33])
    out, lse, _, _ = _run(inp, num_splits=8)
    assert torch.all(out[0] == 0) and torch.all(out[2] == 0)
    assert torch.all(torch.isinf(lse[0])) and torch.all(lse[0] > 0)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_splits_agree(small_chunks, dtype):
    """1, 3 and 8 splits (and the heuristic) give the same result to rounding."""
    inp = _inputs(2, 1, 8, 2, 64, dtype, 512, [500, 333])
    outs = [_run(inp, num_splits=s)[:2] for s in (1, 3, 8, 0)]
    tol = 2e-2 if dtype == torch.bfloat16 else 1e-5
    for o, l in outs[1:]:
        assert (o.double() - outs[0][0].double()).abs().max().item() <= tol
        assert (l - outs[0][1]).abs().max().item() <= 1e-5


def _twice_then_one_thread(inp, num_splits=4):
    """The same call twice with the default thread count, then once on one thread."""
    with flashtriton.use_backend("cpu"):
        a = flash_attn_with_kvcache(num_splits=num_splits, **_copy(inp))
        b = flash_attn_with_kvcache(num_splits=num_splits, **_copy(inp))
        old = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            c = flash_attn_with_kvcache(num_splits=num_splits, **_copy(inp))
        finally:
            torch.set_num_threads(old)
    return a, b, c


def test_repeatable_and_thread_counts_agree(small_chunks):
    """Bitwise repeatable for a fixed thread count; one thread and the default count
    agree to rounding (the splits are the same; only the split of work differs)."""
    inp = _inputs(2, 1, 8, 2, 64, torch.bfloat16, 400, [400, 250], page=16)
    a, b, c = _twice_then_one_thread(inp)
    assert torch.equal(a, b)
    assert (a.double() - c.double()).abs().max().item() <= 1e-2


def test_split_heuristic():
    """Splits give every intra-op thread a (split, KV head) item once the keys fill
    two chunks per split; the request wins when given."""
    from flashtriton.cpu.decode import num_splits_for
    chunk, threads = config.DECODE_CHUNK, torch.get_num_threads()
    long = 2 * chunk * threads
    assert num_splits_for(100, 0, 1) == 1              # too short to split
    assert num_splits_for(long, 0, 1) == threads       # MQA: the splits feed the threads
    assert num_splits_for(long, 0, threads) == 1       # the heads already do
    assert num_splits_for(100, 3, 8) == 3


def test_mqa_default_splits_match_one_split(small_chunks):
    inp = _inputs(1, 1, 4, 1, 64, torch.float32, 512, [500])
    a = _run(inp)[0]
    b = _run(inp, num_splits=1)[0]
    assert (a - b).abs().max().item() <= 1e-5


def test_default_chunks_long_cache(ops_path):
    """Default chunk size, a cache longer than several chunks, the heuristic splits."""
    inp = _inputs(1, 1, 16, 4, 128, torch.bfloat16, 5000, [4999], snew=1)
    _run(inp)


def _garbage_cache_inputs():
    """A paged step (page 16, lengths 70 and 5) whose caches hold NaN in unused pages and
    in the tail of sequence 0's last page: nothing a correct kernel reads."""
    inp = _inputs(2, 1, 4, 2, 32, torch.float32, 128, [70, 5], page=16)
    table = inp["block_table"]
    used = torch.zeros(inp["k_cache"].shape[0], dtype=torch.bool)
    for b, n in enumerate([70, 5]):
        used[table[b, :math.ceil(n / 16)].long()] = True
    for name in ("k_cache", "v_cache"):
        inp[name][~used] = float("nan")
        inp[name][table[0, 4].long(), 70 - 64:] = float("nan")   # tail of sequence 0's last page
    return inp


def test_cache_garbage_is_never_read(small_chunks):
    """NaN beyond the sequences (and in unused pages) must not leak into the output."""
    with flashtriton.use_backend("cpu"):
        out = flash_attn_with_kvcache(num_splits=2, **_copy(_garbage_cache_inputs()))
    assert torch.isfinite(out).all()


def test_direct_path_selection():
    """bf16 caches at the target shape (Hk = 8, G = 4) take the direct path
    (decode._attend_direct); float32 (lock-step, rows read in place), fp16 and wide
    block-diagonal weights (MHA with many KV heads) the lock-step path."""
    from flashtriton.cpu.decode import direct_ok
    assert direct_ok(torch.bfloat16, 8, 4) and direct_ok(torch.bfloat16, 1, 16)
    assert not direct_ok(torch.float32, 8, 4) and not direct_ok(torch.float16, 8, 4)
    assert not direct_ok(torch.bfloat16, 32, 1)


@pytest.mark.parametrize("in_place", [True, False])
@pytest.mark.parametrize("page", [0, 16])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_lock_step_paths_exact(small_chunks, monkeypatch, dtype, page, in_place):
    """The lock-step path on bf16 (direct path off) and float32 caches, one split
    (float32: rows read in place, or copied) and three (always copied)."""
    monkeypatch.setattr(config, "DECODE_DIRECT_MAX", 0)
    monkeypatch.setattr(config, "DECODE_FP32_IN_PLACE", in_place)
    inp = _inputs(2, 2, 8, 2, 64, dtype, 256, [250, 77], page=page)
    for splits in (1, 3):
        _run(inp, causal=True, num_splits=splits)
    _run(inp, window_size=(40, 0), alibi=torch.rand(2, 8) * 0.2, softcap=5.0, num_splits=1)


@pytest.mark.parametrize("seed", [9, 62, 0, 1])
@pytest.mark.parametrize("page", [0, 4])
def test_direct_bf16_scores_from_unscaled_q(ops_path, page, seed):
    """Regression: the direct path first folded softmax_scale * log2(e) into q before
    rounding it to bf16 for the bf16 score product, a second rounding the same-dtype
    PyTorch math does not make: out errors of 1 bf16 ulp, 2.3x the baseline's, failed
    test_kvcache's append case (and seeds 9 and 62 with pages here: 2 of 160 cases).
    W now holds q itself and the scale multiplies the float32 copy of the scores."""
    torch.manual_seed(seed)
    inp = _inputs(3, 1, 4, 2, 32, torch.bfloat16, 96, [0, 40, 95], snew=1, page=page)
    _run(inp, num_splits=2)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("page", [0, 16])
def test_regression_kvcache_scale_zero_bf16(small_chunks, page, causal):
    """Regression (session 35): softmax_scale=0.0 (valid: uniform attention over the visible cache
    positions) gave NaN out / lse from a bf16 cache on the direct path, which undid the scale folded
    into q by dividing by it (0 / 0). Speculative Sq = 3, an empty cache, several chunks."""
    inp = _inputs(3, 3, 8, 2, 64, torch.bfloat16, 96, [0, 40, 93], snew=1, page=page)
    _run(inp, causal=causal, softmax_scale=0.0)


def test_direct_long_cache_several_chunks(ops_path):
    """Default direct chunk, a cache of several chunks plus a ragged tail, GQA 4."""
    inp = _inputs(1, 1, 16, 4, 64, torch.bfloat16, 3 * config.DECODE_DIRECT_CHUNK + 77,
                  [3 * config.DECODE_DIRECT_CHUNK + 70], snew=2)
    _run(inp, causal=True)


@pytest.mark.parametrize("page", [0, 16])
def test_direct_leftpad_window_alibi_softcap(small_chunks, page):
    """The direct path (bf16) with every mask and bias: left padding, a causal window,
    ALiBi, softcap, speculative rows, several chunks and splits."""
    leftpad = None if page else [17, 60, 0]
    inp = _inputs(3, 2, 8, 2, 32, torch.bfloat16, 208, [180, 60, 9], leftpad=leftpad, page=page)
    alibi = torch.rand(3, 8) * 0.2
    _run(inp, causal=True, window_size=(50, 0), alibi=alibi, softcap=6.0, num_splits=3)
    _run(inp, window_size=(30, 20), alibi=alibi, num_splits=1)


@pytest.mark.parametrize("page", [0, 16])
def test_direct_path_float32_when_configured(small_chunks, monkeypatch, page):
    """The direct path is dtype-generic (float32 scores exact); float32 caches take it
    only when config.DECODE_DIRECT_DTYPES lists float32."""
    monkeypatch.setattr(config, "DECODE_DIRECT_DTYPES", (torch.bfloat16, torch.float32))
    inp = _inputs(2, 2, 8, 2, 64, torch.float32, 256, [250, 77], page=page)
    _run(inp, causal=True, alibi=torch.rand(2, 8) * 0.2, softcap=5.0, num_splits=3)
    _run(inp, window_size=(40, 7), num_splits=0)
