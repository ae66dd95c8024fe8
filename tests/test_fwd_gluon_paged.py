"""kernels/fwd_gluon.py VARLEN_PAGED (session 51): flash_attn_varlen_func(..., block_table=) on the Gluon VARLEN
forward, K / V read in place from a paged cache. Host side launchers/forward_gluon.fwd_varlen_paged, route
launchers.policy.gluon_fwd_paged (from launchers/forward_paged.fwd_paged).

CPU: the policy's contract; an offline sm_90a compile. GPU (Hopper): through the public API against float64 with
NaN in every cache row no sequence uses (the last tile's rows past a sequence are read by TMA: a kernel that lets
one reach its P V fails), pages in a random order, ragged lengths (last key tiles of 1, 64, 65, 128 keys), a
sequence without keys, Nq != Nk, GQA, D = 64 / 128, bf16 / fp16, plain and causal; bitwise the packed route's
output on the same keys; the route taken (spy); a launch plan's replay with another batch's table.
"""
import pytest
import torch

import flashtriton
from flashtriton import flash_attn_varlen_func, paged
from flashtriton.launchers import forward_gluon, policy
from flashtriton.launchers.common import AttnParams, Varlen

from conftest import DEVICE
from helpers import assert_close, cu_seqlens, offline_compile, rand_varlen, reference_pair, spy
from test_fwd_gluon import hopper


def _paged(k, v, lens_k, page):
    return paged.scatter_to_pages(k, v, lens_k, page, fill=float("nan"), spare_blocks=2)


# ---------------------------------------------------------------------------------------
# CPU
# ---------------------------------------------------------------------------------------
def test_policy_contract():
    """gluon_fwd_paged: never under the interpreter or on CPU tensors; the tables name plain / causal and head dims
    the VARLEN forward has (windows: (left, 0) only, session 51)."""
    q = torch.empty(4096, 4, 128, dtype=torch.bfloat16)
    kc = vc = torch.empty(40, 256, 2, 128, dtype=torch.bfloat16)
    table = torch.zeros(2, 20, dtype=torch.int32)
    vl = Varlen(cu_seqlens([2048, 2048], "cpu"), cu_seqlens([2048, 2048], "cpu"), 2048, 2048)
    assert not policy.gluon_fwd_paged(q, kc, vc, table, AttnParams(0.1), None, 128, vl)
    assert set(policy.GLUON_FWD_PAGED) <= {"plain", "causal", "window"}
    assert all(d in (64, 128) for t in policy.GLUON_FWD_PAGED.values() for d in t)


def test_policy_rules_off_the_interpreter(monkeypatch):
    """gluon_fwd_paged's rules with the interpreter and the GPU switch stubbed (CPU tensors stand in): a valid call
    passes; a page of 64 keys (a tile would straddle pages), a table without columns (the loader reads each
    sequence's first entry), a non-contiguous cache, ALiBi, dropout, a window with a right edge and fp32 do not."""
    monkeypatch.setattr(policy, "interpreting", lambda: False)
    monkeypatch.setattr(policy, "_warp_spec_switch", lambda q: True)
    vl = Varlen(cu_seqlens([2048, 2048], "cpu"), cu_seqlens([2048, 2048], "cpu"), 2048, 2048)
    q = torch.empty(4096, 4, 128, dtype=torch.bfloat16)
    kc = torch.empty(40, 256, 2, 128, dtype=torch.bfloat16)
    table = torch.zeros(2, 20, dtype=torch.int32)
    ok = dict(q=q, k_cache=kc, v_cache=kc, block_table=table, params=AttnParams(0.1), alibi=None, bd=128, varlen=vl)
    assert policy.gluon_fwd_paged(**ok)
    assert policy.gluon_fwd_paged(**dict(ok, params=AttnParams(0.1, 64, 0)))             # a window (64, 0)
    for bad in (dict(k_cache=torch.empty(80, 64, 2, 128, dtype=torch.bfloat16)),
                dict(block_table=torch.zeros(2, 0, dtype=torch.int32)),
                dict(v_cache=torch.empty(40, 256, 4, 128, dtype=torch.bfloat16)[:, :, :2]),
                dict(alibi=torch.rand(4)), dict(params=AttnParams(0.1, dropout_p=0.1)),
                dict(params=AttnParams(0.1, 64, 64)),
                dict(q=q.float(), k_cache=kc.float(), v_cache=kc.float())):
        assert not policy.gluon_fwd_paged(**dict(ok, **bad)), list(bad)


