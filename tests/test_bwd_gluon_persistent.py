"""The fused Gluon backward's PERSISTENT (a session-34 helper's, offline, never run; not routed;
kernels/bwd_gluon_fused.py: grid (min(#SMs, #items),), each CTA walking its (key block, batch x
KV head) items in a static order (plain: key block fastest, round-robin; causal: heaviest first,
snake-dealt), every ring / dS^T barrier phased by the CTA's running tile count, K / V reloaded
over a kv_free barrier after both consumer warpgroups' dK / dV stores have read them, the next
item's first Q / dO tiles loaded under the current item's epilogue). Host side
launchers/backward_gluon.py (prepare_fused(..., persistent=True, programs=), fused_into(...,
persistent=), fused_persistent, check_persistent), switch policy.GLUON_BWD_FUSED_PERSISTENT
(empty = off). Plain and causal, the 64-row tile (D = 128 and 64).

CPU: the switch's default, the rule, the validation, the launch arguments, the route by a
recorder, the item schedule (the kernel's own @triton.jit fused_item / fused_item_count under
TRITON_INTERPRET=1: every item once, causal heaviest first and balanced), and the kernel's offline
sm_90a compile (spills, shared memory, local accesses in the tile loops, the routed kernel's
HGMMA count).
GPU (Hopper, @pytest.mark.gpu): gradients against float64 by the repo criterion (tests/helpers.py:
at most 3x PyTorch's same-dtype error; outputs NaN-poisoned by conftest's autouse fixture), causal
and not, Nq != Nk, GQA, rows with no key -> dq = 0, programs = 1 / 3 / the SM count (many items a
CTA: every barrier's phase carried across items), dk / dv BITWISE the routed kernel's (the same
dK / dV wgmmas on the same operands in the same order, ROTATE's start tile the same), dq within
fp32 summation order; repeated launches; the route through flash_attn_func with the table set.
"""
import os
import sys

import pytest
import torch
import triton
import triton.language as tl

from flashtriton.kernels import bwd_gluon_fused
from flashtriton.launchers import backward_gluon, policy
from flashtriton.launchers.backward_gluon import check_persistent, fused_gluon, fused_persistent

from conftest import HAS_CUDA
from helpers import assert_close, rand_qkv
from test_bwd_gluon import args, call_fused, check_fused, inputs

IS_HOPPER = HAS_CUDA and torch.cuda.get_device_capability()[0] == 9
INTERPRETING = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")
hopper = pytest.mark.skipif(not IS_HOPPER or INTERPRETING,
                            reason="needs a Hopper GPU (compute capability 9.x), not the interpreter")


# ---------------------------------------------------------------------------------------
# CPU: switch, rule, validation, launch arguments, route
# ---------------------------------------------------------------------------------------
def test_persistent_switch_off_by_default():
    """Not routed until the GPU A/B (bench/gpu/s34_bwd_persistent_ab.py) has measured it."""
    assert policy.GLUON_BWD_FUSED_PERSISTENT == {"plain": frozenset(), "causal": frozenset()}
    assert bwd_gluon_fused.FUSED_CONFIG == {64: (64, 128, 4), 128: (64, 128, 2)}     # unchanged
    for d in (64, 128):
        for causal in (False, True):
            assert not fused_persistent(d, causal, False, False, False, False, False)


def test_persistent_rule(monkeypatch):
    """fused_persistent with the table set: the listed head dim under the call's kind, no window,
    dropout, WIDE tile, DEFER_DQ or DQ_SPLIT_M."""
    monkeypatch.setattr(policy, "GLUON_BWD_FUSED_PERSISTENT", {"plain": frozenset({128}), "causal": frozenset()})
    assert fused_persistent(128, False, False, False, False, False, False)
    assert not fused_persistent(128, True, False, False, False, False, False)     # causal not listed
    assert not fused_persistent(64, False, False, False, False, False, False)     # D not listed
    for i in range(5):
        flags = [False] * 5
        flags[i] = True
        assert not fused_persistent(128, False, *flags)
    monkeypatch.setattr(policy, "GLUON_BWD_FUSED_PERSISTENT", {"causal": frozenset({128})})
    assert fused_persistent(128, True, False, False, False, False, False)
    assert not fused_persistent(128, False, False, False, False, False, False)    # kind missing: never


