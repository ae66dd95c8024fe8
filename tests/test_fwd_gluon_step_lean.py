"""kernels/fwd_gluon.py STEP_LEAN (a session-33 helper, offline; not routed; bench/wip/gluon-window-gap.md):
two flags of the PERSISTENT EARLY_Q forward (the routed window form PERSISTENT WINDOW EARLY_Q
LEAN_MASK) that give its tile step the plain PERSISTENT kernel's schedule:
  - QFREE_LATE: the q_free arrival once a block after the tile loops (every S of the block has
    retired there) instead of a predicated arrival (j == q_last) in every tile step, whose
    warpgroup barrier ptxas placed after the softmax, dragging the P V wait below the
    exponentials (session 27's PV_OVERLAP schedule, measured 1-3.4% slower) and adding a BAR.SYNC
    a tile;
  - P32_CARRY: P carried between tile steps in fp32 and converted at the next P V: the bf16 P
    carried through the peel and three loops was 64 16-bit values that ptxas repacked with 64
    PRMT a step (the plain kernel's one loop has none).
Neither changes a value (the same conversion, one step later; the same single q_free arrival a
block, later): outputs bitwise the routed kernel's. Host side launchers/forward_gluon.py
(qfree_late=, p32_carry=; check_step_lean), A/B bench/gpu/s34_window_ab.py.

CPU: validation, a valid call reaching the device check, launch arguments through a recorder,
the kernel's source (one q_free arrival a block on every path), an offline sm_90a compile in a
subprocess (no local memory in the tile loops, no PRMT and 2 BAR.SYNC a tile step, the plain
kernel's tile-loop size within a few instructions). GPU (Hopper): float64 with the repo criterion
(windows, Nq != Nk both ways with rows that see no key, GQA, fp16, few CTAs), bitwise the routed
kernel for windows incl. (-1, 0) (causal EARLY_Q) and (-1, -1) (plain EARLY_Q), repeated launches.
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
from flashtriton.launchers import forward_gluon, plans
from flashtriton.launchers.forward_gluon import attention_fwd_gluon

from conftest import DEVICE
from helpers import rand_qkv
from test_fwd_gluon import check, hopper

BM, BN, _ = fwd_gluon.DEFAULT_CONFIG[128]
FLAGS = [dict(qfree_late=True), dict(p32_carry=True), dict(qfree_late=True, p32_carry=True)]
ROUTED = dict(persistent=True, early_q=True, lean_mask=True)


def qkv(b=1, nq=512, nk=512, h=4, hk=2, d=128, dtype=torch.bfloat16):
    return (torch.empty(b, nq, h, d, dtype=dtype), torch.empty(b, nk, hk, d, dtype=dtype),
            torch.empty(b, nk, hk, d, dtype=dtype))


# ---------------------------------------------------------------------------------------
# CPU
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["qfree_late", "p32_carry"])
@pytest.mark.parametrize("kw", [dict(), dict(persistent=True), dict(window=(256, 0), persistent=True, lean_mask=True)])
def test_rejects_step_lean_without_early_q(name, kw):
    q, k, v = qkv()
    with pytest.raises(ValueError, match=name):
        forward_gluon.prepare(q, k, v, 0.125, **{name: True}, **kw)


@pytest.mark.parametrize("name", ["qfree_late", "p32_carry"])
def test_rejects_step_lean_not_a_bool(name):
    q, k, v = qkv()
    with pytest.raises(ValueError, match=name):
        forward_gluon.prepare(q, k, v, 0.125, persistent=True, early_q=True, **{name: 1})


@pytest.mark.parametrize("flags", FLAGS)
@pytest.mark.parametrize("window", [(256, 0), None])
def test_valid_step_lean_call_reaches_the_device_check(flags, window):
    q, k, v = qkv()
    kw = dict(ROUTED, window=window) if window else dict(persistent=True, early_q=True)
    if window is None:
        kw.pop("lean_mask", None)
    with pytest.raises(ValueError, match="CUDA"):
        forward_gluon.prepare(q, k, v, 0.125, **kw, **flags)


def _recorded_launch(monkeypatch, **kw):
    got = []
    monkeypatch.setattr(torch.cuda, "device", lambda device: contextlib.nullcontext())
    monkeypatch.setattr(plans, "launch", lambda kernel, grid, *a, **kw2: got.append((grid, a, kw2)))
    q, k, v = qkv()
    o = torch.empty_like(q)
    lse = torch.empty(1, 4, 512, dtype=torch.float32)
    forward_gluon._launch_into(q, k, v, o, lse, 0.125, BM, BN, 3, False, window=(256, 0), persistent=True,
                               num_programs=3, early_q=True, lean_mask=True, **kw)()
    assert len(got) == 1
    return got[0]


@pytest.mark.parametrize("flags", FLAGS)
def test_launch_arguments_step_lean(monkeypatch, flags):
    """The flags reach the kernel as QFREE_LATE / P32_CARRY only when set; every other argument as
    the routed launch's (whose keywords do not name them: its compile key is unchanged)."""
    grid, args, kw = _recorded_launch(monkeypatch, **flags)
    base_grid, base_args, base_kw = _recorded_launch(monkeypatch)
    assert grid == base_grid and len(args) == len(base_args)
    assert "QFREE_LATE" not in base_kw and "P32_CARRY" not in base_kw
    for name, key in (("qfree_late", "QFREE_LATE"), ("p32_carry", "P32_CARRY")):
        assert kw.pop(key, False) is flags.get(name, False)
    assert kw == base_kw


