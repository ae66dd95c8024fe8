"""The fused Gluon backward's DEFER_DQ (a helper's; measured level in session 30, not routed; kernels/bwd_gluon_fused.py: each
ring tile's dQ wgmmas and reduce-add run one tile later, in the next tile's slot, the last
tile's after the loop; the two consumer warpgroups then wait for each other's dS^T of the
PREVIOUS tile only, so they may run about half a tile apart). Host side
launchers/backward_gluon.py (prepare_fused(..., defer_dq=True), fused_defer), switch
policy.GLUON_BWD_FUSED_DEFER (empty = off). Plain (non-causal) kernel only.

CPU: the switch's default, the rule, the validation, the launch arguments, the route by a
recorder, and the kernel's offline sm_90a compile (no local memory inside the tile loops).
GPU (Hopper, @pytest.mark.gpu): gradients against float64 by the repo criterion
(tests/helpers.py: at most 3x PyTorch's same-dtype error; outputs NaN-poisoned before each
call by conftest's autouse fixture), Nq != Nk, GQA, one-tile and few-tile CTAs (the peeled
tile 0 and the drain); dk / dv BITWISE the current kernel's (DEFER_DQ changes only when and
from which buffer dQ is computed: dK / dV see the same operands in the same order), dq
within fp32 summation order of it; the route through flash_attn_func with the table set.
"""
import os
import sys

import pytest
import torch

from flashtriton.kernels import bwd_gluon_fused
from flashtriton.launchers import backward_gluon, policy
from flashtriton.launchers.backward_gluon import fused_defer, fused_gluon

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
def test_defer_switch_off_by_default():
    """Not routed until the GPU A/B (bench/gpu/s31_fused_bwd_d128_ab.py) has measured it."""
    assert policy.GLUON_BWD_FUSED_DEFER == {"plain": frozenset()}
    assert bwd_gluon_fused.DEFER_DS == 2
    assert bwd_gluon_fused.FUSED_CONFIG == {64: (64, 128, 4), 128: (64, 128, 2)}     # unchanged
    for d in (64, 128):
        assert not fused_defer(d, False, False, False, False)


def test_defer_rule(monkeypatch):
    """fused_defer with the table set: the listed head dim, non-causal, no window, no
    dropout, not the WIDE tile."""
    monkeypatch.setattr(policy, "GLUON_BWD_FUSED_DEFER", {"plain": frozenset({128})})
    assert fused_defer(128, False, False, False, False)
    assert not fused_defer(64, False, False, False, False)        # not listed
    assert not fused_defer(128, True, False, False, False)        # causal
    assert not fused_defer(128, False, True, False, False)        # window
    assert not fused_defer(128, False, False, True, False)        # dropout
    assert not fused_defer(128, False, False, False, True)        # WIDE tile


def test_defer_validation():
    """prepare_fused(defer_dq=True): ValueError before any launch, naming what is wrong."""
    with pytest.raises(ValueError, match=r"^defer_dq: expected a bool"):
        call_fused(args(), defer_dq=1)
    with pytest.raises(ValueError, match=r"^defer_dq: the plain kernel only"):
        call_fused(args(), causal=True, defer_dq=True)
    with pytest.raises(ValueError, match=r"^defer_dq: the plain kernel only"):
        call_fused(args(), defer_dq=True, window=(64, 64))
    with pytest.raises(ValueError, match=r"^defer_dq: takes no dropout"):
        call_fused(args(), defer_dq=True, dropout_p=0.1, keys=torch.zeros(8, dtype=torch.int32))
    with pytest.raises(ValueError, match=r"^defer_dq: not with the WIDE tile"):
        call_fused(args(d=64), defer_dq=True, wide=True)
    with pytest.raises(ValueError, match=r"^num_stages: defer_dq=True is compiled with FUSED_CONFIG's 2 stages"):
        call_fused(args(), defer_dq=True, num_stages=3)


