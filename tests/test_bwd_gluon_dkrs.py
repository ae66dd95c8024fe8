"""The fused Gluon backward's DK_RS (a helper's, offline; not routed; kernels/bwd_gluon_fused.py:
dK += dS^T Q with dS^T's A operand from registers, issued right after dV's wgmma, instead of
from the dS^T shared-memory buffer after its store / fence / ds_ready arrival; analysis
bench/wip/fused-bwd-d128-dkrs.md). Host side launchers/backward_gluon.py
(prepare_fused(..., dk_rs=True), fused_dk_rs), switch policy.GLUON_BWD_FUSED_DK_RS (empty =
off). The 64-row plain and causal kernels (no window, dropout, WIDE tile or DEFER_DQ).

CPU: the switch's default, the rule, the validation, the launch arguments, the route by a
recorder, and the kernel's offline sm_90a compile in a subprocess (no local memory inside the
tile loops, the dK wgmmas register-A).
GPU (Hopper, @pytest.mark.gpu): gradients against float64 by the repo criterion
(tests/helpers.py: at most 3x PyTorch's same-dtype error; outputs NaN-poisoned before each
call by conftest's autouse fixture), fresh random inputs, Nq != Nk, GQA, causal; dk / dv
BITWISE the current kernel's (the same dK k16 steps on the same values in the same order,
only the A operand's source differs), dq within fp32 summation order of it; the route
through flash_attn_func with the table set.
"""
import os
import sys

import pytest
import torch

from flashtriton.kernels import bwd_gluon_fused
from flashtriton.launchers import backward_gluon, policy
from flashtriton.launchers.backward_gluon import fused_dk_rs, fused_gluon

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
def test_dkrs_switch_off_by_default():
    """Not routed until the GPU A/B (bench/gpu/s32_fused_bwd_dkrs_ab.py) has measured it."""
    assert policy.GLUON_BWD_FUSED_DK_RS == {"plain": frozenset(), "causal": frozenset()}
    assert bwd_gluon_fused.FUSED_CONFIG == {64: (64, 128, 4), 128: (64, 128, 2)}     # unchanged
    for d in (64, 128):
        for causal in (False, True):
            assert not fused_dk_rs(d, causal, False, False, False, False)


def test_dkrs_rule(monkeypatch):
    """fused_dk_rs with the table set: the listed head dim under the call's kind, never with a
    window, dropout, the WIDE tile or DEFER_DQ."""
    monkeypatch.setattr(policy, "GLUON_BWD_FUSED_DK_RS", {"plain": frozenset({128}), "causal": frozenset()})
    assert fused_dk_rs(128, False, False, False, False, False)
    assert not fused_dk_rs(64, False, False, False, False, False)        # not listed
    assert not fused_dk_rs(128, True, False, False, False, False)        # causal not listed
    assert not fused_dk_rs(128, False, True, False, False, False)        # window
    assert not fused_dk_rs(128, False, False, True, False, False)        # dropout
    assert not fused_dk_rs(128, False, False, False, True, False)        # WIDE tile
    assert not fused_dk_rs(128, False, False, False, False, True)        # DEFER_DQ
    monkeypatch.setattr(policy, "GLUON_BWD_FUSED_DK_RS", {"plain": frozenset(), "causal": frozenset({128})})
    assert fused_dk_rs(128, True, False, False, False, False)
    assert not fused_dk_rs(128, False, False, False, False, False)


def test_dkrs_validation():
    """prepare_fused(dk_rs=True): ValueError before any launch, naming what is wrong."""
    with pytest.raises(ValueError, match=r"^dk_rs: expected a bool"):
        call_fused(args(), dk_rs=1)
    with pytest.raises(ValueError, match=r"^dk_rs: takes no window"):
        call_fused(args(), dk_rs=True, window=(64, 64))
    with pytest.raises(ValueError, match=r"^dk_rs: takes no dropout"):
        call_fused(args(), dk_rs=True, dropout_p=0.1, keys=torch.zeros(8, dtype=torch.int32))
    with pytest.raises(ValueError, match=r"^dk_rs: not with the WIDE tile"):
        call_fused(args(d=64), dk_rs=True, wide=True)
    with pytest.raises(ValueError, match=r"^dk_rs: not with dq_split_m"):
        call_fused(args(d=64), dk_rs=True, wide=True, dq_split_m=True)
    with pytest.raises(ValueError, match=r"^dk_rs: not with defer_dq"):
        call_fused(args(), dk_rs=True, defer_dq=True)
    with pytest.raises(ValueError, match=r"^num_stages: dk_rs=True is compiled with FUSED_CONFIG's 2 stages"):
        call_fused(args(), dk_rs=True, num_stages=3)