def test_persistent_validation():
    """prepare_fused(persistent=True): ValueError before any launch, naming what is wrong."""
    with pytest.raises(ValueError, match=r"^persistent: expected a bool"):
        call_fused(args(), persistent=1)
    with pytest.raises(ValueError, match=r"^persistent: not with a sliding window"):
        call_fused(args(), persistent=True, window=(64, 64))
    with pytest.raises(ValueError, match=r"^persistent: not with dropout"):
        call_fused(args(), persistent=True, dropout_p=0.1, keys=torch.zeros(256 + 4 * 128 + 1, dtype=torch.int32))
    with pytest.raises(ValueError, match=r"^persistent: not with the WIDE tile"):
        call_fused(args(d=64), persistent=True, wide=True)
    with pytest.raises(ValueError, match=r"^persistent: not with defer_dq"):
        call_fused(args(), persistent=True, defer_dq=True)
    with pytest.raises(ValueError, match=r"^num_stages: persistent=True is compiled with FUSED_CONFIG's 2 stages"):
        call_fused(args(), persistent=True, num_stages=3)
    for bad in (0, -1, 2.0, True, "4"):
        with pytest.raises(ValueError, match=r"^programs: expected None or a positive int"):
            call_fused(args(), persistent=True, programs=bad)
    with pytest.raises(ValueError, match=r"^programs: the grid size of persistent=True only"):
        call_fused(args(), programs=4)
    with pytest.raises(ValueError, match=r"^persistent: not with dq_split_m"):
        check_persistent(True, None, False, False, False, False, False, True)


