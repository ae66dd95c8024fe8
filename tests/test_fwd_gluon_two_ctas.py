"""kernels/fwd_gluon.py's TWO_CTAS (session 45, not routed): the CAUSAL one-block forward at D = 64 compiled with a
kernel-wide register cap (the launch's maxnreg) so that 2 (or 3) CTAs share an SM, one CTA's fixed cost a block
(start, Q wait, the peel, the last P V and the epilogue) running under the other's tensor work. Forms
(fwd_gluon.TWO_CTAS_FORMS): 2 consumers x 64 rows with 64-key tiles (maxnreg 80; ptxas serializes its wgmmas), one
64-row consumer with 128-key tiles (maxnreg 128, 2 CTAs) or 64-key tiles (maxnreg 80, 3 CTAs). Host side
launchers/forward_gluon.py (check_two_ctas, prepare / attention_fwd_gluon's two_ctas).

CPU: two_ctas' validation before any launch (ValueError naming the argument); the launch arguments (TWO_CTAS,
NUM_CONSUMERS, maxnreg, the boxes and the grid); an offline sm_90a compile (the registers and shared memory allow the
form's CTAs an SM; no spills in the one-consumer forms). GPU (Hopper): outputs within the float64 criterion (NaN-
poisoned before each call, conftest), causal D = 64 at several N incl. Nq != Nk both ways, bf16 and fp16; BITWISE
the 1-CTA kernel of the same arithmetic (the 2-consumer causal kernel at the same BLOCK_N; at BLOCK_N 128 also the
routed 3-consumer kernel) and bitwise repeatable.
"""
import json
import os
import subprocess
import sys

import pytest
import torch

from flashtriton.kernels.fwd_gluon import TWO_CTAS_FORMS
from flashtriton.launchers import forward_gluon
from flashtriton.launchers.forward_gluon import attention_fwd_gluon, check_two_ctas

from helpers import rand_qkv
from test_fwd_gluon import check, hopper

_OK = dict(two_ctas=True, d=64, causal=True, window=None, persistent=False, scheduled=False, pingpong=False,
           dropout_p=0.0, early_q=False, lean_mask=False, split_empty=None, o_stage=False, num_consumers=2,
           block_n=None, num_stages=None)


# ---------------------------------------------------------------------------------------
# CPU: validation, launch arguments, offline compile
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("nc, bn, st, want", [
    (2, None, None, (128, 64, 4)), (1, None, None, (64, 128, 3)), (1, 64, None, (64, 64, 4)),
    (2, 64, 2, (128, 64, 2)), (1, 128, 2, (64, 128, 2)), (1, 64, 3, (64, 64, 3)), (2, 64, 6, (128, 64, 6)),
])
def test_two_ctas_forms(nc, bn, st, want):
    assert check_two_ctas(**dict(_OK, num_consumers=nc, block_n=bn, num_stages=st)) == want