_COMPILE = r"""
import json, re, sys
sys.path.insert(0, sys.argv[1])
import gluon_fwd_compile as g
out = []
for d, causal in ((128, False), (128, True), (64, False)):
    c = g.compile_fwd(d, "bf16", causal=causal, varlen=True, varlen_fast=True, varlen_order=True,
                      varlen_tail=causal, varlen_half=not causal, page_size=256)
    r = g.report(c)
    text = g.sass(c)
    out.append(dict(loops=r["tile_loops"], spill=r["spill_bytes"], hgmma=r["hgmma"], hmma=r["hmma"],
                    local=len(re.findall(r"\b(?:LDL|STL)\b", text))))
print(json.dumps(out))
"""


def test_paged_compiles_offline():
    """sm_90a, no GPU: the VARLEN_PAGED kernels as routed (plain with VARLEN_HALF, causal with VARLEN_TAIL): HGMMA,
    no HMMA, the tile loops as the packed kernel's (under 800 SASS instructions a warp; a fifth counted where the
    half-width step's retry branch spans the masked loop), no spills, no local memory."""
    pytest.importorskip("triton.experimental.gluon")
    for r in offline_compile(_COMPILE):
        assert r["hgmma"] > 0 and r["hmma"] == 0, r
        assert len(r["loops"]) in (4, 5) and all(n < 800 for n in r["loops"][:4]), r
        assert r["spill"] == 0 and r["local"] == 0, r


# ---------------------------------------------------------------------------------------
# GPU
# ---------------------------------------------------------------------------------------
CASES = [
    # lens_q, lens_k, (H, Hk), D, dtype, page, causal
    ([1100, 300, 2049], [1100, 300, 2049], (4, 2), 128, torch.bfloat16, 256, False),
    ([1100, 300, 2049], [1100, 300, 2049], (4, 2), 128, torch.bfloat16, 256, True),
    ([300, 17, 129, 256], [448, 321, 129, 256], (4, 1), 128, torch.float16, 128, False),   # tiles of 64, 65, 1, 128
    ([1030, 0, 40], [700, 9, 1500], (4, 2), 128, torch.bfloat16, 512, True),              # Nq > Nk, empty queries
    ([600, 1, 113], [1500, 0, 1023], (4, 4), 128, torch.bfloat16, 256, False),            # Nq < Nk, no keys
    ([1500, 64], [3000, 64], (4, 2), 64, torch.bfloat16, 256, True),
    ([1500, 64], [3000, 64], (4, 2), 64, torch.float16, 128, False),
]


@pytest.fixture
def paged_on(monkeypatch):
    """Route every D = 64 / 128 paged forward here (the varlen table's lengths lowered to 1) and record the route."""
    kinds = ("plain", "causal", "window")
    monkeypatch.setattr(policy, "GLUON_FWD_VARLEN_MIN_N", {kind: {128: 1, 64: 1} for kind in kinds})
    monkeypatch.setattr(policy, "GLUON_FWD_PAGED", {kind: frozenset({64, 128}) for kind in kinds})
    return spy(monkeypatch, forward_gluon, "fwd_varlen_paged")


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("lens_q,lens_k,heads,d,dtype,page,causal", CASES)
def test_paged_matches_reference_gpu(paged_on, lens_q, lens_k, heads, d, dtype, page, causal):
    (q, k, v), varlen = rand_varlen(lens_q, lens_k, *heads, d, dtype, DEVICE)
    k_cache, v_cache, table = _paged(k, v, lens_k, page)
    out, lse, _ = flash_attn_varlen_func(q, k_cache, v_cache, *varlen, causal=causal, block_table=table,
                                         return_attn_probs=True)
    assert len(paged_on) == 1, "the call did not take the Gluon VARLEN_PAGED kernel"
    truth, lowp = reference_pair(q, k, v, varlen=varlen[:2], softmax_scale=d ** -0.5,
                                 window_right=0 if causal else -1)
    assert not torch.isnan(out).any() and not torch.isnan(lse).any(), "NaN: an unwritten row, or a cache row past " \
                                                                      "a sequence reached the P V"
    assert_close("out", out, truth["out"], lowp["out"], 2, dtype)
    assert_close("lse", lse, truth["lse"], lowp["lse"], 2, dtype)
    # the same keys packed: the Gluon VARLEN route's output, bitwise (the same tiles in the same order)
    packed = flash_attn_varlen_func(q, k, v, *varlen, causal=causal)
    assert torch.equal(out, packed)


