"""The fused Gluon backward's VEC_STAGE (session 33, a helper's, offline; kernels/bwd_gluon_fused.py):
lse / delta reach S^T's column slice layout through per-warpgroup staging rows in shared memory,
stored and fenced by ONE explicit warpgroup barrier while the S^T / dP^T wgmmas run, instead of
the compiler's two layout conversions through a common scratch (STS, BAR, LDS for lse after
S^T's wait; BAR, STS, BAR, LDS for delta after dP^T's): 9 -> 7 BAR.SYNC a warp a tile, none of
them left between a wgmma wait and the softmax. Host side launchers/backward_gluon.py
(prepare_fused(..., vec_stage=True), fused_vec_stage), switch policy.GLUON_BWD_FUSED_VEC_STAGE
(empty = off). The 64-row tile, plain and causal.

CPU: the switch's default, the rule, the validation, the launch arguments, the route by a
recorder, the kernel's offline sm_90a compile (BAR.SYNC a tile 9 -> 7, no local memory inside
the tile loops, <= 8 spill bytes) and the SASS of the kernel WITHOUT it unchanged by the
parameter's existence (the routed kernel's instructions hashed against the default compile).
GPU (Hopper, @pytest.mark.gpu): gradients against float64 by the repo criterion
(tests/helpers.py: at most 3x PyTorch's same-dtype error; outputs NaN-poisoned before each call
by conftest's autouse fixture), causal and not, GQA, Nq != Nk, bf16 / fp16, D = 128 / 64; dk / dv
BITWISE the current kernel's (the same values reach the same registers: only the path of lse /
delta into them changes), dq within fp32 summation order; the route through flash_attn_func.
"""
import os
import sys

import pytest
import torch

from flashtriton.launchers import backward_gluon, policy
from flashtriton.launchers.backward_gluon import fused_gluon, fused_vec_stage

from conftest import HAS_CUDA
from helpers import assert_close, rand_qkv
from test_bwd_gluon import args, call_fused, check_fused, inputs

IS_HOPPER = HAS_CUDA and torch.cuda.get_device_capability()[0] == 9
INTERPRETING = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")
hopper = pytest.mark.skipif(not IS_HOPPER or INTERPRETING,
                            reason="needs a Hopper GPU (compute capability 9.x), not the interpreter")


# ---------------------------------------------------------------------------------------
# CPU: switch, rule, validation, launch arguments, route, offline compile
# ---------------------------------------------------------------------------------------
def test_vec_stage_switch_off_by_default():
    """Not routed until the GPU A/B (bench/gpu/s33_bwd128_ab.py) has measured it."""
    assert policy.GLUON_BWD_FUSED_VEC_STAGE == {"plain": frozenset(), "causal": frozenset()}
    for d in (64, 128):
        for causal in (False, True):
            assert not fused_vec_stage(d, causal, False, False, False, False, False)


def test_vec_stage_rule(monkeypatch):
    """fused_vec_stage with the table set: the listed head dim under the call's kind, the 64-row
    tile without window, dropout, DEFER_DQ or DQ_SPLIT_M."""
    monkeypatch.setattr(policy, "GLUON_BWD_FUSED_VEC_STAGE", {"plain": frozenset({128}), "causal": frozenset({64})})
    assert fused_vec_stage(128, False, False, False, False, False, False)
    assert not fused_vec_stage(64, False, False, False, False, False, False)      # not listed for plain
    assert fused_vec_stage(64, True, False, False, False, False, False)
    assert not fused_vec_stage(128, True, False, False, False, False, False)      # not listed for causal
    assert not fused_vec_stage(128, False, True, False, False, False, False)      # window
    assert not fused_vec_stage(128, False, False, True, False, False, False)      # dropout
    assert not fused_vec_stage(64, True, False, False, True, False, False)        # WIDE tile
    assert not fused_vec_stage(128, False, False, False, False, True, False)      # DEFER_DQ
    assert not fused_vec_stage(64, True, False, False, False, False, True)        # DQ_SPLIT_M


def test_vec_stage_validation():
    """prepare_fused(vec_stage=True): ValueError before any launch, naming what is wrong."""
    with pytest.raises(ValueError, match=r"^vec_stage: expected a bool"):
        call_fused(args(), vec_stage=1)
    with pytest.raises(ValueError, match=r"^vec_stage: takes no window"):
        call_fused(args(), vec_stage=True, window=(64, 64))
    with pytest.raises(ValueError, match=r"^vec_stage: takes no dropout"):
        call_fused(args(), vec_stage=True, dropout_p=0.1, keys=torch.zeros(8, dtype=torch.int32))
    with pytest.raises(ValueError, match=r"^vec_stage: the 64-row tile"):
        call_fused(args(d=64), vec_stage=True, wide=True)
    with pytest.raises(ValueError, match=r"^vec_stage: the 64-row tile"):
        call_fused(args(), vec_stage=True, defer_dq=True)
    with pytest.raises(ValueError, match=r"^num_stages: vec_stage=True is compiled with FUSED_CONFIG's 2 stages"):
        call_fused(args(), vec_stage=True, num_stages=3)