def test_dkrs_launch_args():
    """DK_RS=True among the launch's constexprs only when asked (absent otherwise: the
    binder's key and the kernel of before); everything else equal."""
    q, k, v, dout, lse, delta = args(b=2, nq=256, nk=512, h=4, hk=2, d=128)
    for causal in (False, True):
        base = backward_gluon._fused_launch_args(q, k, v, dout, lse, delta, 0.125, 64, 128, 2, not causal, causal)
        rs = backward_gluon._fused_launch_args(q, k, v, dout, lse, delta, 0.125, 64, 128, 2, not causal, causal,
                                               dk_rs=True)
        assert "DK_RS" not in base[6]
        assert rs[6].pop("DK_RS") is True
        assert rs[6] == base[6] and rs[4] == base[4] == (512 // 128, 2 * 2)
        assert len(rs[5]) == len(base[5])


def test_dkrs_route_launch(monkeypatch):
    """fused_into (the library's route) passes DK_RS where the table lists the call's kind and
    head dim, not otherwise (a window never); the kernel's run replaced by a recorder (CPU
    tensors)."""
    seen = []
    monkeypatch.setattr(backward_gluon, "_run_fused", lambda *a, **kw: seen.append(a[6]))

    def route(causal, d=128, window=None):
        q, k, v, dout, lse, delta = args(nq=256, nk=256, d=d)
        dq, dk, dv = (torch.empty_like(t) for t in (q, k, v))
        backward_gluon.fused_into(q, k, v, dout, lse, delta, 0.125, causal, dq, dk, dv, window=window)
        return seen[-1].get("DK_RS", False)
    assert not route(False) and not route(True)                  # table empty
    monkeypatch.setattr(policy, "GLUON_BWD_FUSED_DK_RS", {"plain": frozenset({128}), "causal": frozenset()})
    assert route(False) and not route(True) and not route(False, d=64)
    monkeypatch.setattr(policy, "GLUON_BWD_FUSED_DK_RS", {"plain": frozenset({128}), "causal": frozenset({128})})
    assert route(False) and route(True) and not route(False, window=(64, 64))


_COMPILE = r"""
import json, re, sys
sys.path.insert(0, sys.argv[1])
import gluon_bwd_compile as g
out = {}
for rs in (False, True):
    c = g.compile_fused(int(sys.argv[2]), "bf16", None, True, sys.argv[3] == "1", False, dk_rs=rs)
    r, text = g.report(c)
    loops = [(lp["n"], lp["ldl"] + lp["stl"], lp["hgmma"]) for lp in g.tile_loops(text)]
    rs_hgmma = len(re.findall(r"HGMMA\.\S+ R\d+, R\d+, gdesc", text))
    out[str(rs)] = dict(spill=r["spill_bytes"], smem=r["smem"], redg=text.count("UTMAREDG"),
                        hgmma=text.count("HGMMA."), rs=rs_hgmma, loops=loops, bars=text.count("BAR.SYNC"),
                        adv=len(g.ptxas_advisories(c)))
print(json.dumps(out))
"""


@pytest.mark.parametrize("d, causal", [(128, False), (128, True)])
def test_dkrs_compiles_without_local_memory_in_the_loops(d, causal):
    """Offline sm_90a (no GPU; bench/gluon_bwd_compile.py in a subprocess, outside the test
    session's interpreter mode): the DK_RS kernel's two consumer tile loops hold no local load
    or store (the first form spilled one local load a tile in WG 1's plain loop: the hoisted
    dQ B descriptors; the opaque K index removed it), no ptxas wgmma advisory, the shared
    memory and HGMMA count of the kernel without it, and the dK wgmmas register-A (dV's 4 and
    dK's 4 a consumer, against dV's 4 without)."""
    import json
    import subprocess

    pytest.importorskip("triton.experimental.gluon")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, TRITON_INTERPRET="0", PYTHONPATH=os.path.join(root, "src"))
    res = subprocess.run([sys.executable, "-c", _COMPILE, os.path.join(root, "bench"), str(d), "1" if causal else "0"],
                         env=env, capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stderr[-2000:]
    out = json.loads(res.stdout.strip().splitlines()[-1])
    old, new = out["False"], out["True"]
    assert len(new["loops"]) == 2, new
    assert all(loc == 0 for _, loc, _ in new["loops"]), new
    assert all(h == 32 for _, _, h in new["loops"]), new
    assert new["spill"] <= 64, new                       # all outside the loops (prologue / epilogue)
    assert new["adv"] == 0, new
    assert new["smem"] == old["smem"] and new["redg"] == old["redg"] and new["hgmma"] == old["hgmma"], out
    assert new["rs"] == old["rs"] + 2 * 4, out            # dK's 4 k16 steps a consumer now register-A


# ---------------------------------------------------------------------------------------
# GPU (Hopper): numerics
# ---------------------------------------------------------------------------------------
def check_dkrs(b, nq, nk, h, hk, d, dtype, causal=False, **kw):
    """test_bwd_gluon.check_fused (poisoned outputs, float64 criterion) with DK_RS."""
    return check_fused(b, nq, nk, h, hk, d, dtype, causal, dk_rs=True, **kw)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("d", [128, 64])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("h, hk", [(4, 4), (8, 2), (6, 1)])
@pytest.mark.parametrize("n", [128, 1024])
def test_dkrs_matches_reference_gpu(d, dtype, causal, h, hk, n):
    check_dkrs(2, n, n, h, hk, d, dtype, causal)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("nq, nk", [(64, 128), (64, 1024), (128, 384), (384, 128), (1024, 256), (2048, 1024)])
def test_dkrs_nq_differs_from_nk_gpu(causal, nq, nk):
    """Nq != Nk (causal: rows without keys where Nq > Nk; key blocks with one ring tile)."""
    check_dkrs(1, nq, nk, 4, 4, 128, torch.bfloat16, causal)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("rotate", [True, False])
def test_dkrs_rotate_gpu(rotate):
    check_dkrs(2, 2048, 2048, 4, 2, 128, torch.bfloat16, rotate=rotate)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("d", [128, 64])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("nq, nk, h, hk", [(1024, 1024, 4, 2), (256, 1024, 4, 4), (1024, 256, 6, 1), (64, 128, 2, 2)])
def test_dkrs_dkdv_bitwise_gpu(d, causal, nq, nk, h, hk):
    """dk / dv bitwise the current kernel's (the same dK / dV k16 wgmma steps on the same 16-bit
    values in the same order: DK_RS changes only where dK's A operand is read from); dq within
    fp32 summation order of it (both non-deterministic)."""
    (q, k, v, dout, lse, delta, scale), (dq, dk, dv) = check_dkrs(1, nq, nk, h, hk, d, torch.bfloat16, causal)
    dq0, dk0, dv0 = fused_gluon(q, k, v, dout, lse, delta, scale, causal)
    assert torch.equal(dk, dk0), f"dk differs: max {(dk.float() - dk0.float()).abs().max().item():.2e}"
    assert torch.equal(dv, dv0), f"dv differs: max {(dv.float() - dv0.float()).abs().max().item():.2e}"
    torch.testing.assert_close(dq.float(), dq0.float(), atol=2e-2, rtol=2e-2)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("causal", [False, True])
def test_dkrs_repeatable_gpu(causal):
    """dk / dv bitwise over repeated launches of one prepared call; dq close every time."""
    q, k, v, dout, lse, delta, scale, truth, lowp = inputs(2, 1024, 1024, 4, 2, 128, torch.bfloat16, causal)
    launch = backward_gluon.prepare_fused(q, k, v, dout, lse, delta, scale, causal, dk_rs=True)
    dq, dk, dv = (t.clone() for t in launch())
    for _ in range(5):
        dq2, dk2, dv2 = launch()
        assert torch.equal(dk, dk2) and torch.equal(dv, dv2)
        assert_close("dq", dq2, truth[0], lowp[0], 3, torch.bfloat16)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("causal", [False, True])
def test_dkrs_library_route_gpu(monkeypatch, causal):
    """flash_attn_func's backward (deterministic=False) through DK_RS with the table set (its
    launch seen by a spy), gradients by the repo criterion against float64."""
    import flashtriton
    from flashtriton import reference

    monkeypatch.setattr(policy, "GLUON_BWD_FUSED_DK_RS", {"plain": frozenset({128}), "causal": frozenset({128})})
    run = backward_gluon._run_fused
    seen = []
    monkeypatch.setattr(backward_gluon, "_run_fused",
                        lambda *a, **kw: (seen.append(a[6].get("DK_RS", False)), run(*a, **kw)))
    n = 4096                                   # past GLUON_BWD_FUSED_MIN_N at D = 128, plain and causal
    q, k, v = (t.requires_grad_() for t in rand_qkv(1, n, n, 2, 2, 128, torch.bfloat16, "cuda"))
    dout = torch.randn_like(q)
    out = flashtriton.flash_attn_func(q, k, v, causal=causal, deterministic=False)
    dq, dk, dv = torch.autograd.grad(out, (q, k, v), dout)
    assert seen and seen[-1] is True, "DK_RS did not launch"
    kw = dict(softmax_scale=128 ** -0.5, window_right=0 if causal else -1)
    truth = reference.attention_grad(dout.double(), *(t.detach().double() for t in (q, k, v)), **kw)
    lowp = reference.attention_grad(dout, *(t.detach() for t in (q, k, v)), **kw)
    for i, (name, t) in enumerate((("dq", dq), ("dk", dk), ("dv", dv))):
        assert_close(name, t, truth[i], lowp[i], 3, torch.bfloat16)
