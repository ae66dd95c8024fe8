"""The compiled CPU decode's host side (session 56): the kernel's own derivation of the key
ranges and the split count from the index tensors (ft_decode_lens) against the rule written
out in Python here and fed to ft_decode (bitwise: the same ranges and splits give the same
bits), and the launch constants a CPU step holds (cpu/decode.py's CompiledLaunch, kept by
kvcache.py's _CpuStep): built once, rebuilt when a setting it depends on changes."""
import ctypes
import math

import pytest
import torch

import flashtriton
from flashtriton import backends, flash_attn_with_kvcache

from conftest import DEVICE
from test_cpu_decode import _copy, _inputs

pytestmark = pytest.mark.skipif(not backends.cpu_available() or DEVICE != "cpu", reason="CPU backend tests")

if backends.cpu_available():
    from flashtriton.cpu import config, decode
    from flashtriton.kvcache import _attn_params


def _ranges(n, sq, left, right):
    """Query i of a sequence with nb keys sees [lo, hi): i + nb - Sq - left <= j <= i + nb - Sq +
    right, 0 <= j < nb (a negative bound: unbounded); klo / khi the keys some query sees."""
    rlo, rhi = [], []
    for nb in n:
        nb = max(nb, 0)
        for i in range(sq):
            rlo.append(max(0, i + nb - sq - left) if left >= 0 else 0)
            rhi.append(min(nb, i + nb - sq + right + 1) if right >= 0 else nb)
    return rlo, rhi, rlo[::sq], rhi[sq - 1::sq]


