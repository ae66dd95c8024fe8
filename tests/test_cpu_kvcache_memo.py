"""The CPU backend's step memo in flash_attn_with_kvcache (kvcache._CpuStep, session 45): a call
whose tensor signature and options were seen before replays the long way's AttnParams and calls
cpu.kvcache_fwd directly, skipping the structure and option checks. Held here: a replay gives
bitwise the long way's results (out, lse and the caches after an append) on the compiled kernel
and on the torch-ops paths; every property outside the key is read again (values of the index
tensors and the caches, the value checks' switch, the decode path setting, the backend); every
keyed property (shape, strides, dtype, alignment, options and their types) takes the long way
when it changes; and a bad call after a replay raises the long way's error before any work.
"""
import contextlib

import pytest
import torch

import flashtriton
from flashtriton import backends, flash_attn_with_kvcache, kvcache

from conftest import DEVICE
from test_cpu_decode import _copy, _inputs

pytestmark = pytest.mark.skipif(not backends.cpu_available() or DEVICE != "cpu", reason="CPU backend tests")

if backends.cpu_available():
    from flashtriton.cpu import config, decode


@pytest.fixture
def spy(monkeypatch):
    """An empty memo, and counters of the structure checks, the long ways (their AttnParams) and the
    CPU replays."""
    monkeypatch.setattr(kvcache, "_STRUCTURES", {})
    counts = {"checks": 0, "long": 0, "replays": 0}
    check, replay, params = kvcache._check_structure, kvcache._replay_cpu_step, kvcache._attn_params

    def counted_check(*a):
        counts["checks"] += 1
        return check(*a)

    def counted_replay(*a):
        counts["replays"] += 1
        return replay(*a)

    def counted_params(*a):
        counts["long"] += 1
        return params(*a)

    monkeypatch.setattr(kvcache, "_check_structure", counted_check)
    monkeypatch.setattr(kvcache, "_attn_params", counted_params)
    monkeypatch.setattr(kvcache, "_replay_cpu_step", counted_replay)
    return counts


@contextlib.contextmanager
def _cold():
    """The long way for every call inside (an empty memo, the outer one restored after)."""
    saved = kvcache._STRUCTURES
    kvcache._STRUCTURES = {}
    try:
        yield
    finally:
        kvcache._STRUCTURES = saved


def _call(inp, **kw):
    """(out, lse, k_cache, v_cache) of a CPU call on inp's own tensors (an append mutates them)."""
    with flashtriton.use_backend("cpu"):
        out, lse = flash_attn_with_kvcache(return_softmax_lse=True, **inp, **kw)
    return out, lse, inp["k_cache"], inp["v_cache"]