def test_kernel_flags_default_off():
    sig = inspect.signature(fwd_gluon.attn_fwd_gluon_kernel.fn)
    assert sig.parameters["QFREE_LATE"].default is False and sig.parameters["P32_CARRY"].default is False
    for fn in (fwd_gluon._fwd_consume, fwd_gluon._fwd_consume_persistent):
        s = inspect.signature(fn.fn)
        assert s.parameters["QFREE_LATE"].default is False and s.parameters["P32_CARRY"].default is False


def test_one_q_free_arrival_a_block_on_every_path():
    """_fwd_consume under EARLY_Q: without QFREE_LATE the peel's arrival (pred n_tiles == 1) and the
    per-tile one (pred j == q_last) in _consume_tile (EQ_TILE = EARLY_Q and not QFREE_LATE); with it
    neither, and one unpredicated arrival after the loops, before the last P V."""
    src = inspect.getsource(fwd_gluon._fwd_consume.fn)
    assert "EQ_TILE: gl.constexpr = EARLY_Q and not QFREE_LATE" in src
    assert src.count("q_last, EARLY_Q") == 0 and src.count("q_last, EQ_TILE") == 4   # every _consume_tile call
    peel = src.index("if not QFREE_LATE:")
    assert "mbarrier.arrive(q_free, pred=n_tiles == 1)" in src[peel:peel + 200]
    late = src.index("if EARLY_Q and QFREE_LATE:")
    last_pv = src.index("# the last tile's P V")
    assert late < last_pv and "mbarrier.arrive(q_free)" in src[late:last_pv]
    assert src.index("for j in range(t0 + n_full, t0 + n_tiles)") < late              # after the last loop
    tile = inspect.getsource(fwd_gluon._consume_tile.fn)
    assert "mbarrier.arrive(q_free, pred=j == q_last)" in tile


def test_p32_carry_converts_once_a_tile():
    """P32_CARRY: the carried P is converted exactly once before each P V wgmma (in _consume_tile
    before its issue, and before the last P V), and the peel / the step hand on the fp32 P."""
    tile = inspect.getsource(fwd_gluon._consume_tile.fn)
    i_conv = tile.index("if P32_CARRY:\n        p16 = gl.convert_layout(p16.to(dtype), p_layout)")
    assert i_conv < tile.index("o_tok = warpgroup_mma(p16")
    assert "p16 = p                                              # fp32" in tile
    src = inspect.getsource(fwd_gluon._fwd_consume.fn)
    conv = src.index("if P32_CARRY:\n        p16 = gl.convert_layout(p16.to(dtype), p_layout)")
    assert conv < src.index("o_tok = warpgroup_mma(p16, v_smem.index(last)")


