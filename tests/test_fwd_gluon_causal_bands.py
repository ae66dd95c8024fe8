"""kernels/fwd_gluon.py CAUSAL_BANDS (session 33, a helper, offline; not routed:
policy.GLUON_FWD_CAUSAL_BANDS empty): the CAUSAL forward one block a CTA with the CTAs' linear
ids mapped through PERSISTENT's banded heaviest-first order (_tile_of), bands of
forward_gluon.one_block_band() batch x heads; the model behind it: bench/wip/gluon-causal-d128-gap.md.

CPU: the order (a Python mirror of _tile_of, checked against the kernel's own lines) is a
permutation of the blocks, heaviest first inside each band; one_block_band divides B * H and stays
within causal_band; prepare's validation (check_causal_bands); launch arguments through a recorder
(CAUSAL_BANDS and band only when asked; the grid unchanged; fwd_into ignores it where it does not
apply); the route (off by default; on, fwd_into gets causal_bands=True for one-block causal calls);
an offline sm_90a compile: 0 spills, the one-block CAUSAL kernel's tile loops and shared memory.
GPU (Hopper): bitwise the one-block kernel's outputs (bands 1, 2, 3 and the default; GQA, Nq != Nk
both ways, B * H not a multiple of the band) and float64 against the reference; the library's
route with the switch on, bitwise the route with it off.
"""
import contextlib
import inspect
import json
import os
import subprocess
import sys

import pytest
import torch

from flashtriton.kernels import fwd_gluon
from flashtriton.launchers import forward_gluon, plans, policy
from flashtriton.launchers.forward_gluon import attention_fwd_gluon

from conftest import DEVICE
from helpers import rand_qkv
from test_fwd_gluon import check, hopper