def _same(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x.dtype == y.dtype and x.shape == y.shape and torch.equal(x, y)


CASES = {
    "plain": (dict(), dict()),
    "gqa_fp32": (dict(dtype=torch.float32), dict()),
    "paged": (dict(page=16), dict(causal=True)),
    "leftpad_window": (dict(leftpad=[3, 0]), dict(window_size=(40, 0))),
    "append_rotary": (dict(snew=2, rotary_dim=32, sq=2), dict(causal=True)),
    "append_paged": (dict(snew=3, page=16), dict()),
    "splits_scale": (dict(), dict(num_splits=3, softmax_scale=0.3)),
    "softcap": (dict(), dict(softcap=5.0)),               # in the compiled kernel since session 62 (ops before)
    "alibi_2d": (dict(), dict(alibi_slopes=torch.linspace(0.05, 0.4, 16).view(2, 8))),   # likewise
}


def _case_inputs(name):
    shape, kw = CASES[name]
    shape = dict(shape)
    dtype, sq = shape.pop("dtype", torch.bfloat16), shape.pop("sq", 1)
    return _inputs(2, sq, 8, 2, 64, dtype, 160, [100, 37], **shape), kw


@pytest.mark.parametrize("path", ["compiled", "ops"])
@pytest.mark.parametrize("name", list(CASES))
def test_cpu_step_memo_replays_bitwise(monkeypatch, spy, name, path):
    """A call seen before goes through _replay_cpu_step (no structure check) and gives bitwise
    the long way's out, lse and appended caches, on new values of the same signature too
    (another q, other cache contents, other cache_seqlens)."""
    monkeypatch.setattr(config, "DECODE_PATH", path)
    inp, kw = _case_inputs(name)
    want = _call(_copy(inp), **kw)                 # the long way: stores the step
    assert spy == {"checks": 1, "long": 1, "replays": 0}
    got = _call(_copy(inp), **kw)
    assert spy == {"checks": 1, "long": 1, "replays": 1}
    _same(got, want)
    if "k" not in inp:
        assert decode.LAST_PATH.startswith(path)
    # new values under the same signature: the replay equals a cold call on them
    other = _copy(inp)
    other["q"] = torch.randn_like(inp["q"])
    other["k_cache"].mul_(0.5)
    other["cache_seqlens"] = torch.tensor([57, 120], dtype=torch.int32)
    got = _call(_copy(other), **kw)
    assert spy["replays"] == 2
    with _cold():
        want = _call(_copy(other), **kw)
    _same(got, want)


def test_cpu_step_memo_decode_loop(spy):
    """A decode loop appending one token a step (cache_seqlens growing, rotary, causal): every step
    after the first replays, and each equals a cold call on a copy of the same state."""
    inp = _inputs(2, 1, 8, 2, 64, torch.bfloat16, 64, [5, 9], snew=1, rotary_dim=32)
    for step in range(6):
        inp["k"], inp["v"] = torch.randn_like(inp["k"]), torch.randn_like(inp["v"])
        before = _copy(inp)
        got = _call(inp, causal=True)
        with _cold():
            want = _call(before, causal=True)
        _same(got, want)
        inp["cache_seqlens"] = inp["cache_seqlens"] + 1
    assert spy["replays"] == 5


def test_cpu_step_memo_keyed_properties(spy):
    """Each keyed property takes the long way (no replay) and the right result: another dtype, shape
    or stride of a tensor, a misaligned cache base (a structure check each: new signatures), each
    option (the signature's structure remembered, a step of its own); a different backend never sees
    the CPU's steps."""
    inp = _inputs(2, 1, 8, 2, 64, torch.bfloat16, 160, [100, 37])
    _call(_copy(inp))
    assert spy == {"checks": 1, "long": 1, "replays": 0}
    variants = []
    variants.append((dict(inp, k_cache=inp["k_cache"].float(), v_cache=inp["v_cache"].float(), q=inp["q"].float()),
                     {}))
    variants.append((dict(inp, k_cache=inp["k_cache"][:, :150], v_cache=inp["v_cache"][:, :150]), {}))
    wide = [torch.zeros(2, 160, 2, 80, dtype=torch.bfloat16) for _ in range(2)]
    for w, name in zip(wide, ("k_cache", "v_cache")):
        w[..., :64] = inp[name]
    variants.append((dict(inp, k_cache=wide[0][..., :64], v_cache=wide[1][..., :64]), {}))      # other strides
    shifted = [torch.empty(inp["k_cache"].numel() + 1, dtype=torch.bfloat16)[1:].view(inp["k_cache"].shape)
               .copy_(inp[n]) for n in ("k_cache", "v_cache")]
    variants.append((dict(inp, k_cache=shifted[0], v_cache=shifted[1]), {}))                      # alignment
    for kw in (dict(causal=True), dict(window_size=(20, -1)), dict(softcap=2.0), dict(softmax_scale=0.5),
               dict(num_splits=2), dict(rotary_interleaved=False)):
        variants.append((inp, kw))
    for i, (v, kw) in enumerate(variants):         # (no append: the caches are read only, passed as they are)
        checks, long = spy["checks"], spy["long"]
        got = _call(dict(v), **kw)
        assert spy["checks"] == checks + (not kw) and spy["long"] == long + 1 and spy["replays"] == 0, i
        with _cold():
            want = _call(dict(v), **kw)
        _same(got, want)
    replays = spy["replays"]
    with flashtriton.use_backend("cpu"):
        out = flash_attn_with_kvcache(**_copy(inp))               # return_softmax_lse=False: a step of its own
        assert spy["replays"] == replays
        again = flash_attn_with_kvcache(**_copy(inp))
        assert spy["replays"] == replays + 1 and torch.equal(out, again)
    with flashtriton.use_backend("reference"):
        ref = flash_attn_with_kvcache(**_copy(inp))
    assert spy["replays"] == replays + 1 and ref.shape == out.shape


def test_cpu_step_memo_reads_settings_each_call(monkeypatch, spy):
    """What the key leaves out is read by the replay: the decode path (config.DECODE_PATH), the
    cache contents updated in place, and the value checks' switch."""
    inp = _inputs(2, 1, 8, 2, 64, torch.bfloat16, 160, [100, 37])
    _call(_copy(inp))
    got = _call(_copy(inp))
    assert decode.LAST_PATH.startswith("compiled") and spy["replays"] == 1
    monkeypatch.setattr(config, "DECODE_PATH", "ops")
    ops = _call(_copy(inp))
    assert decode.LAST_PATH == "ops" and spy["replays"] == 2
    with _cold():
        _same(ops, _call(_copy(inp)))
    monkeypatch.setattr(config, "DECODE_PATH", "compiled")
    caches = _copy(inp)
    _call(caches)
    caches["v_cache"][:, :10].add_(1.0)             # in place, same tensors
    got = _call(caches)
    with _cold():
        _same(got, _call(_copy(caches)))
    bad = dict(inp, cache_seqlens=torch.tensor([100, 161], dtype=torch.int32))
    with kvcache.value_checks(False):
        _call(_copy(inp))
    with pytest.raises(ValueError, match="cache_seqlens: entry 1 is 161 > the cache capacity 160"):
        _call(_copy(bad))
    monkeypatch.setenv("FLASHTRITON_KVCACHE_CHECKS", "0")
    with pytest.raises(ValueError, match="cache_seqlens: entry 1 is 161"):
        with kvcache.value_checks(True):
            _call(_copy(bad))


def test_cpu_step_memo_bad_input_after_hit(spy):
    """After a replay, bad input raises the long way's error every time (nothing failing is
    remembered): wrong dtypes and strides (new signatures), out-of-range values under the
    remembered signature (the value checks run on every replay), options of a wrong type or
    range beside a remembered equal value."""
    inp = _inputs(2, 1, 8, 2, 64, torch.bfloat16, 160, [100, 37], snew=1, rotary_dim=32)
    paged = _inputs(2, 1, 8, 2, 64, torch.bfloat16, 160, [100, 37], page=16)
    for case in (inp, paged):
        _call(_copy(case), causal=True)
        _call(_copy(case), causal=True)
    assert spy["replays"] == 2

    def call(case=inp, **kw):
        return _call(_copy(dict(case, **kw)), causal=True)

    bad_table = paged["block_table"].clone()
    bad_table[1, 0] = 10 ** 6
    for _ in range(2):
        with pytest.raises(TypeError, match="k_cache: dtype torch.float32 differs"):
            call(k_cache=inp["k_cache"].float())
        with pytest.raises(ValueError, match="the last \\(headdim\\) dimension must have stride 1"):
            call(k_cache=inp["k_cache"].transpose(1, 3).contiguous().transpose(1, 3))
        with pytest.raises(ValueError, match="would end at 161 > the cache capacity 160"):
            call(cache_seqlens=torch.tensor([10, 160], dtype=torch.int32))
        with pytest.raises(ValueError, match="cache_seqlens: entry 0 is -1; must be >= 0"):
            call(cache_seqlens=torch.tensor([-1, 4], dtype=torch.int32))
        with pytest.raises(ValueError, match="block_table: entry \\[1, 0\\] is 1000000"):
            call(paged, block_table=bad_table)
        with pytest.raises(ValueError, match="rotary_cos: has 10 positions"):
            call(rotary_cos=inp["rotary_cos"][:10], rotary_sin=inp["rotary_sin"][:10])
        with flashtriton.use_backend("cpu"):
            with pytest.raises(TypeError, match="causal: must be a bool, got int"):
                flash_attn_with_kvcache(**_copy(inp), causal=1)
            with pytest.raises(ValueError, match="num_splits: must be an int"):
                flash_attn_with_kvcache(**_copy(inp), causal=True, num_splits=True)
            with pytest.raises(ValueError, match="num_splits: must be an int"):
                flash_attn_with_kvcache(**_copy(inp), causal=True, num_splits=-1)
            with pytest.raises(ValueError, match="window_size: must be a pair"):
                flash_attn_with_kvcache(**_copy(inp), window_size=(1.0, -1))
            with pytest.raises(ValueError, match="softcap: must be a finite float"):
                flash_attn_with_kvcache(**_copy(inp), causal=True, softcap=-1.0)
            with pytest.raises(TypeError, match="cache_seqlens: dtype"):
                flash_attn_with_kvcache(**_copy(dict(inp, cache_seqlens=inp["cache_seqlens"].long())), causal=True)
    assert spy["replays"] == 2 + 2 * 3       # the three value-check cases replayed, raised in the checks


def test_cpu_step_memo_not_kept(spy):
    """No step where the long way copies an index tensor (a strided cache_seqlens) or for a zero
    of either sign in softmax_scale / softcap (they compare equal in a key but the step replays
    the first call's AttnParams); those calls take the long way every time, with right results."""
    inp = _inputs(2, 1, 8, 2, 64, torch.bfloat16, 160, [100, 37])
    lens = torch.tensor([100, 0, 37, 0], dtype=torch.int32)[::2]
    got = [_call(_copy(dict(inp, cache_seqlens=lens))) for _ in range(3)]
    for kw in (dict(softcap=-0.0), dict(softcap=0.0, softmax_scale=0.0), dict(softmax_scale=-0.0)):
        for _ in range(2):
            _call(_copy(inp), **kw)
    assert spy["replays"] == 0
    want = _call(_copy(inp))
    for g in got:
        _same(g, want)
    assert kvcache._options_key(None, False, (-1, -1), -0.0, True, None, 0, False) is None
    assert kvcache._options_key(0.0, False, (-1, -1), 0.0, True, None, 0, False) is None
    assert kvcache._options_key(None, False, (-1, -1), 0.0, True, None, 0, False) is not None