_COMPILE = r"""
import json, re, sys
sys.path.insert(0, sys.argv[1])
import gluon_fwd_compile as g
out = {}
base = dict(persistent=True, window=True, early_q=True, lean_mask=True)
for name, kw in (("routed", base), ("qlate", dict(base, qfree_late=True)), ("p32", dict(base, p32_carry=True)),
                 ("both", dict(base, qfree_late=True, p32_carry=True)), ("plain", dict(persistent=True))):
    c = g.compile_fwd(128, "bf16", **kw)
    r = g.report(c)
    text = g.sass(c)
    ins = [(int(a, 16), t.strip()) for a, t in re.findall(r"/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;", text)]
    at = {a: i for i, (a, _) in enumerate(ins)}
    loops = []
    for i, (a, t) in enumerate(ins):
        m = re.search(r"BRA\s+0x([0-9a-f]+)", t)
        if m and int(m.group(1), 16) <= a and int(m.group(1), 16) in at:
            body = [x for _, x in ins[at[int(m.group(1), 16)]:i + 1]]
            if sum("WARPGROUP.ARRIVE" in x for x in body) == 2 and any("HGMMA" in x for x in body):
                loops.append(dict(n=len(body), prmt=sum("PRMT" in x for x in body),
                                  bar=sum("BAR.SYNC" in x for x in body),
                                  local=sum(bool(re.search(r"\b(?:LDL|STL)\b", x)) for x in body)))
    out[name] = dict(loops=loops, spill=r["spill_bytes"], smem=r["smem"], hgmma=r["hgmma"])
print(json.dumps(out))
"""


def test_step_lean_compiles_the_plain_tile_step():
    """Offline sm_90a (no GPU; bench/gluon_fwd_compile.py in a subprocess): the routed window form's
    unmasked tile loop has 64 PRMT and 3 BAR.SYNC a step against the plain PERSISTENT kernel's 0 and
    2; QFREE_LATE takes one BAR.SYNC out of every loop (0 spills), P32_CARRY every PRMT (spills
    <= 160 bytes; alone one STL / LDL pair in a left-edge loop, with QFREE_LATE none in the loops); with both the unmasked loop is the plain kernel's size
    within 12 instructions (session 33: 458 / 453 against 452 / 451). Shared memory and HGMMA as routed."""
    pytest.importorskip("triton.experimental.gluon")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, TRITON_INTERPRET="0", PYTHONPATH=os.path.join(root, "src"))
    res = subprocess.run([sys.executable, "-c", _COMPILE, os.path.join(root, "bench")], env=env,
                         capture_output=True, text=True, timeout=1200)
    assert res.returncode == 0, res.stderr[-2000:]
    r = json.loads(res.stdout.strip().splitlines()[-1])
    routed, plain = r["routed"], r["plain"]
    assert len(routed["loops"]) == 6 and len(plain["loops"]) == 2
    assert all(lp["prmt"] == 0 and lp["bar"] == 2 for lp in plain["loops"])
    assert [lp["prmt"] for lp in routed["loops"][1::3]] == [64, 64]
    assert all(lp["bar"] == 3 for lp in routed["loops"])
    for name in ("qlate", "p32", "both"):
        x = r[name]
        assert x["smem"] == routed["smem"] and x["hgmma"] == routed["hgmma"], (name, x)
        assert len(x["loops"]) == 6, (name, x)
        # (P32_CARRY alone, session 33 offline: one STL / LDL pair in the second consumer's left-edge
        # loop, which runs no tile at (1024, 0); with QFREE_LATE none)
        assert sum(lp["local"] for lp in x["loops"]) <= (2 if name == "p32" else 0), (name, x)
        assert x["spill"] <= 160, (name, x)
        if name in ("qlate", "both"):
            assert all(lp["bar"] == 2 for lp in x["loops"]), (name, x)
        if name in ("p32", "both"):
            assert all(lp["prmt"] == 0 for lp in x["loops"]), (name, x)
    assert r["qlate"]["spill"] == 0
    for c in range(2):
        assert abs(r["both"]["loops"][3 * c + 1]["n"] - plain["loops"][c]["n"]) <= 12, (r["both"], plain)