def _by_python_rule(launch, inp, snew, num_splits, out, lse):
    """The kernel through ft_decode with the meta array and the split count built in Python
    (the host code before session 56)."""
    q, kc, vc = inp["q"], inp["k_cache"], inp["v_cache"]
    batch, sq = q.shape[:2]
    lens = inp["cache_seqlens"].tolist()
    starts = inp["cache_leftpad"].tolist() if "cache_leftpad" in inp else [0] * batch
    n = [e + snew - s for e, s in zip(lens, starts)]
    rlo, rhi, klo, khi = _ranges(n, sq, launch.left, launch.right)
    width = max(h - l_ for l_, h in zip(klo, khi))
    threads = torch.get_num_threads()
    splits = num_splits or max(1, min(-(-config.DECODE_ITEMS_PER_THREAD * threads // batch),
                                      width // config.DECODE_MIN_PIECE))
    paged = "block_table" in inp
    vals = [*starts, *([0] * batch if paged else range(batch)), *klo, *khi, *rlo, *rhi]
    es, ks, os_, qs = launch.es, launch.k_bytes, launch.out_bytes, q.stride()
    work = torch.empty(batch * splits * launch.hk * launch.padded * (launch.d + 16))
    table = inp.get("block_table")
    rc = launch.lib.ft_decode(
        kc.data_ptr(), vc.data_ptr(), *ks, launch.page_rows if paged else 0, table.data_ptr() if paged else None,
        table.stride(0) if paged else 0, (ctypes.c_int64 * len(vals))(*vals), q.data_ptr(), qs[0] * es, qs[1] * es,
        qs[2] * es, launch.scale, batch, launch.hk, sq, launch.group, launch.padded, launch.d, splits,
        launch.ek, work.data_ptr(), out.data_ptr(), *os_, lse.data_ptr(), threads, launch.amx)
    assert rc == 0


CASES = [  # (batch, sq, heads, Hk, lens, capacity, window (left, right), leftpad, snew, page, num_splits)
    (3, 1, 8, 2, [300, 0, 77], 320, (-1, -1), None, 0, 0, 0),
    (3, 1, 8, 2, [300, 5, 77], 320, (-1, -1), None, 0, 0, 3),
    (2, 3, 4, 4, [250, 129], 256, (40, 0), None, 0, 0, 0),
    (2, 4, 8, 1, [200, 3], 256, (-1, 0), [17, 0], 0, 0, 0),
    (3, 2, 8, 2, [90, 150, 33], 160, (10, 2), [0, 60, 1], 2, 0, 0),
    (2, 1, 8, 2, [1000, 640], 1024, (-1, -1), None, 0, 64, 0),
    (2, 2, 8, 2, [1000, 639], 1024, (-1, 0), None, 3, 64, 0),      # appended into pages, one crossing
    (1, 1, 32, 8, [4096], 4096, (-1, -1), None, 0, 0, 0),
    (3, 1, 8, 2, [3000, 2900, 2500], 3072, (-1, -1), None, 0, 0, 0),   # ceil(items x threads / B) splits
]


@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_kernel_key_ranges_match_python_rule(case, dtype, monkeypatch):
    monkeypatch.setattr(config, "DECODE_PATH", "compiled")
    batch, sq, h, hk, lens, cap, window, leftpad, snew, page, splits = CASES[case]
    torch.manual_seed(case)
    inp = _inputs(batch, sq, h, hk, 64, dtype, cap, lens, page=page, leftpad=leftpad)
    left, right = window
    params = _attn_params(1 / math.sqrt(64), left, right, 0.0)
    q = inp["q"]
    out = torch.full_like(q, float("nan"))
    lse = torch.full((batch, h, sq), float("nan"))
    launch = decode.compiled_launch(q, inp["k_cache"], inp["v_cache"], params, None, out)
    assert launch is not None
    hk = inp["k_cache"].shape[2]
    k_new = torch.randn(batch, snew, hk, 64, dtype=dtype) if snew else None
    v_new = torch.randn(batch, snew, hk, 64, dtype=dtype) if snew else None
    launch.run(q, inp["k_cache"], inp["v_cache"], inp["cache_seqlens"], inp.get("cache_leftpad"), None,
               inp.get("block_table"), k_new, v_new, splits, out, lse)
    for i in range(snew):        # the kernel wrote the new tokens at lens[b] + i (pages: through the table)
        for b, n in enumerate(lens):
            pos = n + i
            if page:
                blk, slot = int(inp["block_table"][b, pos // page]), pos % page
            else:
                blk, slot = b, pos
            assert torch.equal(inp["k_cache"][blk, slot], k_new[b, i])
            assert torch.equal(inp["v_cache"][blk, slot], v_new[b, i])
    want, want_lse = torch.full_like(out, float("nan")), torch.full_like(lse, float("nan"))
    _by_python_rule(launch, inp, snew, splits, want, want_lse)      # (over the caches as the kernel left them)
    assert not out.isnan().any() and not lse.isnan().any()
    assert torch.equal(out, want) and torch.equal(lse, want_lse)


def test_cpu_step_holds_its_launch(monkeypatch):
    """A replay reuses the step's CompiledLaunch (compiled_ok is not asked again, its constants
    are not packed again); a change of a setting the launch was chosen under (config.DECODE_AMX
    here) rebuilds it; the thread count is read every call. Outputs bitwise those of the long
    way each time."""
    monkeypatch.setattr(config, "DECODE_PATH", "compiled")
    monkeypatch.setattr(config, "DECODE_AMX", "off")
    asked, packed = [], []
    real = decode.compiled_ok
    monkeypatch.setattr(decode, "compiled_ok", lambda *a: asked.append(1) or real(*a))
    real_pack = decode.CompiledLaunch._pack
    monkeypatch.setattr(decode.CompiledLaunch, "_pack", lambda self, *a: packed.append(1) or real_pack(self, *a))
    torch.manual_seed(0)
    inp = _inputs(2, 1, 8, 2, 128, torch.bfloat16, 600, [520, 131])

    def call():
        with flashtriton.use_backend("cpu"):
            return flash_attn_with_kvcache(return_softmax_lse=True, **_copy(inp))
    first = call()
    assert len(asked) == 1 and len(packed) == 1
    again = call()       # the held launch: its constants packed once (session 57, ft_decode_packed)
    assert len(asked) == 1 and len(packed) == 1 and all(torch.equal(a, b) for a, b in zip(first, again))
    monkeypatch.setattr(config, "DECODE_AMX", "auto")      # another setting: the launch is rebuilt
    rebuilt = call()
    assert len(asked) == 2 and len(packed) == 2
    call()
    assert len(asked) == 2 and len(packed) == 2
    assert all(torch.equal(a, b) for a, b in zip(first, rebuilt))  # (no AMX here or not: the same kernel's bits)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = call()
        assert len(asked) == 2
        fresh = decode.kvcache_fwd(inp["q"], inp["k_cache"], inp["v_cache"], None, None, None, None,
                                   inp["cache_seqlens"], None, None, None, _attn_params(1 / math.sqrt(128), -1, -1, 0.0),
                                   True, None, 0)
        assert all(torch.equal(a, b) for a, b in zip(one, fresh))
    finally:
        torch.set_num_threads(threads)