def test_vec_stage_launch_args():
    """VEC_STAGE=True among the launch's constexprs only when asked (absent otherwise: the binder's
    key and the kernel of before); everything else equal."""
    q, k, v, dout, lse, delta = args(b=2, nq=256, nk=512, h=4, hk=2, d=128)
    base = backward_gluon._fused_launch_args(q, k, v, dout, lse, delta, 0.125, 64, 128, 2, True)
    vs = backward_gluon._fused_launch_args(q, k, v, dout, lse, delta, 0.125, 64, 128, 2, True, vec_stage=True)
    assert "VEC_STAGE" not in base[6]
    assert vs[6].pop("VEC_STAGE") is True
    assert vs[6] == base[6] and vs[4] == base[4] == (512 // 128, 2 * 2)
    assert len(vs[5]) == len(base[5])


def test_vec_stage_route_launch(monkeypatch):
    """fused_into (the library's route) passes VEC_STAGE where the table lists the call's kind, not
    otherwise; the kernel's run replaced by a recorder (CPU tensors)."""
    seen = []
    monkeypatch.setattr(backward_gluon, "_run_fused", lambda *a, **kw: seen.append(a[6]))

    def route(causal, d=128):
        q, k, v, dout, lse, delta = args(nq=256, nk=256, d=d)
        dq, dk, dv = (torch.empty_like(t) for t in (q, k, v))
        backward_gluon.fused_into(q, k, v, dout, lse, delta, 0.125, causal, dq, dk, dv)
        return seen[-1].get("VEC_STAGE", False)
    assert not route(False) and not route(True)                  # table empty
    monkeypatch.setattr(policy, "GLUON_BWD_FUSED_VEC_STAGE", {"plain": frozenset({128}), "causal": frozenset()})
    assert route(False) and not route(True) and not route(False, d=64)
    monkeypatch.setattr(policy, "GLUON_BWD_FUSED_VEC_STAGE", {"plain": frozenset(), "causal": frozenset({128})})
    assert route(True) and not route(False)


_COMPILE = r"""
import hashlib, json, re, sys
sys.path.insert(0, sys.argv[1])
import gluon_bwd_compile as g
from gluon_fwd_compile import sass
from gluon_bwd_fused_sass_hash import strip
d, causal = int(sys.argv[2]), sys.argv[3] == "1"
out = {}
for vs in (False, True):
    c = g.compile_fused(d, "bf16", None, True, causal, False, vec_stage=vs)
    r, text = g.report(c)
    ins = [(int(a, 16), t) for a, t in re.findall(r"/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;", text)]
    loops = []
    for lp in g.tile_loops(text):
        body = [t for a, t in ins if lp["start"] <= a <= lp["end"]]
        loops.append(dict(n=lp["n"], bar=sum("BAR.SYNC" in t for t in body), local=lp["ldl"] + lp["stl"],
                          hgmma=lp["hgmma"], ex2=sum("MUFU.EX2" in t for t in body)))
    out[str(vs)] = dict(spill=r["spill_bytes"], smem=r["smem"], loops=loops,
                        sha=hashlib.sha1(strip(sass(c)).encode()).hexdigest()[:16])
print(json.dumps(out))
"""

@pytest.mark.parametrize("d, causal", [(128, False), (128, True), (64, False), (64, True)])
def test_vec_stage_compiles_with_fewer_barriers(d, causal):
    """Offline sm_90a (no GPU; bench/gluon_bwd_compile.py in a subprocess, outside the test
    session's interpreter mode): with VEC_STAGE each consumer tile loop holds 7 BAR.SYNC (9
    without), no local load or store, the same HGMMA and MUFU.EX2 counts; spills <= 8 bytes
    (session 33: D = 128 plain 0 -> 8, outside the loops), 1 KB more shared memory at most."""
    import json
    import subprocess

    pytest.importorskip("triton.experimental.gluon")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, TRITON_INTERPRET="0", PYTHONPATH=os.path.join(root, "src"))
    res = subprocess.run([sys.executable, "-c", _COMPILE, os.path.join(root, "bench"), str(d), "1" if causal else "0"],
                         env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    r = json.loads(res.stdout.strip().splitlines()[-1])
    off, on = r["False"], r["True"]
    assert len(off["loops"]) == len(on["loops"]) == 2, r
    assert all(lp["bar"] == 9 for lp in off["loops"]), r
    assert all(lp["bar"] == 7 for lp in on["loops"]), r
    assert all(lp["local"] == 0 for lp in on["loops"]), r
    assert [(lp["hgmma"], lp["ex2"]) for lp in on["loops"]] == [(lp["hgmma"], lp["ex2"]) for lp in off["loops"]], r
    assert on["spill"] <= 8, r
    assert off["smem"] < on["smem"] <= off["smem"] + 1024 + 128, r
    assert on["sha"] != off["sha"]


# ---------------------------------------------------------------------------------------
# GPU (Hopper): numerics
# ---------------------------------------------------------------------------------------
def check_vec_stage(b, nq, nk, h, hk, d, dtype, causal=False, **kw):
    """test_bwd_gluon.check_fused (poisoned outputs, float64 criterion) with VEC_STAGE."""
    return check_fused(b, nq, nk, h, hk, d, dtype, causal, vec_stage=True, **kw)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("d", [128, 64])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("h, hk", [(4, 4), (8, 2), (6, 1)])
@pytest.mark.parametrize("n", [128, 1024])
def test_vec_stage_matches_reference_gpu(d, dtype, causal, h, hk, n):
    check_vec_stage(2, n, n, h, hk, d, dtype, causal)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("nq, nk", [(64, 128), (64, 1024), (128, 384), (384, 128), (1024, 256), (2048, 1024)])
def test_vec_stage_nq_differs_from_nk_gpu(causal, nq, nk):
    """Nq != Nk (causal: the bottom-right mask, rows that see no key where Nq > Nk get dq = 0;
    one ring tile a CTA at (64, 128))."""
    check_vec_stage(1, nq, nk, 4, 4, 128, torch.bfloat16, causal)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("rotate", [True, False])
def test_vec_stage_rotate_gpu(rotate):
    """ROTATE on and off (lse / delta of the rotated tile's rows)."""
    check_vec_stage(2, 2048, 2048, 4, 2, 128, torch.bfloat16, rotate=rotate)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("d", [128, 64])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("nq, nk, h, hk", [(1024, 1024, 4, 2), (256, 1024, 4, 4), (1024, 256, 6, 1), (64, 128, 2, 2)])
def test_vec_stage_dkdv_bitwise_gpu(d, causal, nq, nk, h, hk):
    """dk / dv bitwise the current kernel's (VEC_STAGE changes only how lse / delta reach the
    column layout: the same values, the same arithmetic after), dq within fp32 summation order."""
    (q, k, v, dout, lse, delta, scale), (dq, dk, dv) = check_vec_stage(1, nq, nk, h, hk, d, torch.bfloat16, causal)
    dq0, dk0, dv0 = fused_gluon(q, k, v, dout, lse, delta, scale, causal)
    assert torch.equal(dk, dk0), f"dk differs: max {(dk.float() - dk0.float()).abs().max().item():.2e}"
    assert torch.equal(dv, dv0), f"dv differs: max {(dv.float() - dv0.float()).abs().max().item():.2e}"
    torch.testing.assert_close(dq.float(), dq0.float(), atol=2e-2, rtol=2e-2)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("causal", [False, True])
def test_vec_stage_repeatable_gpu(causal):
    """dk / dv bitwise over repeated launches of one prepared call (a staging-row race would show
    as run-to-run differences), dq by the criterion every time."""
    q, k, v, dout, lse, delta, scale, truth, lowp = inputs(2, 1024, 1024, 4, 2, 128, torch.bfloat16, causal)
    launch = backward_gluon.prepare_fused(q, k, v, dout, lse, delta, scale, causal, vec_stage=True)
    dq, dk, dv = (t.clone() for t in launch())
    for _ in range(5):
        dq2, dk2, dv2 = launch()
        assert torch.equal(dk, dk2) and torch.equal(dv, dv2)
        assert_close("dq", dq2, truth[0], lowp[0], 3, torch.bfloat16)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("causal", [False, True])
def test_vec_stage_library_route_gpu(monkeypatch, causal):
    """flash_attn_func's backward (deterministic=False) through VEC_STAGE with the table set (its
    launch seen by a spy), gradients by the repo criterion against float64."""
    import flashtriton
    from flashtriton import reference

    monkeypatch.setattr(policy, "GLUON_BWD_FUSED_VEC_STAGE", {"plain": frozenset({128}), "causal": frozenset({128})})
    run = backward_gluon._run_fused
    seen = []
    monkeypatch.setattr(backward_gluon, "_run_fused",
                        lambda *a, **kw: (seen.append(a[6].get("VEC_STAGE", False)), run(*a, **kw)))
    n = 4096                                   # above GLUON_BWD_FUSED_MIN_N for both kinds at D = 128
    q, k, v = (t.requires_grad_() for t in rand_qkv(1, n, n, 2, 2, 128, torch.bfloat16, "cuda"))
    dout = torch.randn_like(q)
    out = flashtriton.flash_attn_func(q, k, v, causal=causal, deterministic=False)
    dq, dk, dv = torch.autograd.grad(out, (q, k, v), dout)
    assert seen and seen[-1] is True, "VEC_STAGE did not launch"
    kw = dict(softmax_scale=128 ** -0.5, window_right=0 if causal else -1)
    truth = reference.attention_grad(dout.double(), *(t.detach().double() for t in (q, k, v)), **kw)
    lowp = reference.attention_grad(dout, *(t.detach() for t in (q, k, v)), **kw)
    for i, (name, t) in enumerate((("dq", dq), ("dk", dk), ("dv", dv))):
        assert_close(name, t, truth[i], lowp[i], 3, torch.bfloat16)