@pytest.mark.parametrize("kw, msg", [
    (dict(two_ctas=1), r"^two_ctas: expected a bool, got 1"),
    (dict(causal=False), r"^two_ctas=True: the causal forward one block a CTA only"),
    (dict(window=(64, 0)), r"^two_ctas=True: the causal forward one block a CTA only"),
    (dict(persistent=True), r"^two_ctas=True: the causal forward one block a CTA only"),
    (dict(pingpong=True), r"^two_ctas=True: the causal forward one block a CTA only"),
    (dict(dropout_p=0.1), r"^two_ctas=True: the causal forward one block a CTA only"),
    (dict(o_stage=True), r"^two_ctas=True: the causal forward one block a CTA only"),
    (dict(split_empty=True), r"^two_ctas=True: the causal forward one block a CTA only"),
    (dict(d=128), r"^two_ctas=True: head dim 128 not supported \(64 only"),
    (dict(num_consumers=3), r"^num_consumers: with two_ctas=True 1 or 2, got 3"),
    (dict(block_n=128), r"^block_n: 128 has no two_ctas form with num_consumers=2"),
    (dict(num_consumers=1, block_n=32), r"^block_n: 32 has no two_ctas form with num_consumers=1"),
    (dict(num_stages=1), r"^num_stages: expected an int >= 2, got 1"),
    (dict(num_stages=True), r"^num_stages: expected an int >= 2, got True"),
    (dict(num_stages=7), r"^num_stages: 7 stages take 128 KB of shared memory, more than 2 CTAs"),
    (dict(num_consumers=1, num_stages=4), r"^num_stages: 4 stages take 136 KB of shared memory, more than 2 CTAs"),
    (dict(num_consumers=1, block_n=64, num_stages=5), r"^num_stages: 5 stages take 88 KB .* more than 3 CTAs"),
])
def test_two_ctas_rejected_before_any_launch(kw, msg):
    with pytest.raises(ValueError, match=msg):
        check_two_ctas(**dict(_OK, **kw))
    # and through prepare, on CPU tensors, before the device check
    d = kw.get("d", 64)
    q, k, v = rand_qkv(1, 256, 256, 2, 2, d, torch.bfloat16, "cpu")
    pkw = {x: y for x, y in kw.items() if x not in ("d", "dropout_p")}
    if "dropout_p" not in kw:
        pkw.setdefault("causal", True)
        with pytest.raises(ValueError, match=msg):
            forward_gluon.prepare(q, k, v, 0.125, **dict(dict(two_ctas=True), **pkw))


@pytest.mark.parametrize("nq, nk, kw, msg", [
    (192, 256, dict(), r"^q: sequence length 192 not a positive multiple of BLOCK_M = 128"),
    (256, 320, dict(num_consumers=1), r"^k: sequence length 320 not a positive multiple of BLOCK_N = 128"),
    (256, 256, dict(own_tiles=True, num_consumers=1), r"^own_tiles=True: the causal forward one block"),
    (256, 256, dict(), r"^q: on cpu"),
])
def test_two_ctas_prepare_checks(nq, nk, kw, msg):
    q, k, v = rand_qkv(1, nq, nk, 2, 2, 64, torch.bfloat16, "cpu")
    with pytest.raises(ValueError, match=msg):
        forward_gluon.prepare(q, k, v, 0.125, causal=True, two_ctas=True, **kw)


def _launched(monkeypatch, num_consumers=2, block_n=None, own_tiles=False, nq=512, nk=640):
    got = []
    monkeypatch.setattr(torch.cuda, "device", lambda device: __import__("contextlib").nullcontext())
    monkeypatch.setattr(forward_gluon.plans, "launch", lambda kernel, grid, *a, **k: got.append((grid, a, k)))
    q, k, v = rand_qkv(2, nq, nk, 4, 2, 64, torch.bfloat16, "cpu")
    o = torch.empty_like(q)
    lse = torch.empty(2, 4, nq, dtype=torch.float32)
    bm, bn, st = check_two_ctas(**dict(_OK, num_consumers=num_consumers, block_n=block_n))
    forward_gluon._launch_into(q, k, v, o, lse, 0.125, bm, bn, st, False, True, num_consumers=num_consumers,
                               own_tiles=own_tiles, two_ctas=True)()
    assert len(got) == 1
    return got[0]


