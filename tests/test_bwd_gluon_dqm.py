"""The fused Gluon backward's DQ_SPLIT_M (a session-30 helper, routed for D = 64 in session 31; kernels/bwd_gluon_fused.py, the
WIDE tile at D = 64 only: each consumer warpgroup computes and reduce-adds dQ for its 64 of the
ring tile's 128 query rows over the whole D, m64n64k16 wgmma steps whose A (the dS^T halves' 64
query columns) and B (the whole K halves) come to 4 KB a 32-cycle step, instead of all 128 rows
for its D-half, m64n32k16 steps at 3 KB a 16-cycle step, i.e. shared-memory bound). Host side
launchers/backward_gluon.py (prepare_fused(..., wide=True, dq_split_m=True), fused_split_m),
switch policy.GLUON_BWD_FUSED_DQ_SPLIT_M ({plain: {64}, causal: {64}}). Analysis bench/wip/fused-bwd-d64-dqm.md,
A/B bench/gpu/s31_fused_bwd_dqm_ab.py.

CPU: the switch's default, the rule, the validation, the launch arguments (the dq_accum box
(64, D) at a 64-byte swizzle), the route by a recorder, and the kernel's offline sm_90a compile
in a subprocess (no local memory in the tile loops, no spill at all, 8 dQ HGMMA of m64n64k16 a
consumer tile instead of 16 of m64n32k16). GPU (Hopper, @pytest.mark.gpu): gradients against
float64 by the repo criterion (tests/helpers.py: at most 3x PyTorch's same-dtype error; fresh
random inputs; outputs NaN-poisoned before each call by conftest's autouse fixture), causal and
not, Nq != Nk, GQA, rows without keys; dk / dv BITWISE the current WIDE kernel's (DQ_SPLIT_M
changes only the dQ wgmmas, the staging and the reduce: dK / dV see the same operands in the
same order), dq within fp32 summation order of it; the route through flash_attn_func with the
table set.
"""
import os
import sys

import pytest
import torch

from flashtriton.kernels import bwd_gluon_fused
from flashtriton.launchers import backward_gluon, policy
from flashtriton.launchers.backward_gluon import fused_gluon, fused_split_m

from conftest import HAS_CUDA
from helpers import assert_close, rand_qkv
from test_bwd_gluon import args, call_fused, inputs

IS_HOPPER = HAS_CUDA and torch.cuda.get_device_capability()[0] == 9
INTERPRETING = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")
hopper = pytest.mark.skipif(not IS_HOPPER or INTERPRETING,
                            reason="needs a Hopper GPU (compute capability 9.x), not the interpreter")


# ---------------------------------------------------------------------------------------
# CPU: switch, rule, validation, launch arguments, route, offline compile
# ---------------------------------------------------------------------------------------
def test_dqm_routed_for_d64_wide():
    """Routed in session 31 (bench/gpu/s31_fused_bwd_dqm_ab.py: +8.5-9.9% non-causal): D = 64,
    plain and causal, the WIDE tile only; never the 64-row tile or D = 128."""
    assert policy.GLUON_BWD_FUSED_DQ_SPLIT_M == {"plain": frozenset({64}), "causal": frozenset({64})}
    assert bwd_gluon_fused.FUSED_WIDE_CONFIG == {64: (128, 128, 2)}                  # unchanged
    assert bwd_gluon_fused.FUSED_CONFIG == {64: (64, 128, 4), 128: (64, 128, 2)}     # unchanged
    for causal in (False, True):
        assert fused_split_m(64, causal, True)
        assert not fused_split_m(64, causal, False)
        for wide in (False, True):
            assert not fused_split_m(128, causal, wide)


def test_dqm_rule(monkeypatch):
    """fused_split_m with the table set: the listed kind and head dim, and the WIDE tile."""
    monkeypatch.setattr(policy, "GLUON_BWD_FUSED_DQ_SPLIT_M", {"plain": frozenset({64}), "causal": frozenset()})
    assert fused_split_m(64, False, True)
    assert not fused_split_m(64, False, False)         # the 64-row tile: no row halves
    assert not fused_split_m(64, True, True)           # causal: its own (empty) entry
    assert not fused_split_m(128, False, True)         # not listed
    monkeypatch.setattr(policy, "GLUON_BWD_FUSED_DQ_SPLIT_M", {"plain": frozenset(), "causal": frozenset({64})})
    assert fused_split_m(64, True, True) and not fused_split_m(64, False, True)