def tile_of(tile, n_m, n_bh, band):
    """kernels/fwd_gluon.py _tile_of (CAUSAL), line by line."""
    span = n_m * band
    first = (tile // span) * band
    width = min(band, n_bh - first)
    r = tile - (tile // span) * span
    return n_m - 1 - r // width, first + r % width


def test_mirror_matches_the_kernel_source():
    src = inspect.getsource(fwd_gluon._tile_of.fn if hasattr(fwd_gluon._tile_of, "fn") else fwd_gluon._tile_of)
    for line in ("span = n_m * band", "first = (tile // span) * band", "width = gl.minimum(band, n_bh - first)",
                 "r = tile - (tile // span) * span", "pid_m = n_m - 1 - r // width", "pid_bh = first + r % width"):
        assert line in src, line
    kern = inspect.getsource(fwd_gluon)
    assert ("pid_m, pid_bh = _tile_of(gl.program_id(1) * gl.num_programs(0) + gl.program_id(0), gl.num_programs(0),"
            in kern)


@pytest.mark.parametrize("n_m, n_bh, band", [(16, 128, 16), (32, 64, 8), (64, 32, 4), (128, 16, 2), (5, 7, 3),
                                             (4, 6, 1), (3, 5, 5), (8, 3, 2)])
def test_order_is_a_permutation_heaviest_first_per_band(n_m, n_bh, band):
    seq = [tile_of(i, n_m, n_bh, band) for i in range(n_m * n_bh)]
    assert sorted(seq) == [(m, bh) for m in range(n_m) for bh in range(n_bh)]
    for start in range(0, n_bh, band):
        heads = set(range(start, min(n_bh, start + band)))
        part = [(m, bh) for m, bh in seq if bh in heads]
        assert [m for m, _ in part] == sorted((m for m, _ in part), reverse=True)
        lo = seq.index(part[0])
        assert seq[lo:lo + len(part)] == part                # a band's blocks are consecutive


def _props(monkeypatch, l2=50 << 20):
    monkeypatch.setattr(torch.cuda, "get_device_properties",
                        lambda dev: type("P", (), dict(multi_processor_count=132, L2_cache_size=l2))())
    forward_gluon._L2.clear()


@pytest.mark.parametrize("n, n_bh, want", [(1024, 256, 32), (2048, 128, 16), (4096, 64, 8), (8192, 32, 4),
                                           (16384, 16, 2), (2048, 7, 7), (4096, 30, 10)])
def test_one_block_band(monkeypatch, n, n_bh, want):
    _props(monkeypatch)
    dev = torch.device("cuda", 0)
    band = forward_gluon.one_block_band(dev, n, 128, 1, 2, n_bh)
    assert band == want and n_bh % band == 0
    assert band <= forward_gluon.causal_band(dev, n, 128, 1, 2, n_bh)
    forward_gluon._L2.clear()


@pytest.mark.parametrize("kw, msg", [
    (dict(causal_bands=True), "causal_bands=True"),
    (dict(causal_bands=True, causal=True, persistent=True), "causal_bands=True"),
    (dict(causal_bands=True, causal=True, pingpong=True), "causal_bands=True"),
    (dict(causal_bands=1, causal=True), "causal_bands: expected a bool"),
    (dict(causal_bands=True, window=(-1, 5)), "causal_bands=True"),
])
def test_rejects(kw, msg):
    with pytest.raises(ValueError, match=msg):
        attention_fwd_gluon(*rand_qkv(1, 256, 256, 2, 2, 128, torch.bfloat16, "cpu"), 0.1, **kw)


def test_rejects_three_consumers():
    with pytest.raises(ValueError, match="causal_bands=True"):
        attention_fwd_gluon(*rand_qkv(1, 384, 384, 2, 2, 64, torch.bfloat16, "cpu"), 0.1, causal=True,
                            causal_bands=True, num_consumers=3)


@pytest.mark.parametrize("kw", [dict(causal=True, causal_bands=True), dict(causal=True, causal_bands=True, band=3),
                                dict(window=(-1, 0), causal_bands=True)])
def test_valid_call_reaches_the_device_check(kw):
    with pytest.raises(ValueError, match=r"needs a CUDA \(Hopper\) device|needs compute capability 9"):
        attention_fwd_gluon(*rand_qkv(1, 256, 256, 2, 2, 128, torch.bfloat16, "cpu"), 0.1, **kw)


def _recorded(monkeypatch, d=128, b=2, nq=512, nk=512, h=4, hk=2, **kw):
    got = []
    monkeypatch.setattr(torch.cuda, "device", lambda device: contextlib.nullcontext())
    monkeypatch.setattr(forward_gluon.plans, "launch", lambda kernel, grid, *a, **k: got.append((grid, a, k)))
    _props(monkeypatch)
    monkeypatch.setattr(forward_gluon, "_l2_bytes", lambda device: 50 << 20)
    q, k, v = rand_qkv(b, nq, nk, h, hk, d, torch.bfloat16, "cpu")
    o = torch.empty_like(q)
    lse = torch.empty(b, h, nq, dtype=torch.float32)
    forward_gluon.fwd_into(q, k, v, o, lse, 0.0625, **kw)
    forward_gluon._L2.clear()
    assert len(got) == 1
    return got[0]


def test_launch_arguments(monkeypatch):
    grid, args, kw = _recorded(monkeypatch, causal=True, causal_bands=True)
    assert kw["CAUSAL_BANDS"] is True and kw["CAUSAL"] is True and kw["PERSISTENT"] is False
    assert grid == (4, 8)                                   # unchanged: (n_m, B * H)
    assert args[11] == 8                                    # band: one_block_band (8 heads' K / V far under the L2)
    grid0, args0, kw0 = _recorded(monkeypatch, causal=True)
    assert "CAUSAL_BANDS" not in kw0 and args0[11] == 1 and grid0 == grid
    assert args[5:11] == args0[5:11]                        # nq, nk, h, group, qk_scale, batch
    _, args2, _ = _recorded(monkeypatch, causal=True, causal_bands=True, b=3, h=5, hk=5)
    assert args2[11] == 15                                  # 15 heads far under the L2: one band
    assert {x: y for x, y in kw.items() if x != "CAUSAL_BANDS"} == kw0


@pytest.mark.parametrize("kw", [dict(causal_bands=True), dict(causal=True, persistent=True, causal_bands=True),
                                dict(window=(64, 0), causal_bands=True)])
def test_fwd_into_ignores_it_elsewhere(monkeypatch, kw):
    _, _, k = _recorded(monkeypatch, **kw)
    assert "CAUSAL_BANDS" not in k


def test_fwd_into_ignores_it_with_three_consumers(monkeypatch):
    _, _, k = _recorded(monkeypatch, d=64, nq=768, nk=768, causal=True, num_consumers=3, causal_bands=True)
    assert "CAUSAL_BANDS" not in k and k["NUM_CONSUMERS"] == 3


def test_not_routed_by_default():
    assert policy.GLUON_FWD_CAUSAL_BANDS == {}
    assert not policy.gluon_fwd_causal_bands(128, 16384, 16384)


@pytest.mark.parametrize("table, want", [({}, False), ({128: 2048}, True), ({128: 4096}, False), ({64: 2048}, False)])
def test_route_switch(monkeypatch, table, want):
    from flashtriton import flash_attn_func
    import flashtriton
    from flashtriton.launchers import forward

    monkeypatch.setattr(policy, "GLUON_FWD_CAUSAL_BANDS", table)
    monkeypatch.setattr(forward, "gluon_fwd", lambda *a: True)
    monkeypatch.setattr(forward, "gluon_fwd_persistent", lambda causal: False)
    plans.clear()
    got = []

    def fake_fwd_into(q, k, v, out, lse, scale, causal=False, persistent=False, num_consumers=2, **kw):
        got.append((causal, kw.get("causal_bands", False)))
        out.zero_()
        lse.zero_()
    monkeypatch.setattr(forward_gluon, "fwd_into", fake_fwd_into)
    q, k, v = rand_qkv(1, 2048, 2048, 2, 2, 128, torch.bfloat16, DEVICE)
    with flashtriton.use_backend("triton"):
        flash_attn_func(q, k, v, causal=True)
        flash_attn_func(q, k, v)
    plans.clear()
    assert got == [(True, want), (False, False)], got


_COMPILE = r"""
import json, re, sys
sys.path.insert(0, sys.argv[1])
import gluon_fwd_compile as g
out = {}
for name, kw in (("bf16", dict(causal_bands=True)), ("fp16", dict(causal_bands=True)), ("ref", dict())):
    c = g.compile_fwd(128, "fp16" if name == "fp16" else "bf16", causal=True, **kw)
    r = g.report(c)
    text = g.sass(c)
    out[name] = dict(loops=r["tile_loops"], spill=r["spill_bytes"], smem=r["smem"], hgmma=r["hgmma"],
                     local=len(re.findall(r"\b(?:LDL|STL)\b", text)))
print(json.dumps(out))
"""


def test_compiles_offline():
    """sm_90a, no GPU: 0 spills, no local memory, the one-block CAUSAL kernel's HGMMA count, shared
    memory and tile loops (490 / 713 / 489 / 713 on Triton 3.6.0: the order costs instructions once a CTA)."""
    pytest.importorskip("triton.experimental.gluon")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, TRITON_INTERPRET="0", PYTHONPATH=os.path.join(root, "src"))
    res = subprocess.run([sys.executable, "-c", _COMPILE, os.path.join(root, "bench")], env=env,
                         capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stderr[-2000:]
    r = json.loads(res.stdout.strip().splitlines()[-1])
    ref = r.pop("ref")
    for name, x in r.items():
        assert x["spill"] == 0 and x["local"] == 0, (name, x)
        assert (x["hgmma"], x["smem"], x["loops"]) == (ref["hgmma"], ref["smem"], ref["loops"]), (name, x, ref)


# ---------------------------------------------------------------------------------------
# GPU (Hopper)
# ---------------------------------------------------------------------------------------
_SHAPES = [(2, 1024, 1024, 4, 2), (1, 384, 704, 4, 1), (3, 768, 256, 2, 2), (5, 512, 512, 3, 3), (1, 128, 128, 2, 2)]


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("b, nq, nk, h, hk", _SHAPES)
def test_matches_reference_gpu(dtype, b, nq, nk, h, hk):
    check(*rand_qkv(b, nq, nk, h, hk, 128, dtype, "cuda"), causal=True, causal_bands=True)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("band", [None, 1, 2, 3, 64])
@pytest.mark.parametrize("b, nq, nk, h, hk", _SHAPES)
def test_bitwise_one_block_gpu(band, b, nq, nk, h, hk):
    q, k, v = rand_qkv(b, nq, nk, h, hk, 128, torch.bfloat16, "cuda")
    ref = attention_fwd_gluon(q, k, v, 0.0883, causal=True)
    for _ in range(2):
        got = attention_fwd_gluon(q, k, v, 0.0883, causal=True, causal_bands=True, band=band)
        assert torch.equal(got[0], ref[0]) and torch.equal(got[1], ref[1])


@pytest.mark.gpu
@hopper
def test_flash_attn_func_route_gpu(monkeypatch):
    from flashtriton import flash_attn_func
    q, k, v = rand_qkv(4, 2048, 2048, 4, 4, 128, torch.bfloat16, "cuda")
    plans.clear()
    with torch.no_grad():
        ref = flash_attn_func(q, k, v, causal=True).clone()
    monkeypatch.setattr(policy, "GLUON_FWD_CAUSAL_BANDS", {128: 2048})
    seen = []
    real = forward_gluon.fwd_into

    def spy(*a, **kw):
        seen.append(kw.get("causal_bands"))
        return real(*a, **kw)
    monkeypatch.setattr(forward_gluon, "fwd_into", spy)
    plans.clear()
    with torch.no_grad():
        for _ in range(2):
            got = flash_attn_func(q, k, v, causal=True)
            assert torch.equal(got, ref)
    plans.clear()
    if seen:                               # the route sends 2k causal D = 128 to Gluon (GLUON_FWD_CAUSAL_MIN_N)
        assert seen[0] is True