def test_persistent_launch_args():
    """PERSISTENT=True and n_bh = B * Hk among the launch's keywords only when asked (absent
    otherwise: the binder's key and the kernel of before), grid (min(programs, items),);
    everything else equal."""
    q, k, v, dout, lse, delta = args(b=2, nq=256, nk=512, h=4, hk=2, d=128)
    base = backward_gluon._fused_launch_args(q, k, v, dout, lse, delta, 0.125, 64, 128, 2, True)
    assert "PERSISTENT" not in base[6] and "n_bh" not in base[6]
    items = (512 // 128) * 2 * 2
    for programs, grid in ((None, min(items, 132)), (3, 3), (1000, items)):
        per = backward_gluon._fused_launch_args(q, k, v, dout, lse, delta, 0.125, 64, 128, 2, True,
                                                persistent=True, programs=programs)
        if programs is None:
            from flashtriton.launchers.common import sm_count
            grid = min(items, sm_count(q.device))
        kw = dict(per[6])
        assert kw.pop("PERSISTENT") is True and kw.pop("n_bh") == 2 * 2
        assert kw == base[6] and per[4] == (grid,) and base[4] == (512 // 128, 2 * 2)
        assert len(per[5]) == len(base[5]) and per[5][7:] == base[5][7:]      # (descriptors: fresh objects)


def test_persistent_route_launch(monkeypatch):
    """fused_into (the library's route) passes PERSISTENT where the table lists the call's kind,
    or where persistent=True forces it; not otherwise; persistent=True with a window raises. The
    kernel's run replaced by a recorder (CPU tensors)."""
    seen = []
    monkeypatch.setattr(backward_gluon, "_run_fused", lambda *a, **kw: seen.append((a[4], a[6])))

    def route(causal, d=128, **kw):
        q, k, v, dout, lse, delta = args(nq=256, nk=256, d=d)
        dq, dk, dv = (torch.empty_like(t) for t in (q, k, v))
        backward_gluon.fused_into(q, k, v, dout, lse, delta, 0.125, causal, dq, dk, dv, **kw)
        return seen[-1][1].get("PERSISTENT", False)
    assert not route(False) and not route(True)                               # table empty
    assert route(False, persistent=True) and route(True, persistent=True)     # forced
    assert len(seen[-1][0]) == 1                                              # 1-D grid
    monkeypatch.setattr(policy, "GLUON_BWD_FUSED_PERSISTENT", {"plain": frozenset({128}), "causal": frozenset()})
    assert route(False) and not route(True) and not route(False, d=64)
    assert not route(False, persistent=False)                                 # forced off
    with pytest.raises(ValueError, match=r"^persistent: not with a sliding window"):
        route(False, persistent=True, window=(64, 64))
    with pytest.raises(ValueError, match=r"^persistent: expected None or a bool"):
        route(False, persistent=1)
    assert not route(False, window=(64, 64))                                  # table: windows never


# ---------------------------------------------------------------------------------------
# CPU: the item schedule (the kernel's own @triton.jit functions, interpreted)
# ---------------------------------------------------------------------------------------
@triton.jit
def _item_mirror(OWNER, ORDER, n_blocks, n_bh, CAUSAL: tl.constexpr):
    """One program a CTA, grid (P,): the CTA's items as both partitions take them
    (fused_item_count, fused_item); OWNER[t] += c + 1 and ORDER[t] = k for each visited item t."""
    c = tl.program_id(0)
    n_prog = tl.num_programs(0)
    n_items = n_blocks * n_bh
    for k in range(bwd_gluon_fused.fused_item_count(c, n_prog, n_items, CAUSAL)):
        pid_n, pid_bh = bwd_gluon_fused.fused_item(k, c, n_prog, n_blocks, n_bh, CAUSAL)
        t = pid_bh * n_blocks + pid_n
        tl.atomic_add(OWNER + t, c + 1)
        tl.store(ORDER + t, k)


def schedule(n_blocks, n_bh, programs, causal):
    owner = torch.zeros(n_blocks * n_bh, dtype=torch.int32)
    order = torch.full((n_blocks * n_bh,), -1, dtype=torch.int32)
    _item_mirror[(programs,)](owner, order, n_blocks, n_bh, CAUSAL=causal)
    return owner.view(n_bh, n_blocks) - 1, order.view(n_bh, n_blocks)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("n_blocks, n_bh, programs", [(16, 128, 132), (32, 64, 132), (128, 16, 132), (4, 2, 3),
                                                      (3, 1, 5), (1, 1, 1), (5, 7, 1), (7, 3, 4), (2, 66, 132)])
def test_persistent_schedule_covers_items(causal, n_blocks, n_bh, programs):
    """Every (key block, batch x head) item visited exactly once by one CTA (the launcher's grid
    is min(#SMs, #items): programs <= items here), each CTA's items in increasing k; causal: each
    CTA's items heaviest first (key block non-decreasing along k) and the busiest CTA's causal work
    within one heaviest item of the mean (the snake deal of a sorted list)."""
    if not INTERPRETING:
        pytest.skip("the interpreted mirror (CPU)")
    programs = min(programs, n_blocks * n_bh)
    owner, order = schedule(n_blocks, n_bh, programs, causal)
    assert (owner >= 0).all() and (owner < programs).all(), "an item visited twice or never"
    assert (order >= 0).all()
    weight = torch.arange(n_blocks, 0, -1).expand(n_bh, n_blocks)     # causal tiles of block j: ~ n_blocks - j
    load = torch.zeros(programs, dtype=torch.int64)
    for c in range(programs):
        mine = owner == c
        ks = order[mine]
        assert sorted(ks.tolist()) == list(range(len(ks))), "a CTA's k values are not 0 .. count - 1"
        if causal:
            blocks = torch.arange(n_blocks).expand(n_bh, n_blocks)[mine]
            by_k = blocks[torch.argsort(ks)]
            assert (by_k[1:] >= by_k[:-1]).all(), "causal: not heaviest first"
        load[c] = weight[mine].sum()
    if causal:
        assert load.max().item() <= weight.sum().item() / programs + n_blocks


# ---------------------------------------------------------------------------------------
# CPU: offline compile
# ---------------------------------------------------------------------------------------
_COMPILE = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
import gluon_bwd_compile as g
res = {}
for pers in (False, True):
    c = g.compile_fused(int(sys.argv[2]), "bf16", None, True, sys.argv[3] == "1", False, persistent=pers)
    r, text = g.report(c)
    loops = [(lp["n"], lp["ldl"] + lp["stl"]) for lp in g.tile_loops(text)]
    res[str(pers)] = dict(spill=r["spill_bytes"], smem=r["smem"], redg=text.count("UTMAREDG"),
                          hgmma=text.count("HGMMA"), loops=loops, regs=r["setmaxnreg"])
print(json.dumps(res))
"""


@pytest.mark.parametrize("d, causal", [(128, False), (128, True), (64, False), (64, True)])
def test_persistent_compiles(d, causal):
    """Offline sm_90a (no GPU; bench/gluon_bwd_compile.py in a subprocess, outside the test
    session's interpreter mode), PERSISTENT against the routed kernel: the same setmaxnreg, HGMMA
    and reduce sites, 16 bytes more shared memory at most (kv_free), spills at most the measured
    16 / 32 bytes (D = 128 plain / causal; D = 64 0), the two consumer tile loops within 20
    instructions of the routed kernel's, no local access in them but D = 128 causal's one
    STL / LDL pair a tile in one consumer (session 34)."""
    import json
    import subprocess

    pytest.importorskip("triton.experimental.gluon")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, TRITON_INTERPRET="0", PYTHONPATH=os.path.join(root, "src"))
    res = subprocess.run([sys.executable, "-c", _COMPILE, os.path.join(root, "bench"), str(d), "1" if causal else "0"],
                         env=env, capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stderr[-2000:]
    r = json.loads(res.stdout.strip().splitlines()[-1])
    old, new = r["False"], r["True"]
    assert new["regs"] == old["regs"], r
    assert new["hgmma"] == old["hgmma"] and new["redg"] == old["redg"], r
    assert 0 < new["smem"] - old["smem"] <= 64, r
    assert new["spill"] <= {(128, False): 16, (128, True): 32}.get((d, causal), 0), r
    assert len(new["loops"]) == 2 == len(old["loops"]), r
    for (n, loc), (n0, _) in zip(new["loops"], old["loops"]):
        assert abs(n - n0) <= 20, r
        assert loc <= (2 if (d, causal) == (128, True) else 0), r


# ---------------------------------------------------------------------------------------
# GPU (Hopper): numerics
# ---------------------------------------------------------------------------------------
def check_persistent_gpu(b, nq, nk, h, hk, d, dtype, causal=False, programs=None, **kw):
    """test_bwd_gluon.check_fused (poisoned outputs, float64 criterion) with PERSISTENT, and dk /
    dv bitwise the routed kernel's, dq within its fp32 summation order."""
    (q, k, v, dout, lse, delta, scale), (dq, dk, dv) = check_fused(b, nq, nk, h, hk, d, dtype, causal,
                                                                   persistent=True, programs=programs, **kw)
    dq0, dk0, dv0 = fused_gluon(q, k, v, dout, lse, delta, scale, causal, **kw)
    assert torch.equal(dk, dk0), f"dk differs: max {(dk.float() - dk0.float()).abs().max().item():.2e}"
    assert torch.equal(dv, dv0), f"dv differs: max {(dv.float() - dv0.float()).abs().max().item():.2e}"
    torch.testing.assert_close(dq.float(), dq0.float(), atol=2e-2, rtol=2e-2)
    return (q, k, v, dout, lse, delta, scale), (dq, dk, dv)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("d", [128, 64])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("programs", [1, 3, None])
@pytest.mark.parametrize("n", [128, 1024])
def test_persistent_matches_reference_gpu(causal, d, dtype, programs, n):
    check_persistent_gpu(2, n, n, 4, 2, d, dtype, causal, programs)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("h, hk", [(4, 4), (8, 2), (6, 1)])
@pytest.mark.parametrize("nq, nk", [(256, 1024), (1024, 256), (64, 128), (192, 384), (64, 1024)])
def test_persistent_nq_differs_from_nk_gpu(causal, h, hk, nq, nk):
    """Nq != Nk and GQA (group > 1: each item's ring runs over the group's heads), programs = 5
    (several items a CTA, uneven counts)."""
    check_persistent_gpu(1, nq, nk, h, hk, 128, torch.bfloat16, causal, programs=5)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("d", [128, 64])
@pytest.mark.parametrize("nq, nk", [(2048, 1024), (1024, 128), (384, 128)])
@pytest.mark.parametrize("programs", [2, None])
def test_persistent_causal_rows_without_keys_gpu(d, nq, nk, programs):
    """Nq > Nk causal: the first Nq - Nk query rows see no key (lse = +inf): their dq is 0."""
    _, (dq, _, _) = check_persistent_gpu(2, nq, nk, 4, 2, d, torch.bfloat16, True, programs)
    assert not dq[:, :nq - nk].any(), "rows that see no key must get dq = 0"


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("causal", [False, True])
def test_persistent_many_items_gpu(causal):
    """4k, B = 2, H = 16: 512 items over the SM count (~4 a CTA) and over 7 CTAs (~73 each):
    the barriers' phases carried across many items; rotate on (plain) as routed."""
    check_persistent_gpu(2, 4096, 4096, 16, 16, 128, torch.bfloat16, causal, programs=None)
    check_persistent_gpu(2, 4096, 4096, 16, 16, 128, torch.bfloat16, causal, programs=7)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("rotate", [True, False])
def test_persistent_rotate_gpu(rotate):
    """ROTATE on and off (the start tile from pid_n, as the routed kernel's from program_id(0))."""
    check_persistent_gpu(2, 2048, 2048, 4, 2, 128, torch.bfloat16, False, programs=9, rotate=rotate)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("causal", [False, True])
def test_persistent_repeatable_gpu(causal):
    """dk / dv bitwise over repeated launches of one prepared call; dq finite and close every time
    (no stale barrier phase or staging from a previous launch or item)."""
    q, k, v, dout, lse, delta, scale, truth, lowp = inputs(2, 1024, 1024, 4, 2, 128, torch.bfloat16, causal)
    launch = backward_gluon.prepare_fused(q, k, v, dout, lse, delta, scale, causal, persistent=True, programs=11)
    dq, dk, dv = (t.clone() for t in launch())
    for _ in range(5):
        dq2, dk2, dv2 = launch()
        assert torch.equal(dk, dk2) and torch.equal(dv, dv2)
        assert_close("dq", dq2, truth[0], lowp[0], 3, torch.bfloat16)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("causal", [False, True])
def test_persistent_library_route_gpu(monkeypatch, causal):
    """flash_attn_func's backward (deterministic=False) through PERSISTENT with the table set (its
    launch seen by a spy), gradients by the repo criterion against float64."""
    import flashtriton
    from flashtriton import reference

    kind = "causal" if causal else "plain"
    monkeypatch.setattr(policy, "GLUON_BWD_FUSED_PERSISTENT", {"plain": frozenset(), "causal": frozenset(),
                                                              kind: frozenset({128})})
    run = backward_gluon._run_fused
    seen = []
    monkeypatch.setattr(backward_gluon, "_run_fused",
                        lambda *a, **kw: (seen.append(a[6].get("PERSISTENT", False)), run(*a, **kw)))
    n = 2048                                   # GLUON_BWD_FUSED_MIN_N: plain 1k, causal 512 at D = 128
    q, k, v = (t.requires_grad_() for t in rand_qkv(1, n, n, 2, 2, 128, torch.bfloat16, "cuda"))
    dout = torch.randn_like(q)
    out = flashtriton.flash_attn_func(q, k, v, causal=causal, deterministic=False)
    dq, dk, dv = torch.autograd.grad(out, (q, k, v), dout)
    assert seen and seen[-1] is True, "PERSISTENT did not launch"
    kw = dict(softmax_scale=128 ** -0.5, window_right=0 if causal else -1)
    truth = reference.attention_grad(dout.double(), *(t.detach().double() for t in (q, k, v)), **kw)
    lowp = reference.attention_grad(dout, *(t.detach() for t in (q, k, v)), **kw)
    for i, (name, t) in enumerate((("dq", dq), ("dk", dk), ("dv", dv))):
        assert_close(name, t, truth[i], lowp[i], 3, torch.bfloat16)