# ---------------------------------------------------------------------------------------
# GPU (Hopper)
# ---------------------------------------------------------------------------------------
_GPU_WINDOWS = [(1024, 0), (256, 0), (100, 37), (64, 0)]
_GPU_SHAPES = [
    (1, 2048, 2048, 4, 4),
    (2, 1024, 1536, 4, 2),      # Nq < Nk, GQA
    (1, 1536, 1024, 4, 1),      # Nq > Nk, GQA: with (100, 37) rows that see no key (O = 0, lse = +inf)
]


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("flags", FLAGS)
@pytest.mark.parametrize("window", _GPU_WINDOWS)
@pytest.mark.parametrize("b, nq, nk, h, hk", _GPU_SHAPES)
def test_step_lean_matches_reference_gpu(flags, window, b, nq, nk, h, hk):
    q, k, v = rand_qkv(b, nq, nk, h, hk, 128, torch.bfloat16, DEVICE)
    check(q, k, v, window=window, **ROUTED, **flags)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("flags", FLAGS)
@pytest.mark.parametrize("num_programs", [1, 3])
def test_step_lean_fp16_few_ctas_gpu(flags, num_programs):
    q, k, v = rand_qkv(1, 2048, 2048, 4, 2, 128, torch.float16, DEVICE)
    check(q, k, v, window=(1024, 0), num_programs=num_programs, **ROUTED, **flags)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("flags", FLAGS)
def test_step_lean_rows_without_keys_gpu(flags):
    """Nq - Nk = 1024 > right: the first 1024 - 37 rows see no key (whole blocks of them)."""
    q, k, v = rand_qkv(1, 2048, 1024, 2, 2, 128, torch.bfloat16, DEVICE)
    o, lse = check(q, k, v, window=(100, 37), **ROUTED, **flags)
    assert (o[:, :1024 - 37] == 0).all() and torch.isposinf(lse[:, :, :1024 - 37]).all()


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("flags", FLAGS)
@pytest.mark.parametrize("window", _GPU_WINDOWS + [(256, 256), (-1, 0), (-1, -1)])
@pytest.mark.parametrize("b, nq, nk, h, hk", [(1, 4096, 4096, 4, 2)] + _GPU_SHAPES[1:])
@pytest.mark.parametrize("num_programs", [None, 7])
def test_step_lean_bitwise_routed_gpu(flags, window, b, nq, nk, h, hk, num_programs):
    """Only the schedule changed: bitwise the routed form (PERSISTENT EARLY_Q LEAN_MASK) on the same
    CTA count; window (-1, 0) runs the CAUSAL EARLY_Q kernel, (-1, -1) the plain one (LEAN_MASK dropped
    by the launcher there)."""
    q, k, v = rand_qkv(b, nq, nk, h, hk, 128, torch.bfloat16, DEVICE)
    scale = 128 ** -0.5
    ref_o, ref_lse = attention_fwd_gluon(q, k, v, scale, window=window, num_programs=num_programs, **ROUTED)
    o, lse = attention_fwd_gluon(q, k, v, scale, window=window, num_programs=num_programs, **ROUTED, **flags)
    assert torch.equal(o, ref_o) and torch.equal(lse, ref_lse)


@pytest.mark.gpu
@hopper
def test_step_lean_repeated_launches_bitwise_gpu():
    """20 launches of one prepared call (the q_free phases run on across launches' blocks within each
    launch only; every launch starts fresh barriers): bitwise the first each time."""
    q, k, v = rand_qkv(1, 4096, 4096, 4, 2, 128, torch.bfloat16, DEVICE)
    call = forward_gluon.prepare(q, k, v, 128 ** -0.5, window=(1024, 0), num_programs=5, **ROUTED,
                                 qfree_late=True, p32_carry=True)
    o0, lse0 = (t.clone() for t in call())
    for _ in range(20):
        o, lse = call()
        assert torch.equal(o, o0) and torch.equal(lse, lse0)