@pytest.mark.parametrize("nc, bn", sorted(TWO_CTAS_FORMS))
def test_two_ctas_launch_arguments(monkeypatch, nc, bn):
    """TWO_CTAS=True and the form's maxnreg (a compile option) reach the launch; NUM_CONSUMERS only when 1; the Q / O
    boxes are a consumer's 64 rows, K / V's BLOCK_N; grid (Nq / BLOCK_M, B * H)."""
    bm, maxnreg, st, _ = TWO_CTAS_FORMS[(nc, bn)]
    grid, args, kw = _launched(monkeypatch, num_consumers=nc, block_n=None if bn == (64 if nc == 2 else 128) else bn)
    assert kw["TWO_CTAS"] is True and kw["maxnreg"] == maxnreg and kw["CAUSAL"] is True
    assert (kw["HEAD_DIM"], kw["BLOCK_M"], kw["BLOCK_N"], kw["NUM_STAGES"]) == (64, bm, bn, st)
    assert kw.get("NUM_CONSUMERS", 2) == nc and (nc == 2) == ("NUM_CONSUMERS" not in kw)
    assert not (kw["PERSISTENT"] or kw["WINDOW"] or kw["DROPOUT"] or kw["SCHEDULED"] or kw["PINGPONG"])
    assert "OWN_TILES" not in kw and "SPLIT_EMPTY" not in kw
    q_desc, k_desc, v_desc, o_desc = args[:4]
    assert list(q_desc.block_shape) == [64, 64] and list(o_desc.block_shape) == [64, 64]
    assert list(k_desc.block_shape) == [bn, 64] and list(v_desc.block_shape) == [bn, 64]
    assert grid == (512 // bm, 2 * 4)


def test_two_ctas_launch_own_tiles(monkeypatch):
    _, _, kw = _launched(monkeypatch, own_tiles=True)
    assert kw["OWN_TILES"] is True and kw["TWO_CTAS"] is True and kw["maxnreg"] == 80


_COMPILE = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
import gluon_fwd_compile as g
from flashtriton.bench.compile_report import ptxas_log
from flashtriton.kernels.fwd_gluon import TWO_CTAS_FORMS
out = {}
for (nc, bn), (bm, maxnreg, st, ctas) in sorted(TWO_CTAS_FORMS.items()):
    c = g.compile_fwd(64, "bf16", bm, bn, st, causal=True, num_consumers=nc, two_ctas=True)
    r = g.report(c)
    occ = g.occupancy(r, r["warps"] * 32)
    out[f"{nc},{bn}"] = dict(regs=r["regs"], warps=r["warps"], setmaxnreg=r["setmaxnreg"], spill=r["spill_bytes"],
                             smem=r["smem"], ctas=occ["ctas"], want=ctas, hgmma=r["hgmma"], hmma=r["hmma"],
                             serialized="serialized" in ptxas_log(c), loops=r["tile_loops"])
print(json.dumps(out))
"""


def test_two_ctas_compiles_offline():
    """sm_90a, no GPU: each form's cubin allows its CTAs an SM (registers x threads and shared memory; its maxnreg
    as the kernel's register count); HGMMA, no HMMA. The one-consumer forms: 8 warps, setmaxnreg 2 x maxnreg - 24
    for the consumer and 24 for the loader, no spills, asynchronous wgmma (two tile loops, unmasked and masked).
    The two-consumer form (12 warps, 104 / 112 / 24): ptxas serializes its wgmmas (C7512: a consumer needs 112
    registers with S, O and the previous P live) and spills a little; recorded here so that a change shows."""
    pytest.importorskip("triton.experimental.gluon")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    res = subprocess.run([sys.executable, "-c", _COMPILE, os.path.join(root, "bench")], capture_output=True,
                         text=True, env=dict(os.environ, TRITON_INTERPRET="0", PYTHONPATH=os.path.join(root, "src")),
                         timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout.strip().splitlines()[-1])
    for key, r in out.items():
        nc, bn = map(int, key.split(","))
        assert r["regs"] == TWO_CTAS_FORMS[(nc, bn)][1] and r["ctas"] >= r["want"], (key, r)
        assert r["hgmma"] > 0 and r["hmma"] == 0, (key, r)
        if nc == 1:
            assert r["warps"] == 8 and r["spill"] == 0 and not r["serialized"], (key, r)
            assert sorted(int(n) for a, n in r["setmaxnreg"] if a == "inc") == [24, 2 * r["regs"] - 24], (key, r)
            assert len(r["loops"]) == 2, (key, r)
        else:
            assert r["warps"] == 12 and ["dec", "112"] in r["setmaxnreg"] and ["inc", "104"] in r["setmaxnreg"], r
            assert r["serialized"] and r["spill"] <= 128, (key, r)


# ---------------------------------------------------------------------------------------
# GPU (Hopper): the reference, bitwise the 1-CTA kernel of the same arithmetic, repeatable
# ---------------------------------------------------------------------------------------
_SHAPES = [
    (2, 512, 512, 4, 4),        # 4 / 8 blocks a head
    (1, 128, 128, 2, 2),        # one 128-row block
    (1, 1024, 1024, 4, 2),      # GQA
    (1, 384, 768, 4, 1),        # Nq < Nk
    (2, 640, 384, 4, 4),        # Nq > Nk: rows that see no key (O = 0, lse = +inf)
]
# (every form bench/gpu/s45_two_ctas_ab.py times, so that its compiles are cached when s45b.sh runs it after these)
_FORMS = [dict(num_consumers=2), dict(num_consumers=2, num_stages=2), dict(num_consumers=2, num_stages=3),
          dict(num_consumers=2, own_tiles=True), dict(num_consumers=1), dict(num_consumers=1, num_stages=2),
          dict(num_consumers=1, block_n=64), dict(num_consumers=1, block_n=64, num_stages=3)]


def _same_arith(kw):
    """The 1-CTA kernel whose rows do the same arithmetic: the 2-consumer causal kernel at the form's BLOCK_N."""
    return dict(block_n=kw.get("block_n", 64 if kw["num_consumers"] == 2 else 128))


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("b, nq, nk, h, hk", _SHAPES)
@pytest.mark.parametrize("form", range(len(_FORMS)))
def test_two_ctas_gpu(dtype, b, nq, nk, h, hk, form):
    kw = _FORMS[form]
    q, k, v = rand_qkv(b, nq, nk, h, hk, 64, dtype, "cuda")
    o1, lse1 = check(q, k, v, causal=True, two_ctas=True, **kw)
    o2, lse2 = attention_fwd_gluon(q, k, v, 64 ** -0.5, causal=True, **_same_arith(kw))
    assert torch.equal(o1, o2) and torch.equal(lse1, lse2), "not bitwise the 1-CTA kernel of the same arithmetic"
    o3, lse3 = attention_fwd_gluon(q, k, v, 64 ** -0.5, causal=True, two_ctas=True, **kw)
    assert torch.equal(o1, o3) and torch.equal(lse1, lse3), "not repeatable"


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("n", [2048, 4096])
def test_two_ctas_against_route_gpu(dtype, n):
    """At the A/B's lengths (B x H smaller): the one-consumer 128-key form bitwise the routed 3-consumer kernel
    (rows split into the same 64-row groups with the same tiles and masks); every form within the reference."""
    q, k, v = rand_qkv(1, n, n, 2, 2, 64, dtype, "cuda")
    o3, lse3 = attention_fwd_gluon(q, k, v, 0.125, causal=True, num_consumers=3)
    o1, lse1 = check(q, k, v, scale=0.125, causal=True, two_ctas=True, num_consumers=1)
    assert torch.equal(o1, o3) and torch.equal(lse1, lse3)
    for kw in (dict(num_consumers=2), dict(num_consumers=1, block_n=64)):
        check(q, k, v, scale=0.125, causal=True, two_ctas=True, **kw)


@pytest.mark.gpu
@hopper
def test_two_ctas_negative_scale_gpu():
    q, k, v = rand_qkv(2, 768, 896, 4, 2, 64, torch.bfloat16, "cuda")
    for kw in _FORMS[:1] + _FORMS[4:5]:
        o1, lse1 = check(q, k, v, scale=-0.05, causal=True, two_ctas=True, **kw)
        o2, lse2 = attention_fwd_gluon(q, k, v, -0.05, causal=True, **_same_arith(kw))
        assert torch.equal(o1, o2) and torch.equal(lse1, lse2)