def test_defer_launch_args():
    """DEFER_DQ=True among the launch's constexprs only when asked (absent otherwise: the
    binder's key and the kernel of before); everything else equal."""
    q, k, v, dout, lse, delta = args(b=2, nq=256, nk=512, h=4, hk=2, d=128)
    base = backward_gluon._fused_launch_args(q, k, v, dout, lse, delta, 0.125, 64, 128, 2, True)
    dfr = backward_gluon._fused_launch_args(q, k, v, dout, lse, delta, 0.125, 64, 128, 2, True, defer=True)
    assert "DEFER_DQ" not in base[6]
    assert dfr[6].pop("DEFER_DQ") is True
    assert dfr[6] == base[6] and dfr[4] == base[4] == (512 // 128, 2 * 2)
    assert len(dfr[5]) == len(base[5])


def test_defer_route_launch(monkeypatch):
    """fused_into (the library's route) passes DEFER_DQ where the table lists the call (plain
    only), not otherwise; the kernel's run replaced by a recorder (CPU tensors)."""
    seen = []
    monkeypatch.setattr(backward_gluon, "_run_fused", lambda *a, **kw: seen.append(a[6]))

    def route(causal, d=128):
        q, k, v, dout, lse, delta = args(nq=256, nk=256, d=d)
        dq, dk, dv = (torch.empty_like(t) for t in (q, k, v))
        backward_gluon.fused_into(q, k, v, dout, lse, delta, 0.125, causal, dq, dk, dv)
        return seen[-1].get("DEFER_DQ", False)
    assert not route(False) and not route(True)                  # table empty
    monkeypatch.setattr(policy, "GLUON_BWD_FUSED_DEFER", {"plain": frozenset({128})})
    assert route(False) and not route(True) and not route(False, d=64)


_COMPILE = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
import gluon_bwd_compile as g
c = g.compile_fused(int(sys.argv[2]), "bf16", None, True, False, False, defer=True)
r, text = g.report(c)
loops = [(lp["n"], lp["ldl"] + lp["stl"]) for lp in g.tile_loops(text)]
print(json.dumps(dict(spill=r["spill_bytes"], smem=r["smem"], redg=text.count("UTMAREDG"), hgmma=text.count("HGMMA"),
                      loops=loops)))
"""


@pytest.mark.parametrize("d", [128, 64])
def test_defer_compiles_without_local_memory_in_the_loops(d):
    """Offline sm_90a (no GPU; bench/gluon_bwd_compile.py in a subprocess, outside the test
    session's interpreter mode): the DEFER_DQ kernel's two consumer tile loops hold no local
    load or store (session 31: 8 spill bytes at D = 128, all outside the loops; a third dS^T
    buffer or an un-peeled tile 0 put 1-10 local accesses a tile there), the shared memory
    of the kernel without it (2 dS^T buffers), 2 reduce sites a consumer (the loop's deferred
    one and the drain) and the HGMMAs of two tile bodies (the peeled tile 0 and the loop's)
    plus the drain's dQ."""
    import json
    import subprocess

    pytest.importorskip("triton.experimental.gluon")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, TRITON_INTERPRET="0", PYTHONPATH=os.path.join(root, "src"))
    res = subprocess.run([sys.executable, "-c", _COMPILE, os.path.join(root, "bench"), str(d)], env=env,
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    r = json.loads(res.stdout.strip().splitlines()[-1])
    assert len(r["loops"]) == 2, r
    assert all(loc == 0 for _, loc in r["loops"]), r
    assert r["spill"] <= 8, r
    assert r["smem"] <= (193 if d == 128 else 145) * 1024, r
    assert r["redg"] == 4, r
    # a consumer (two in the SASS): the peeled tile 0 without dQ (S^T + dP^T 16 at D = 128 /
    # 8 at D = 64, dV + dK 8), the loop's body with it (+ 8: two chained K = 64 dQ wgmmas of 4
    # k16 steps), the drain's dQ 8
    body = 16 + 8 if d == 128 else 8 + 8
    assert r["hgmma"] == 2 * (body + (body + 8) + 8), r


# ---------------------------------------------------------------------------------------
# GPU (Hopper): numerics
# ---------------------------------------------------------------------------------------
def check_defer(b, nq, nk, h, hk, d, dtype, **kw):
    """test_bwd_gluon.check_fused (poisoned outputs, float64 criterion) with DEFER_DQ."""
    return check_fused(b, nq, nk, h, hk, d, dtype, False, defer_dq=True, **kw)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("d", [128, 64])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("h, hk", [(4, 4), (8, 2), (6, 1)])
@pytest.mark.parametrize("n", [128, 1024])
def test_defer_matches_reference_gpu(d, dtype, h, hk, n):
    check_defer(2, n, n, h, hk, d, dtype)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("nq, nk", [(64, 128), (64, 1024), (128, 384), (384, 128), (1024, 256), (2048, 1024)])
def test_defer_nq_differs_from_nk_gpu(nq, nk):
    """Nq != Nk; (64, 128): one ring tile a CTA with one head a KV head (T = 1: only the
    peeled tile 0 and the drain), (64, 1024) T = 1 for 8 blocks."""
    check_defer(1, nq, nk, 4, 4, 128, torch.bfloat16)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("rotate", [True, False])
def test_defer_rotate_gpu(rotate):
    """ROTATE on and off (the deferred reduce goes to the previous tile's rotated row)."""
    check_defer(2, 2048, 2048, 4, 2, 128, torch.bfloat16, rotate=rotate)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("d", [128, 64])
@pytest.mark.parametrize("nq, nk, h, hk", [(1024, 1024, 4, 2), (256, 1024, 4, 4), (1024, 256, 6, 1), (64, 128, 2, 2)])
def test_defer_dkdv_bitwise_gpu(d, nq, nk, h, hk):
    """dk / dv bitwise the current kernel's (the same dK / dV wgmmas on the same operands in
    the same order: DEFER_DQ moves only the dQ wgmmas and the reduce), rotate on for both;
    dq within fp32 summation order of it (both non-deterministic)."""
    (q, k, v, dout, lse, delta, scale), (dq, dk, dv) = check_defer(1, nq, nk, h, hk, d, torch.bfloat16)
    dq0, dk0, dv0 = fused_gluon(q, k, v, dout, lse, delta, scale, False)
    assert torch.equal(dk, dk0), f"dk differs: max {(dk.float() - dk0.float()).abs().max().item():.2e}"
    assert torch.equal(dv, dv0), f"dv differs: max {(dv.float() - dv0.float()).abs().max().item():.2e}"
    torch.testing.assert_close(dq.float(), dq0.float(), atol=2e-2, rtol=2e-2)


@pytest.mark.gpu
@hopper
def test_defer_repeatable_gpu():
    """dk / dv bitwise over repeated launches of one prepared call; dq finite and close every
    time (the drain and tile 0's skipped dQ never leave a stale or missing tile)."""
    q, k, v, dout, lse, delta, scale, truth, lowp = inputs(2, 1024, 1024, 4, 2, 128, torch.bfloat16)
    launch = backward_gluon.prepare_fused(q, k, v, dout, lse, delta, scale, False, defer_dq=True)
    dq, dk, dv = (t.clone() for t in launch())
    for _ in range(5):
        dq2, dk2, dv2 = launch()
        assert torch.equal(dk, dk2) and torch.equal(dv, dv2)
        assert_close("dq", dq2, truth[0], lowp[0], 3, torch.bfloat16)


@pytest.mark.gpu
@hopper
def test_defer_library_route_gpu(monkeypatch):
    """flash_attn_func's backward (deterministic=False) through DEFER_DQ with the table set
    (its launch seen by a spy), gradients by the repo criterion against float64."""
    import flashtriton
    from flashtriton import reference

    monkeypatch.setattr(policy, "GLUON_BWD_FUSED_DEFER", {"plain": frozenset({128})})
    run = backward_gluon._run_fused
    seen = []
    monkeypatch.setattr(backward_gluon, "_run_fused",
                        lambda *a, **kw: (seen.append(a[6].get("DEFER_DQ", False)), run(*a, **kw)))
    n = 2048                                   # GLUON_BWD_FUSED_MIN_N: plain 1k at D = 128
    q, k, v = (t.requires_grad_() for t in rand_qkv(1, n, n, 2, 2, 128, torch.bfloat16, "cuda"))
    dout = torch.randn_like(q)
    out = flashtriton.flash_attn_func(q, k, v, deterministic=False)
    dq, dk, dv = torch.autograd.grad(out, (q, k, v), dout)
    assert seen and seen[-1] is True, "DEFER_DQ did not launch"
    kw = dict(softmax_scale=128 ** -0.5)
    truth = reference.attention_grad(dout.double(), *(t.detach().double() for t in (q, k, v)), **kw)
    lowp = reference.attention_grad(dout, *(t.detach() for t in (q, k, v)), **kw)
    for i, (name, t) in enumerate((("dq", dq), ("dk", dk), ("dv", dv))):
        assert_close(name, t, truth[i], lowp[i], 3, torch.bfloat16)