def test_dqm_validation():
    """prepare_fused(dq_split_m=True): ValueError before any launch, naming what is wrong."""
    with pytest.raises(ValueError, match=r"^dq_split_m: expected a bool"):
        call_fused(args(d=64), wide=True, dq_split_m=1)
    with pytest.raises(ValueError, match=r"^dq_split_m: the WIDE tile only"):
        call_fused(args(d=64), dq_split_m=True)
    with pytest.raises(ValueError, match=r"^dq_split_m: the WIDE tile only"):
        call_fused(args(d=128), dq_split_m=True)
    # the WIDE tile's own rules still apply (no window, no dropout, D = 64, 2 stages)
    with pytest.raises(ValueError, match=r"^wide: the WIDE tile takes no sliding window"):
        call_fused(args(d=64), wide=True, dq_split_m=True, window=(64, 0))
    with pytest.raises(ValueError, match=r"^wide: the WIDE tile takes no dropout"):
        call_fused(args(d=64), wide=True, dq_split_m=True, dropout_p=0.1, keys=torch.zeros(8, dtype=torch.int32))
    with pytest.raises(ValueError, match=r"^defer_dq: not with the WIDE tile"):
        call_fused(args(d=64), wide=True, dq_split_m=True, defer_dq=True)
    with pytest.raises(ValueError, match=r"^num_stages: 3 stages with wide=True spill registers"):
        call_fused(args(d=64), wide=True, dq_split_m=True, num_stages=3)