@pytest.mark.gpu
@hopper
def test_paged_route_by_default_gpu(monkeypatch):
    """At the varlen table's length the default route takes the kernel for pages of whole tiles, a window (left, 0)
    included; not for a page of 64 (a tile would straddle pages), nor with a window's right edge or ALiBi."""
    calls = spy(monkeypatch, forward_gluon, "fwd_varlen_paged")
    n = max(policy.GLUON_FWD_VARLEN_MIN_N["plain"][128], policy.GLUON_FWD_VARLEN_MIN_N["causal"][128])
    (q, k, v), varlen = rand_varlen([n, 100], [n, 100], 4, 2, 128, torch.bfloat16, DEVICE)
    for page, kw, taken in ((256, dict(causal=True), "causal"), (256, dict(), "plain"), (64, dict(), None),
                            (256, dict(window_size=(64, 0)), "window"), (256, dict(window_size=(64, 64)), None),
                            (256, dict(alibi_slopes=torch.rand(4, device=DEVICE)), None)):
        k_cache, v_cache, table = _paged(k, v, [n, 100], page)
        before = len(calls)
        flash_attn_varlen_func(q, k_cache, v_cache, *varlen, block_table=table, **kw)
        want = (taken is not None and 128 in policy.GLUON_FWD_PAGED.get(taken, ())
                and n >= policy.GLUON_FWD_VARLEN_MIN_N.get(taken, {}).get(128, 1 << 30))
        assert len(calls) == before + int(want), (page, kw)


@pytest.mark.gpu
@hopper
def test_paged_plan_replay_gpu(paged_on, monkeypatch):
    """With launch plans on, the second paged call of a signature (other lengths and pages, the same totals and
    table shape) replays the first's launch with its own tensors: its own reference's result."""
    from flashtriton.launchers import plans
    monkeypatch.setenv("FLASHTRITON_PLANS", "1")
    plans.clear()
    (q, k, v), varlen = rand_varlen([1100, 300, 2049], [1100, 300, 2049], 4, 2, 128, torch.bfloat16, DEVICE)
    k_cache, v_cache, table = _paged(k, v, [1100, 300, 2049], 256)          # 16 pages + 2, rows of 9 entries
    flash_attn_varlen_func(q, k_cache, v_cache, *varlen, block_table=table)
    before = plans.stats["replayed"]
    (q2, k2, v2), varlen2 = rand_varlen([2100, 1300, 49], [2100, 1300, 49], 4, 2, 128, torch.bfloat16, DEVICE)
    k_cache2, v_cache2, table2 = _paged(k2, v2, [2100, 1300, 49], 256)      # the same: 16 + 2, 9 a row
    assert k_cache2.shape == k_cache.shape and table2.shape == table.shape
    out = flash_attn_varlen_func(q2, k_cache2, v_cache2, *varlen2, block_table=table2)
    assert plans.stats["replayed"] == before + 1, "the second call did not replay"
    truth, lowp = reference_pair(q2, k2, v2, varlen=varlen2[:2], softmax_scale=128 ** -0.5)
    assert_close("out", out, truth["out"], lowp["out"], 2, torch.bfloat16)


WINDOW_CASES = [
    # lens_q, lens_k, (H, Hk), D, page, window (left, 0)
    ([1100, 300, 2049], [1100, 300, 2049], (4, 2), 128, 256, (1000, 0)),
    ([1030, 0, 40, 17], [700, 9, 1500, 17], (4, 1), 128, 128, (64, 0)),   # Nq > Nk, Nq < Nk, an empty sequence
    ([1500, 64], [3000, 64], (4, 2), 64, 512, (300, 0)),
]


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("lens_q,lens_k,heads,d,page,window", WINDOW_CASES)
def test_paged_window_matches_reference_gpu(paged_on, lens_q, lens_k, heads, d, page, window):
    """A sliding window (left, 0) over a paged cache (session 51): the loader's tiles start at the band's first
    key tile (key0), the last one's rows past the sequence zeroed; against float64 and bitwise the packed route's."""
    (q, k, v), varlen = rand_varlen(lens_q, lens_k, *heads, d, torch.bfloat16, DEVICE)
    k_cache, v_cache, table = _paged(k, v, lens_k, page)
    out = flash_attn_varlen_func(q, k_cache, v_cache, *varlen, window_size=window, block_table=table)
    assert len(paged_on) == 1, "the call did not take the Gluon VARLEN_PAGED kernel"
    truth, lowp = reference_pair(q, k, v, varlen=varlen[:2], softmax_scale=d ** -0.5, window_left=window[0],
                                 window_right=0)
    assert not torch.isnan(out).any()
    assert_close("out", out, truth["out"], lowp["out"], 2, torch.bfloat16)
    assert torch.equal(out, flash_attn_varlen_func(q, k, v, *varlen, window_size=window))
