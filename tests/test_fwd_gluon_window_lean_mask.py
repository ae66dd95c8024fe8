"""kernels/fwd_gluon.py LEAN_MASK (a session-30 helper; routed with EARLY_Q in session 31): the
WINDOW forward's masked tiles with a cheaper mask (_softmax_step_lean): the peel and the left-edge
loop keep both window edges as ONE predicate and one select a score (_window_select's inline PTX:
setp, setp.and, selp; tl.where(a & b, ...) became two nested selects, 2 ISETP + 2 FSEL a score),
the right-edge / diagonal loop drops the left compare (always true past n_left). The kept scores
and every later operation are _softmax_step_masked's, so the outputs should be bitwise the
current WINDOW kernel's. Host side launchers/forward_gluon.py (lean_mask=True), switch
launchers.policy.GLUON_FWD_WINDOW_LEAN_MASK ({128: 4096}), A/B bench/gpu/s31_window_lean_mask_ab.py.

CPU: the one-sided claim over every block and half of many windows and shapes (the tile split
from the kernel's own _tile_coords lines: in [n_full, n_load) every row's left bound is at or
before the tile's first key), the loops' TWO_SIDED flags and the select's PTX from the kernel's
source; validation; launch arguments through a recorder; fwd_into's guard; the policy switch and
the route; an offline sm_90a compile in a subprocess (tile loops' SASS instruction counts, no
local memory, no spills). GPU (Hopper): float64 with the repo criterion (tests/helpers.py; fresh
random inputs, outputs NaN-poisoned by conftest) for windows (1024, 0), (256, 0), (100, 37),
Nq != Nk both ways (rows that see no key: O = 0, lse = +inf), GQA, D = 128 (D = 64 refused:
it spilled), a negative scale, PERSISTENT with few CTAs and EARLY_Q; bitwise equal to the WINDOW
kernel without LEAN_MASK (one block, PERSISTENT, EARLY_Q).
"""
import contextlib
import json
import os
import re
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
from test_fwd_gluon_window_early_q import _SHAPES, _WINDOWS, BM, BN, HALF, _code, window_block