def test_dqm_launch_args():
    """DQ_SPLIT_M=True among the launch's constexprs only when asked (absent otherwise: the
    binder's key and the kernel of before), dq_accum's box (BLOCK_M / 2, D) = (64, 64) at a
    64-byte swizzle (the WIDE tile's own: (128, 32) at 128 bytes); everything else equal."""
    q, k, v, dout, lse, delta = args(b=2, nq=256, nk=512, h=4, hk=2, d=64)
    bm, bn, st = bwd_gluon_fused.FUSED_WIDE_CONFIG[64]
    base = backward_gluon._fused_launch_args(q, k, v, dout, lse, delta, 0.125, bm, bn, st, True)
    spl = backward_gluon._fused_launch_args(q, k, v, dout, lse, delta, 0.125, bm, bn, st, True, split_m=True)
    assert "DQ_SPLIT_M" not in base[6]
    assert spl[6].pop("DQ_SPLIT_M") is True
    assert spl[6] == base[6] and spl[4] == base[4] == (512 // 128, 2 * 2)
    assert len(spl[5]) == len(base[5])
    assert list(base[5][6].block_shape) == [128, 32] and base[5][6].layout.swizzle_byte_width == 128
    assert list(spl[5][6].block_shape) == [64, 64] and spl[5][6].layout.swizzle_byte_width == 64
    assert spl[5][6].layout == bwd_gluon_fused.dq_stage_layout(128, True)
    for i in (0, 1, 2, 3, 4, 5):                      # Q, dO, K, V, dK, dV descriptors unchanged
        assert list(spl[5][i].block_shape) == list(base[5][i].block_shape)
        assert spl[5][i].layout == base[5][i].layout
    assert spl[3].shape == base[3].shape == q.shape and spl[3].dtype == torch.float32      # dq_accum


def test_dqm_route_launch(monkeypatch):
    """fused_into (the library's route) passes DQ_SPLIT_M where the table lists the call and the
    WIDE tile runs, not otherwise; the kernel's run replaced by a recorder (CPU tensors)."""
    seen = []
    monkeypatch.setattr(backward_gluon, "_run_fused", lambda *a, **kw: seen.append((a[5], a[6])))

    def route(causal, nq=256, d=64):
        q, k, v, dout, lse, delta = args(nq=nq, nk=256, d=d)
        dq, dk, dv = (torch.empty_like(t) for t in (q, k, v))
        backward_gluon.fused_into(q, k, v, dout, lse, delta, 0.125, causal, dq, dk, dv)
        a, kw = seen[-1]
        return kw.get("DQ_SPLIT_M", False), kw["BLOCK_M"], list(a[6].block_shape)
    assert route(False) == (True, 128, [64, 64]) and route(True) == (True, 128, [64, 64])   # as routed
    monkeypatch.setattr(policy, "GLUON_BWD_FUSED_DQ_SPLIT_M", {"plain": frozenset(), "causal": frozenset()})
    assert route(False) == (False, 128, [128, 32]) and route(True) == (False, 128, [128, 32])   # table empty
    monkeypatch.setattr(policy, "GLUON_BWD_FUSED_DQ_SPLIT_M", {"plain": frozenset({64}), "causal": frozenset()})
    assert route(False) == (True, 128, [64, 64])
    assert route(True) == (False, 128, [128, 32])                     # causal not listed
    assert route(False, nq=192) == (False, 64, [64, 32])              # the 64-row tile (Nq % 128 != 0)
    assert route(False, d=128) == (False, 64, [64, 64])               # D = 128: no WIDE tile
    monkeypatch.setattr(policy, "GLUON_BWD_FUSED_DQ_SPLIT_M", {"plain": frozenset({64}), "causal": frozenset({64})})
    assert route(True) == (True, 128, [64, 64])
    monkeypatch.setattr(policy, "GLUON_BWD_FUSED_WIDE", {"plain": frozenset(), "causal": frozenset()})
    assert route(False) == (False, 64, [64, 32])                      # no WIDE tile: no split


_COMPILE = r"""
import collections, json, re, sys
sys.path.insert(0, sys.argv[1])
import gluon_bwd_compile as g
causal = sys.argv[2] == "1"
out = {}
for splitm in (False, True):
    c = g.compile_fused(64, "bf16", None, True, causal, False, wide=True, splitm=splitm)
    r, text = g.report(c)
    ins = [(int(a, 16), t) for a, t in re.findall(r"/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;", text)]
    loops = []
    for lp in g.tile_loops(text):
        body = [t for a, t in ins if lp["start"] <= a <= lp["end"]]
        shapes = collections.Counter(re.search(r"HGMMA\.(\w+)", t).group(1) for t in body if "HGMMA" in t)
        loops.append(dict(n=lp["n"], local=lp["ldl"] + lp["stl"], shapes=shapes,
                          bar=sum("BAR.SYNC" in t for t in body), ex2=sum("MUFU.EX2" in t for t in body)))
    out[str(splitm)] = dict(spill=r["spill_bytes"], smem=r["smem"], redg=text.count("UTMAREDG"), loops=loops)
print(json.dumps(out))
"""


@pytest.mark.parametrize("causal", [False, True])
def test_dqm_compiles_without_local_memory_in_the_loops(causal):
    """Offline sm_90a (no GPU; bench/gluon_bwd_compile.py in a subprocess, outside the test
    session's interpreter mode), against the WIDE kernel of today: no spill at all (today's
    24 / 48 bytes, outside the loops) and no local access in the two consumer tile loops;
    the same shared memory; a consumer tile's dQ as 8 HGMMA.64x64x16 instead of 16
    HGMMA.64x32x16 (S^T / dP^T 8 x 64x128x16, dV / dK 16 x 64x64x16 unchanged); the same
    barriers and exp2 count; fewer instructions a tile."""
    import json
    import subprocess

    pytest.importorskip("triton.experimental.gluon")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, TRITON_INTERPRET="0", PYTHONPATH=os.path.join(root, "src"))
    res = subprocess.run([sys.executable, "-c", _COMPILE, os.path.join(root, "bench"), "1" if causal else "0"],
                         env=env, capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stderr[-2000:]
    r = json.loads(res.stdout.strip().splitlines()[-1])
    old, new = r["False"], r["True"]
    assert len(new["loops"]) == 2 and len(old["loops"]) == 2, r
    assert all(lp["local"] == 0 for lp in new["loops"]), r
    assert new["spill"] == 0, r
    assert new["smem"] == old["smem"] <= 194 * 1024, r
    assert new["redg"] == old["redg"] == 2, r
    for o, n in zip(old["loops"], new["loops"]):
        assert o["shapes"] == {"64x128x16": 8, "64x64x16": 16, "64x32x16": 16}, r
        assert n["shapes"] == {"64x128x16": 8, "64x64x16": 24}, r
        assert n["bar"] == o["bar"] == 9 and n["ex2"] == o["ex2"] == 64, r
        assert n["n"] < o["n"], r


# ---------------------------------------------------------------------------------------
# GPU (Hopper): numerics
# ---------------------------------------------------------------------------------------
def check_dqm(b, nq, nk, h, hk, dtype, causal=False, **kw):
    q, k, v, dout, lse, delta, scale, truth, lowp = inputs(b, nq, nk, h, hk, 64, dtype, causal)
    dq, dk, dv = fused_gluon(q, k, v, dout, lse, delta, scale, causal, wide=True, dq_split_m=True, **kw)
    assert dq.shape == q.shape and dk.shape == k.shape and dv.shape == v.shape
    for name, t in (("dq", dq), ("dk", dk), ("dv", dv)):
        assert torch.isfinite(t).all(), f"{name}: unwritten (NaN-poisoned) or non-finite output"
    assert_close("dq", dq, truth[0], lowp[0], 3, dtype)
    assert_close("dk", dk, truth[1], lowp[1], 3, dtype)
    assert_close("dv", dv, truth[2], lowp[2], 3, dtype)
    return (q, k, v, dout, lse, delta, scale), (dq, dk, dv)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("h, hk", [(4, 4), (8, 2), (6, 1)])
@pytest.mark.parametrize("n", [128, 1024])
def test_dqm_matches_reference_gpu(causal, dtype, h, hk, n):
    check_dqm(2, n, n, h, hk, dtype, causal)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("nq, nk", [(256, 1024), (1024, 256), (128, 384), (384, 128), (128, 1024), (2048, 1024)])
def test_dqm_nq_differs_from_nk_gpu(causal, nq, nk):
    """Nq != Nk (causal: bottom-right; Nq > Nk leaves rows that see no key: dq = 0 there; the
    upper WG's 64 rows and the lower's land in different dq_accum rows now)."""
    check_dqm(1, nq, nk, 4, 2, torch.bfloat16, causal)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("rotate", [True, False])
def test_dqm_rotate_gpu(rotate):
    """ROTATE on and off (the reduce's row = the rotated tile's first row + 64 WG)."""
    check_dqm(2, 2048, 2048, 4, 2, torch.bfloat16, False, rotate=rotate)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("nq, nk, h, hk", [(1024, 1024, 4, 2), (256, 1024, 4, 4), (1024, 256, 6, 1), (128, 128, 2, 2)])
def test_dqm_dkdv_bitwise_gpu(causal, nq, nk, h, hk):
    """dk / dv bitwise the current WIDE kernel's (the same dK / dV wgmmas on the same operands
    in the same order: DQ_SPLIT_M changes only the dQ wgmmas, the staging and the reduce),
    rotate on for both (the same tile order: BLOCK_M is 128 in both); dq within fp32
    summation order of it (both non-deterministic)."""
    (q, k, v, dout, lse, delta, scale), (dq, dk, dv) = check_dqm(1, nq, nk, h, hk, torch.bfloat16, causal)
    dq0, dk0, dv0 = fused_gluon(q, k, v, dout, lse, delta, scale, causal, wide=True)
    assert torch.equal(dk, dk0), f"dk differs: max {(dk.float() - dk0.float()).abs().max().item():.2e}"
    assert torch.equal(dv, dv0), f"dv differs: max {(dv.float() - dv0.float()).abs().max().item():.2e}"
    torch.testing.assert_close(dq.float(), dq0.float(), atol=2e-2, rtol=2e-2)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("causal", [False, True])
def test_dqm_repeatable_gpu(causal):
    """dk / dv bitwise over repeated launches of one prepared call; dq by the criterion every
    time (dq_accum zeroed and filled again by each launch)."""
    q, k, v, dout, lse, delta, scale, truth, lowp = inputs(2, 1024, 1024, 4, 2, 64, torch.bfloat16, causal)
    launch = backward_gluon.prepare_fused(q, k, v, dout, lse, delta, scale, causal, wide=True, dq_split_m=True)
    dq, dk, dv = (t.clone() for t in launch())
    for _ in range(5):
        dq2, dk2, dv2 = launch()
        assert torch.equal(dk, dk2) and torch.equal(dv, dv2)
        assert_close("dq", dq2, truth[0], lowp[0], 3, torch.bfloat16)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("causal", [False, True])
def test_dqm_library_route_gpu(monkeypatch, causal):
    """flash_attn_func's backward (deterministic=False) through DQ_SPLIT_M as routed (the table's
    default since session 31, set here explicitly so that the test keeps checking the DQ_SPLIT_M
    path if the default changes; its launch seen by a spy), gradients by the repo criterion
    against float64."""
    import flashtriton
    from flashtriton import reference

    monkeypatch.setattr(policy, "GLUON_BWD_FUSED_DQ_SPLIT_M", {"plain": frozenset({64}), "causal": frozenset({64})})
    run = backward_gluon._run_fused
    seen = []
    monkeypatch.setattr(backward_gluon, "_run_fused",
                        lambda *a, **kw: (seen.append(a[6].get("DQ_SPLIT_M", False)), run(*a, **kw)))
    n = 2048 if not causal else 1024          # GLUON_BWD_FUSED_MIN_N: plain 2k, causal 512 at D = 64
    q, k, v = (t.requires_grad_() for t in rand_qkv(1, n, n, 2, 2, 64, torch.bfloat16, "cuda"))
    dout = torch.randn_like(q)
    out = flashtriton.flash_attn_func(q, k, v, causal=causal, deterministic=False)
    dq, dk, dv = torch.autograd.grad(out, (q, k, v), dout)
    assert seen and seen[-1] is True, "DQ_SPLIT_M did not launch"
    kw = dict(softmax_scale=64 ** -0.5, window_right=0 if causal else -1)
    truth = reference.attention_grad(dout.double(), *(t.detach().double() for t in (q, k, v)), **kw)
    lowp = reference.attention_grad(dout, *(t.detach() for t in (q, k, v)), **kw)
    for i, (name, t) in enumerate((("dq", dq), ("dk", dk), ("dv", dv))):
        assert_close(name, t, truth[i], lowp[i], 3, torch.bfloat16)