# ---------------------------------------------------------------------------------------
# CPU: the kernel's own lines
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("left, right", _WINDOWS + [(256, 0), (1023, 0), (129, 5)])
@pytest.mark.parametrize("nq, nk", _SHAPES)
def test_right_edge_tiles_need_no_left_compare(nq, nk, left, right):
    """For every block and half, the tiles of the right-edge loop, [n_full, n_load), start at or
    past every row's first visible key (so _softmax_step_lean's one-sided mask there keeps exactly
    what the two-sided one keeps), and the two-sided mask of the other masked tiles is unchanged:
    visibility by brute force against the split of the kernel's _tile_coords lines."""
    key = torch.arange(nk)
    for pid_m in range(nq // BM):
        t_lo, n_load, nl0, nl1, nf0, nf1 = window_block(nq, nk, left, right, pid_m)
        for h, (n_left, n_full) in enumerate(((nl0, nf0), (nl1, nf1))):
            rows = pid_m * BM + h * HALF + torch.arange(HALF)
            d = rows + nk - nq                                            # each row's diagonal key
            lower, upper = d - left, d + right
            for j in range(n_full, n_load):
                first = (t_lo + j) * BN
                assert (lower <= first).all(), (pid_m, h, j, lower.max().item(), first)
                cols = key[first:first + BN]
                two = (cols[None, :] >= lower[:, None]) & (cols[None, :] <= upper[:, None])
                one = cols[None, :] <= upper[:, None]
                assert torch.equal(one, two)


def test_loops_pass_the_right_mask_forms():
    """_fwd_consume: the one-block peel LEFT under its runtime condition, else (and PERSISTENT:
    the second copy of the peel's softmax spilled there) BOTH; the left-edge loop BOTH,
    the right-edge loop RIGHT; _consume_tile hands SIDES to _softmax_step_lean only under
    LEAN_MASK (else the old step)."""
    code = _code(fwd_gluon._fwd_consume)
    # (session 49: VARLEN's KEY_BOUND peel sits between the LEAN_MASK peel and the masked one)
    peel = code[code.index("    if LEAN_MASK:"):code.index("    elif KEY_BOUND and VARLEN_FAST:")]
    step = r"p, m_i, l_i, alpha = _softmax_step_lean\(s, m_i, l_i, qk_scale, diag, wspan, s_layout, (\w+), NEG_SCALE\)"
    forms = re.search(rf"if PERSISTENT:\s+{step}\s+elif diag >= BLOCK_N - 1:\s+{step}\s+else:\s+{step}", peel)
    assert forms and forms.groups() == ("BOTH", "LEFT", "BOTH"), peel
    assert code.index("diag = diag + WG * HALF_M") < code.index("    if LEAN_MASK:")      # this half's first row
    win = code[code.index("    if WINDOW:\n        # the window's left-edge"):code.index("    # the last tile's P V")]
    calls = re.findall(r"EARLY_Q(?:, LEAN_MASK, (\w+))?(?:,\s*KEY_BOUND)?\)", win)
    # left edge, unmasked (WINDOW), unmasked (others: no LEAN_MASK), right edge
    assert calls == ["BOTH", "", "", "RIGHT"], calls
    tile = _code(fwd_gluon._consume_tile)
    assert "if LEAN_MASK:" in tile and "SIDES, NEG_SCALE)" in tile
    assert re.search(r"else:\s+p, m_i, l_i, alpha = _softmax_step_masked", tile)
    assert (fwd_gluon.BOTH, fwd_gluon.RIGHT, fwd_gluon.LEFT) == (0, 1, 2)


@pytest.mark.parametrize("left, right", _WINDOWS + [(256, 0), (1023, 0), (129, 5)])
@pytest.mark.parametrize("nq, nk", _SHAPES)
def test_peel_left_form_needs_no_right_compare(nq, nk, left, right):
    """The peel's LEFT form: where this half's first row's last visible key, counted from the
    block's first loaded key (the kernel's diag + WG * HALF_M), is >= BLOCK_N - 1, every row of the
    half sees the peeled tile's last key, so the right compare keeps everything."""
    taken = 0
    for pid_m in range(nq // BM):
        t_lo = window_block(nq, nk, left, right, pid_m)[0]
        for h in range(2):
            rows = pid_m * BM + h * HALF + torch.arange(HALF)
            upper = rows + nk - nq + right - t_lo * BN                   # relative to the peeled tile
            diag_w = pid_m * BM + nk - nq + right - t_lo * BN + h * HALF  # _tile_coords' diag, this half
            assert diag_w == upper[0]
            if diag_w >= BN - 1:
                taken += 1
                assert (upper >= BN - 1).all()
    if (nq, nk, left, right) == (2048, 2048, 1024, 0):
        assert taken == 2 * (2048 // BM - 1)                              # all but block 0 (its diagonal)


def test_lean_step_keeps_the_masked_arithmetic():
    """_softmax_step_lean's update after the mask is _softmax_step_masked's: both scale the scores before the mask
    under NEG_SCALE and end in the one _masked_softmax_tail (bitwise the same p, m, l, alpha), or (FOLD, session 52)
    mask the raw scores and end in _masked_softmax_tail_raw, whose max is scaled per row and whose exponent takes
    the scale in its FFMA; and the two-sided select keeps lo <= c <= hi with lo = the row's last key - wspan, hi =
    its last key: the old mask's two compares."""
    lean = _code(fwd_gluon._softmax_step_lean)
    old = _code(fwd_gluon._softmax_step_masked)
    lines = lambda src: [ln.strip() for ln in src.splitlines() if ln.strip()]
    for step in (lean, old):
        ln = lines(step)
        assert ln[-1] == "return _masked_softmax_tail_raw(s, m_i, l_i, qk_scale)", ln[-1]
        tail = ln.index("return _masked_softmax_tail(s, m_i, l_i)")
        assert ln[tail - 1] == "if NEG_SCALE:"
        scaled = [i for i, x in enumerate(ln) if x.startswith("s = s * qk_scale")]
        assert len(scaled) == 1 and ln[scaled[0] - 1] == "if NEG_SCALE:" and scaled[0] < tail - 1, ln
        assert not any("s * qk_scale" in x for i, x in enumerate(ln) if i != scaled[0] and x.startswith("s ="))
    assert "m_new" in _code(fwd_gluon._masked_softmax_tail)
    raw = _code(fwd_gluon._masked_softmax_tail_raw)
    assert "gl.max(s, axis=1) * qk_scale" in raw and "gl.exp2(s * qk_scale - gl.expand_dims(m_use, 1))" in raw
    assert re.search(r"_window_select\(s, gl\.expand_dims\(cols, 0\), gl\.expand_dims\(rows - wspan, 1\), "
                     r"gl\.expand_dims\(rows, 1\)\)", lean)
    assert re.search(r"gl\.where\(gl\.expand_dims\(cols, 0\) <= gl\.expand_dims\(rows, 1\), s, float\(\"-inf\"\)\)",
                     lean)
    assert re.search(r"gl\.where\(gl\.expand_dims\(cols, 0\) >= gl\.expand_dims\(rows - wspan, 1\), s, "
                     r"float\(\"-inf\"\)\)", lean)
    assert 's = gl.where(visible, s, float("-inf"))' in old
    src = open(fwd_gluon.__file__).read()                          # (a triton.jit function: interpreted here)
    ptx = src[src.index("def _window_select("):src.index("def _softmax_step_lean(")]
    assert "setp.ge.s32 k, $2, $3; setp.le.and.s32 k, $2, $4, k; selp.f32 $0, $1, 0fFF800000, k;" in ptx


def _select_model(x, c, lo, hi):
    """_window_select's PTX in torch: k = (c >= lo) and (c <= hi); x if k else -inf."""
    return torch.where((c >= lo) & (c <= hi), x, torch.full_like(x, float("-inf")))


def test_select_model_matches_the_old_mask():
    """The old mask, where(c <= r & c >= r - wspan, x, -inf), equals the select on random rows,
    edges and spans (negative, zero, unbounded spans and limits)."""
    g = torch.Generator().manual_seed(3)
    for _ in range(50):
        lim0 = int(torch.randint(-300, 300, (1,), generator=g))
        wspan = int(torch.randint(0, 400, (1,), generator=g))
        rows = lim0 + torch.arange(HALF)[:, None]
        cols = torch.arange(BN)[None, :]
        x = torch.randn(HALF, BN, generator=g)
        old = torch.where((cols <= rows) & (cols >= rows - wspan), x, torch.full_like(x, float("-inf")))
        assert torch.equal(_select_model(x, cols, rows - wspan, rows), old)


def qkv(b=1, nq=512, nk=512, h=4, hk=2, d=128, dtype=torch.bfloat16):
    return (torch.empty(b, nq, h, d, dtype=dtype), torch.empty(b, nk, hk, d, dtype=dtype),
            torch.empty(b, nk, hk, d, dtype=dtype))


@pytest.mark.parametrize("kw", [
    dict(lean_mask=True),                                            # no window
    dict(lean_mask=True, window=(256, 0), dropout_p=0.1, rng=torch.zeros(2, dtype=torch.int64)),
    dict(lean_mask=1, window=(256, 0)),                              # not a bool
])
@pytest.mark.parametrize("d", [128, 64])
def test_rejects_lean_mask_outside_its_variant(kw, d):
    q, k, v = qkv(d=d)
    with pytest.raises(ValueError, match="lean_mask"):
        forward_gluon.prepare(q, k, v, 0.125, **kw)


def test_rejects_lean_mask_at_d64():
    """D = 128 only (the kernel's static_assert: D = 64 spilled 8 bytes offline; not routed)."""
    q, k, v = qkv(d=64)
    with pytest.raises(ValueError, match="lean_mask"):
        forward_gluon.prepare(q, k, v, 0.125, window=(256, 0), lean_mask=True)


def test_rejects_lean_mask_with_three_consumers():
    q, k, v = qkv(d=64, nq=384, nk=384)
    with pytest.raises(ValueError, match="lean_mask"):
        forward_gluon.prepare(q, k, v, 0.125, persistent=True, num_consumers=3, window=(256, 0), lean_mask=True)


@pytest.mark.parametrize("kw", [dict(), dict(persistent=True), dict(persistent=True, early_q=True)])
def test_valid_lean_mask_call_reaches_the_device_check(kw):
    q, k, v = qkv()
    with pytest.raises(ValueError, match="CUDA"):
        forward_gluon.prepare(q, k, v, 0.125, window=(256, 0), lean_mask=True, **kw)


def _recorded_launch(monkeypatch, window=(256, 0), **kw):
    got = []
    monkeypatch.setattr(torch.cuda, "device", lambda device: contextlib.nullcontext())
    monkeypatch.setattr(plans, "launch", lambda kernel, grid, *a, **kw2: got.append((grid, a, kw2)))
    q, k, v = qkv()
    o = torch.empty_like(q)
    lse = torch.empty(1, 4, 512, dtype=torch.float32)
    forward_gluon._launch_into(q, k, v, o, lse, 0.125, BM, BN, 3, False, window=window, **kw)()
    assert len(got) == 1
    return got[0]


def test_launch_arguments_lean_mask(monkeypatch):
    """LEAN_MASK=True with WINDOW (one block a CTA: grid (Nq / BLOCK_M, B * H)); every other
    argument as without it."""
    grid, args, kw = _recorded_launch(monkeypatch, lean_mask=True)
    base_grid, base_args, base_kw = _recorded_launch(monkeypatch)
    assert grid == base_grid == (512 // BM, 4)
    assert kw.pop("LEAN_MASK") is True and kw["WINDOW"] and not (kw["PERSISTENT"] or kw["DROPOUT"] or kw["CAUSAL"])
    assert kw == base_kw and "LEAN_MASK" not in base_kw
    assert len(args) == len(base_args)
    names = [n for n in fwd_gluon.attn_fwd_gluon_kernel.arg_names
             if n.upper() != n or n in ("LSE", "SCHED", "RNG", "O")]
    assert (args[names.index("win_left")], args[names.index("win_right")]) == (256, 0)


def test_launch_arguments_lean_mask_persistent_early_q(monkeypatch):
    _, _, kw = _recorded_launch(monkeypatch, lean_mask=True, persistent=True, num_programs=3, early_q=True)
    assert kw["LEAN_MASK"] is True and kw["EARLY_Q"] is True and kw["PERSISTENT"] and kw["WINDOW"]


@pytest.mark.parametrize("window, causal", [((-1, 0), True), ((-1, -1), False), ((600, 600), False)])
def test_launch_drops_lean_mask_without_the_window_kernel(monkeypatch, window, causal):
    """A window window_args turns into the CAUSAL or the plain kernel (edges past every key) has no
    WINDOW mask: no LEAN_MASK (the kernel's static_assert would refuse it)."""
    _, _, kw = _recorded_launch(monkeypatch, window=window, lean_mask=True)
    assert "LEAN_MASK" not in kw and not kw["WINDOW"] and kw["CAUSAL"] == causal


@pytest.mark.parametrize("kw, expect", [
    (dict(window=(256, 0), lean_mask=True), True),
    (dict(window=(256, 0)), False),
    (dict(window=(256, 0), lean_mask=True, persistent=True, early_q=True), True),
    (dict(lean_mask=True), "error"),                                                  # no window
    (dict(window=(256, 0), lean_mask=True, dropout_p=0.1, rng=torch.zeros(2, dtype=torch.int64)), "error"),
    (dict(window=(256, 0), lean_mask=True, d=64), "error"),                           # D = 128 only
])
def test_fwd_into_lean_mask_guard(monkeypatch, kw, expect):
    """fwd_into passes LEAN_MASK where check_lean_mask allows it; where it does not, the route's
    request is a ValueError naming lean_mask before any launch (review of session 31: it was
    dropped silently, a second copy of the rule)."""
    got = []
    monkeypatch.setattr(forward_gluon, "_launch_into",
                        lambda *a, **k2: got.append(k2.get("lean_mask", "absent")) or (lambda: None))
    q, k, v = qkv(d=kw.pop("d", 128))
    if expect == "error":
        with pytest.raises(ValueError, match=r"^lean_mask=True: "):
            forward_gluon.fwd_into(q, k, v, torch.empty_like(q), None, 0.125, **kw)
        assert got == []
        return
    forward_gluon.fwd_into(q, k, v, torch.empty_like(q), None, 0.125, **kw)
    assert got == [True if expect else "absent"]


def test_window_lean_mask_switch(monkeypatch):
    """Routed in session 31 (bench/gpu/s31_window_lean_mask_ab.py, EARLY_Q with LEAN_MASK +5.4%
    at 16k): D = 128 from min(Nq, Nk) = 4096; the table's min(Nq, Nk) and head dims only."""
    assert policy.GLUON_FWD_WINDOW_LEAN_MASK == {128: 4096}
    monkeypatch.setitem(policy.GLUON_FWD_WINDOW_LEAN_MASK, 128, 8192)
    assert not policy.gluon_fwd_window_lean_mask(128, 4096, 8192)
    monkeypatch.setitem(policy.GLUON_FWD_WINDOW_LEAN_MASK, 128, 4096)
    assert policy.gluon_fwd_window_lean_mask(128, 4096, 8192)
    assert not policy.gluon_fwd_window_lean_mask(128, 2048, 8192)
    assert not policy.gluon_fwd_window_lean_mask(64, 16384, 16384)


@pytest.mark.parametrize("table, early, expect", [
    ({}, {}, (False, False)), ({128: 256}, {}, (True, False)), ({128: 256}, {128: 256}, (True, True))])
def test_route_passes_lean_mask(monkeypatch, table, early, expect):
    """launchers.forward's window route hands the switch to fwd_into (CPU: the route forced, fwd_into
    replaced by a recorder), with or without EARLY_Q's."""
    from flashtriton import flash_attn_func
    import flashtriton
    from flashtriton.launchers import forward

    monkeypatch.setattr(forward, "gluon_fwd", lambda *a: False)
    monkeypatch.setattr(forward, "gluon_fwd_window", lambda *a: True)
    monkeypatch.setattr(policy, "GLUON_FWD_WINDOW_LEAN_MASK", dict(table))
    monkeypatch.setattr(policy, "GLUON_FWD_WINDOW_EARLY_Q", dict(early))
    plans.clear()
    got = []

    def fake_fwd_into(q, k, v, out, lse, scale, causal=False, persistent=False, window=None, early_q=False,
                      lean_mask=False, **kw):
        got.append((lean_mask, early_q, window))
        out.zero_()
        lse.zero_()
    monkeypatch.setattr(forward_gluon, "fwd_into", fake_fwd_into)
    q, k, v = rand_qkv(1, 512, 512, 2, 1, 128, torch.bfloat16, DEVICE)
    with flashtriton.use_backend("triton"):
        flash_attn_func(q, k, v, window_size=(256, 0))
    plans.clear()
    assert got == [expect + ((256, 0),)], got


_COMPILE = r"""
import json, re, sys
sys.path.insert(0, sys.argv[1])
import gluon_fwd_compile as g
out = {}
for name, kw in (("base", dict()), ("lean", dict(lean_mask=True)),
                 ("lean_pers", dict(lean_mask=True, persistent=True))):
    c = g.compile_fwd(int(sys.argv[2]), "bf16", window=True, **kw)
    r = g.report(c)
    text = g.sass(c)
    out[name] = dict(loops=r["tile_loops"], spill=r["spill_bytes"], smem=r["smem"], hgmma=r["hgmma"],
                     local=len(re.findall(r"\b(?:LDL|STL)\b", text)), fsel=len(re.findall(r"\bFSEL\b", text)))
print(json.dumps(out))
"""


@pytest.mark.parametrize("d", [128])
def test_lean_mask_compiles_shorter_masked_loops(d):
    """Offline sm_90a (no GPU; bench/gluon_fwd_compile.py in a subprocess, outside the test
    session's interpreter mode): LEAN_MASK's WINDOW kernel (D = 128), one block a CTA and PERSISTENT, has
    no spills and no local memory, the shared memory (PERSISTENT: + its q_free barrier) and
    HGMMA of the one-block kernel without it, the
    same unmasked loop (within a few instructions), and masked loops at least 60 (left edge, two-
    sided) and 120 (diagonal, one-sided) SASS instructions a warp a tile shorter (session 30,
    D = 128: 756 / 522 / 718 against 820 / 522 / 852)."""
    pytest.importorskip("triton.experimental.gluon")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, TRITON_INTERPRET="0", PYTHONPATH=os.path.join(root, "src"))
    res = subprocess.run([sys.executable, "-c", _COMPILE, os.path.join(root, "bench"), str(d)], env=env,
                         capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stderr[-2000:]
    r = json.loads(res.stdout.strip().splitlines()[-1])
    base = r["base"]
    for name in ("lean", "lean_pers"):
        lean = r[name]
        assert lean["spill"] == 0 and lean["local"] == 0, (name, lean)
        # (PERSISTENT: one more mbarrier, q_free)
        assert base["smem"] <= lean["smem"] <= base["smem"] + (64 if name == "lean_pers" else 0), (name, lean, base)
        assert lean["hgmma"] == base["hgmma"], (name, lean, base)
        assert len(lean["loops"]) == 6, (name, lean)          # 3 loops a consumer
        assert lean["fsel"] < base["fsel"], (name, lean, base)
    lean = r["lean"]
    for c in range(2):
        b_left, b_mid, b_diag = base["loops"][3 * c:3 * c + 3]
        l_left, l_mid, l_diag = lean["loops"][3 * c:3 * c + 3]
        assert abs(l_mid - b_mid) <= 8, (lean, base)
        assert l_left <= b_left - 60, (lean, base)
        assert l_diag <= b_diag - 120, (lean, base)
    # (the whole one-block kernel is LONGER, 7,968 against 7,592: its peel's softmax twice, the
    # left-edge-only copy and the both-edged one, of which one runs a block)


# ---------------------------------------------------------------------------------------
# GPU (Hopper)
# ---------------------------------------------------------------------------------------
_GPU_WINDOWS = [(1024, 0), (256, 0), (100, 37)]
_GPU_SHAPES = [
    (1, 2048, 2048, 4, 4),
    (2, 1024, 1536, 4, 2),      # Nq < Nk, GQA
    (1, 1536, 1024, 4, 1),      # Nq > Nk, GQA: with (100, 37) rows that see no key (O = 0, lse = +inf)
]


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("window", _GPU_WINDOWS)
@pytest.mark.parametrize("b, nq, nk, h, hk", _GPU_SHAPES)
def test_lean_mask_matches_reference_gpu(dtype, window, b, nq, nk, h, hk):
    q, k, v = rand_qkv(b, nq, nk, h, hk, 128, dtype, DEVICE)
    check(q, k, v, window=window, lean_mask=True)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("window", _GPU_WINDOWS)
@pytest.mark.parametrize("b, nq, nk, h, hk", _GPU_SHAPES)
@pytest.mark.parametrize("kw", [dict(persistent=True, num_programs=3), dict(persistent=True, early_q=True)])
def test_lean_mask_persistent_matches_reference_gpu(window, b, nq, nk, h, hk, kw):
    """PERSISTENT (few CTAs: every CTA loops over many blocks) and EARLY_Q with LEAN_MASK (the peel
    both-edged there)."""
    q, k, v = rand_qkv(b, nq, nk, h, hk, 128, torch.bfloat16, DEVICE)
    check(q, k, v, window=window, lean_mask=True, **kw)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("window", _GPU_WINDOWS)
def test_lean_mask_negative_scale_gpu(window):
    q, k, v = rand_qkv(1, 2048, 2048, 4, 2, 128, torch.bfloat16, DEVICE)
    check(q, k, v, scale=-0.05, window=window, lean_mask=True)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("d", [128])
def test_lean_mask_rows_without_keys_gpu(d):
    """Nq - Nk = 1024 > right: the first 1024 - 37 rows see no key (whole blocks of them)."""
    q, k, v = rand_qkv(1, 2048, 1024, 2, 2, d, torch.bfloat16, DEVICE)
    o, lse = check(q, k, v, window=(100, 37), lean_mask=True)
    assert (o[:, :1024 - 37] == 0).all() and torch.isposinf(lse[:, :, :1024 - 37]).all()


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("window", _GPU_WINDOWS + [(256, 256), (-1, 0), (-1, -1)])
@pytest.mark.parametrize("b, nq, nk, h, hk", [(1, 4096, 4096, 4, 2)] + _GPU_SHAPES[1:])
def test_lean_mask_bitwise_current_kernel_gpu(window, b, nq, nk, h, hk):
    """Only the mask's form changed: bitwise the WINDOW kernel without LEAN_MASK, one block a CTA,
    PERSISTENT and PERSISTENT EARLY_Q (window (-1, 0): CAUSAL, (-1, -1): plain, LEAN_MASK dropped)."""
    q, k, v = rand_qkv(b, nq, nk, h, hk, 128, torch.bfloat16, DEVICE)
    scale = 128 ** -0.5
    ref_o, ref_lse = attention_fwd_gluon(q, k, v, scale, window=window)
    o, lse = attention_fwd_gluon(q, k, v, scale, window=window, lean_mask=True)
    assert torch.equal(o, ref_o) and torch.equal(lse, ref_lse)
    o, lse = attention_fwd_gluon(q, k, v, scale, window=window, lean_mask=True, persistent=True, num_programs=7)
    assert torch.equal(o, ref_o) and torch.equal(lse, ref_lse)
    o, lse = attention_fwd_gluon(q, k, v, scale, window=window, lean_mask=True, persistent=True, num_programs=7,
                                 early_q=True)
    assert torch.equal(o, ref_o) and torch.equal(lse, ref_lse)


@pytest.mark.gpu
@hopper
def test_flash_attn_func_takes_routed_window_form_gpu(monkeypatch):
    """(review, session 31) The form the library routes since session 31, both switches on
    together (PERSISTENT + EARLY_Q + LEAN_MASK) through flash_attn_func, lengths lowered to reach
    it at 2k: that launch, bitwise the one-block WINDOW kernel without either."""
    from flashtriton import flash_attn_func

    for table in (policy.GLUON_FWD_WINDOW_EARLY_Q, policy.GLUON_FWD_WINDOW_LEAN_MASK, policy.GLUON_FWD_WINDOW_MIN_N):
        monkeypatch.setitem(table, 128, 1024)
    plans.clear()
    seen = []
    real = forward_gluon._launch_into
    monkeypatch.setattr(forward_gluon, "_launch_into", lambda *a, **kw: seen.append(
        (a[11], kw.get("early_q", False), kw.get("lean_mask", False))) or real(*a, **kw))
    q, k, v = rand_qkv(2, 2048, 2048, 4, 2, 128, torch.bfloat16, DEVICE)
    out = flash_attn_func(q, k, v, window_size=(300, 0))
    assert seen == [(True, True, True)], seen     # (persistent, early_q, lean_mask); before the reference's launch
    plans.clear()
    ref, _ = attention_fwd_gluon(q, k, v, 128 ** -0.5, window=(300, 0))
    assert torch.equal(out, ref)


def test_window_early_q_and_lean_mask_route_together():
    """(review, session 31) EARLY_Q was measured, and is routed, only together with LEAN_MASK
    (bench/gpu/s31_window_lean_mask_ab.py): the two tables stay equal."""
    assert policy.GLUON_FWD_WINDOW_EARLY_Q == policy.GLUON_FWD_WINDOW_LEAN_MASK


@pytest.mark.gpu
@hopper
def test_flash_attn_func_takes_lean_mask_gpu(monkeypatch):
    """The route with the switch on: the LEAN_MASK launch, bitwise the kernel without it."""
    from flashtriton import flash_attn_func

    monkeypatch.setitem(policy.GLUON_FWD_WINDOW_LEAN_MASK, 128, 1024)
    monkeypatch.setitem(policy.GLUON_FWD_WINDOW_MIN_N, 128, 1024)
    plans.clear()
    seen = []
    real = forward_gluon._launch_into
    monkeypatch.setattr(forward_gluon, "_launch_into",
                        lambda *a, **kw: seen.append(kw.get("lean_mask")) or real(*a, **kw))
    q, k, v = rand_qkv(1, 2048, 2048, 4, 4, 128, torch.bfloat16, DEVICE)
    out = flash_attn_func(q, k, v, window_size=(256, 0))
    assert seen == [True]                        # before the reference's own launch (same spy)
    plans.clear()
    ref, _ = attention_fwd_gluon(q, k, v, 128 ** -0.5, window=(256, 0))
    assert torch.equal(out, ref)
