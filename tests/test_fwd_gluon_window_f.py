"""kernels/fwd_gluon.py WINDOW_F (a session-33 helper, offline; not routed): EPI_DEFER (a block's
epilogue under the next block's S_0 wgmma, the scores tied to it by an exact S + (-0.0)) and
Q_PREFETCH (the loader prefetches the CTA's next block's Q rows into the L2 a block ahead) on the
PERSISTENT EARLY_Q kernel, the routed sliding-window form (issue 3: the per-block fixed cost F).
Host side launchers/forward_gluon.py (epi_defer=True / q_prefetch=True, check_window_f),
switches launchers.policy.GLUON_FWD_WINDOW_EPI_DEFER / _Q_PREFETCH (empty), A/B
bench/gpu/s33_window_f_ab.py, write-up bench/wip/gluon-window-f.md.

CPU: validation; launch arguments through a recorder (EPI_DEFER, Q_PREFETCH, QP = the q the
descriptor reads; Q_PREFETCH dropped for rows that are not packed); fwd_into's guards; the switches
and the route; the tie's arithmetic (x + (-0.0) == x bitwise for every float32, the -0.0 from PTX
min / rcp semantics) and its PTX in the source; the prefetch's lane -> (row, line) map covering a
block's Q rows exactly once (D = 64 / 128 / 256); EPI_DEFER's code adds no barrier call; an
offline sm_90a compile in a subprocess (no local memory in the tile loops, spills bounded, tile
loops / HGMMA / DEPBAR.LE 1 as the routed kernel's, 8 L2 prefetches). GPU (Hopper): float64 with
the repo criterion (NaN-poisoned outputs) and bitwise equal to the routed kernel (PERSISTENT
EARLY_Q LEAN_MASK) and the one-block WINDOW kernel, windows 64 / 256 / 1024 / (100, 37),
Nq = Nk, Nq < Nk and Nq > Nk (rows that see no key), GQA, 1 / 3 / 7 / all CTAs; plain and causal
PERSISTENT EARLY_Q too; repeated launches, a CUDA-graph replay, and the library's route with the
switches on.
"""
import contextlib
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

BM, BN = 128, 128


def qkv(b=1, nq=512, nk=512, h=4, hk=2, d=128, dtype=torch.bfloat16):
    return (torch.empty(b, nq, h, d, dtype=dtype), torch.empty(b, nk, hk, d, dtype=dtype),
            torch.empty(b, nk, hk, d, dtype=dtype))


# ---------------------------------------------------------------------------------------
# CPU: validation and launch arguments
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("kw, name", [
    (dict(epi_defer=True, window=(256, 0)), "epi_defer"),                                   # no early_q
    (dict(epi_defer=True, persistent=True, window=(256, 0)), "epi_defer"),                  # no early_q
    (dict(epi_defer=1, persistent=True, early_q=True, window=(256, 0)), "epi_defer"),       # not a bool
    (dict(q_prefetch=True, window=(256, 0)), "q_prefetch"),                                 # not persistent
    (dict(q_prefetch="yes", persistent=True), "q_prefetch"),
    (dict(epi_defer=True, persistent=True, early_q=False, lean_mask=True, window=(256, 0)), "epi_defer"),
])
def test_rejects_window_f_outside_its_variant(kw, name):
    q, k, v = qkv()
    with pytest.raises(ValueError, match=name):
        forward_gluon.prepare(q, k, v, 0.125, **kw)


@pytest.mark.parametrize("kw", [dict(epi_defer=True, early_q=True), dict(q_prefetch=True)])
def test_rejects_window_f_at_d64(kw):
    """D = 128 only (the kernel's static_assert: the head dim compiled and tested with them)."""
    q, k, v = qkv(d=64)
    with pytest.raises(ValueError, match="head dim 128"):
        forward_gluon.prepare(q, k, v, 0.125, persistent=True, window=(256, 0), **kw)


def test_rejects_window_f_with_three_consumers():
    q, k, v = qkv(d=128, nq=384, nk=384)
    with pytest.raises(ValueError, match="q_prefetch"):
        forward_gluon.prepare(q, k, v, 0.125, persistent=True, num_consumers=3, q_prefetch=True)


@pytest.mark.parametrize("kw", [
    dict(window=(1024, 0), persistent=True, early_q=True, lean_mask=True, epi_defer=True),
    dict(window=(1024, 0), persistent=True, early_q=True, lean_mask=True, q_prefetch=True),
    dict(window=(64, 0), persistent=True, early_q=True, lean_mask=True, epi_defer=True, q_prefetch=True),
    dict(persistent=True, early_q=True, epi_defer=True, q_prefetch=True),                   # plain
    dict(causal=True, persistent=True, early_q=True, epi_defer=True),                       # causal
    dict(persistent=True, q_prefetch=True),                                                 # no EARLY_Q
])
def test_valid_window_f_call_reaches_the_device_check(kw):
    q, k, v = qkv()
    with pytest.raises(ValueError, match="CUDA"):
        forward_gluon.prepare(q, k, v, 0.125, **kw)


def _recorded_launch(monkeypatch, q=None, window=(256, 0), **kw):
    got = []
    monkeypatch.setattr(torch.cuda, "device", lambda device: contextlib.nullcontext())
    monkeypatch.setattr(plans, "launch", lambda kernel, grid, *a, **kw2: got.append((grid, a, kw2)))
    if q is None:
        q, _, _ = qkv()
    _, k, v = qkv()
    o = torch.empty(1, 512, 4, 128, dtype=torch.bfloat16)
    lse = torch.empty(1, 4, 512, dtype=torch.float32)
    forward_gluon._launch_into(q, k, v, o, lse, 0.125, BM, BN, 3, False, window=window, **kw)()
    assert len(got) == 1
    return got[0], q


_ROUTED = dict(persistent=True, num_programs=3, early_q=True, lean_mask=True)


def test_launch_arguments_window_f(monkeypatch):
    """(window (256, 0) at 512 tokens: the WINDOW kernel; (1024, 0) would be the causal one there.)
    EPI_DEFER=True, Q_PREFETCH=True and QP = q (the launcher's q, packed rows) on top of the
    routed form's arguments; positional arguments unchanged; neither flag without its keyword."""
    (grid, args, kw), q = _recorded_launch(monkeypatch, epi_defer=True, q_prefetch=True, **_ROUTED)
    (base_grid, base_args, base_kw), _ = _recorded_launch(monkeypatch, **_ROUTED)
    assert grid == base_grid == (3,)
    assert kw.pop("EPI_DEFER") is True and kw.pop("Q_PREFETCH") is True
    assert kw.pop("QP") is q
    assert kw == base_kw and not ({"EPI_DEFER", "Q_PREFETCH", "QP"} & set(base_kw))
    assert kw["WINDOW"] and kw["PERSISTENT"] and kw["EARLY_Q"] and kw["LEAN_MASK"] and not kw["CAUSAL"]
    assert len(args) == len(base_args)
    assert all(a is b or a == b for a, b in zip(args, base_args) if not isinstance(a, torch.Tensor)
               and type(a).__name__ != "TensorDescriptor")
    (_, _, kw1), _ = _recorded_launch(monkeypatch, epi_defer=True, **_ROUTED)
    assert kw1["EPI_DEFER"] is True and "Q_PREFETCH" not in kw1 and "QP" not in kw1
    (_, _, kw2), _ = _recorded_launch(monkeypatch, q_prefetch=True, **_ROUTED)
    assert kw2["Q_PREFETCH"] is True and "EPI_DEFER" not in kw2


def test_launch_drops_q_prefetch_for_rows_not_packed(monkeypatch):
    """A q whose rows are H * D elements apart in a wider buffer (q of a packed qkv: stride(1) =
    3 * H * D) keeps its view (no copy), and the kernel's prefetch addresses assume packed rows:
    Q_PREFETCH is dropped (a hint; the outputs do not depend on it)."""
    qkv3 = torch.empty(1, 512, 3, 4, 128, dtype=torch.bfloat16)
    q = qkv3[:, :, 0]
    assert q.stride(1) == 3 * 4 * 128
    (_, _, kw), _ = _recorded_launch(monkeypatch, q=q, q_prefetch=True, **_ROUTED)
    assert "Q_PREFETCH" not in kw and "QP" not in kw
    assert kw["EARLY_Q"] is True


def test_launch_arguments_kernel_parameter_last():
    """QP is the kernel's last parameter (its offset after every other one) and defaults to None
    (the JIT specialises an omitted QP as the constexpr None: the other variants' signatures and
    SASS unchanged); EPI_DEFER / Q_PREFETCH default False."""
    k = fwd_gluon.attn_fwd_gluon_kernel
    names = k.arg_names
    assert names[-1] == "QP" and k.params[-1].default is None
    assert k.params[names.index("EPI_DEFER")].default is False
    assert k.params[names.index("Q_PREFETCH")].default is False


@pytest.mark.parametrize("kw, expect", [
    (dict(window=(1024, 0), persistent=True, early_q=True, lean_mask=True, epi_defer=True, q_prefetch=True),
     (True, True)),
    (dict(window=(1024, 0), persistent=True, early_q=True, lean_mask=True), ("absent", "absent")),
    (dict(window=(1024, 0), epi_defer=True, q_prefetch=True, lean_mask=True), ("absent", "absent")),  # one block
    (dict(window=(1024, 0), persistent=True, epi_defer=True, q_prefetch=True), ("absent", True)),      # no EARLY_Q
])
def test_fwd_into_window_f_guard(monkeypatch, kw, expect):
    """fwd_into passes EPI_DEFER only where EARLY_Q is taken, Q_PREFETCH only persistent (2
    consumers); elsewhere the call runs without them (bitwise the same outputs)."""
    got = []
    monkeypatch.setattr(forward_gluon, "_launch_into",
                        lambda *a, **k2: got.append((k2.get("epi_defer", "absent"), k2.get("q_prefetch", "absent")))
                        or (lambda: None))
    q, k, v = qkv()
    forward_gluon.fwd_into(q, k, v, torch.empty_like(q), None, 0.125, **kw)
    assert got == [expect]


def test_fwd_into_drops_epi_defer_when_out_rows_not_packed(monkeypatch):
    """EARLY_Q (and so EPI_DEFER) needs out's packed rows; an out that has not gets neither."""
    got = []
    monkeypatch.setattr(forward_gluon, "_launch_into",
                        lambda *a, **k2: got.append((k2.get("early_q"), k2.get("epi_defer"))) or (lambda: None))
    q, k, v = qkv()
    out = torch.empty(1, 512, 8, 128, dtype=torch.bfloat16)[:, :, :4]
    forward_gluon.fwd_into(q, k, v, out, None, 0.125, window=(1024, 0), persistent=True, early_q=True,
                           lean_mask=True, epi_defer=True)
    assert got == [(None, None)]


# ---------------------------------------------------------------------------------------
# CPU: the switches and the route
# ---------------------------------------------------------------------------------------
def test_window_f_switches_off():
    """Not measured yet (bench/gpu/s33_window_f_ab.py): both tables empty."""
    assert policy.GLUON_FWD_WINDOW_EPI_DEFER == {}
    assert policy.GLUON_FWD_WINDOW_Q_PREFETCH == {}
    assert not policy.gluon_fwd_window_epi_defer(128, 16384, 16384)
    assert not policy.gluon_fwd_window_q_prefetch(128, 16384, 16384)


def test_window_f_switch_rules(monkeypatch):
    monkeypatch.setitem(policy.GLUON_FWD_WINDOW_EPI_DEFER, 128, 4096)
    monkeypatch.setitem(policy.GLUON_FWD_WINDOW_Q_PREFETCH, 128, 8192)
    assert policy.gluon_fwd_window_epi_defer(128, 4096, 8192)
    assert not policy.gluon_fwd_window_epi_defer(128, 2048, 8192)
    assert not policy.gluon_fwd_window_q_prefetch(128, 4096, 8192)
    assert policy.gluon_fwd_window_q_prefetch(128, 8192, 8192)
    assert not policy.gluon_fwd_window_epi_defer(64, 16384, 16384)


@pytest.mark.parametrize("early, epi, pf, expect", [
    ({}, {}, {}, (False, False, False)),
    ({128: 256}, {}, {}, (True, False, False)),
    ({128: 256}, {128: 256}, {}, (True, True, False)),
    ({128: 256}, {128: 256}, {128: 256}, (True, True, True)),
    ({}, {128: 256}, {128: 256}, (False, False, False)),        # only on the EARLY_Q route
])
def test_route_passes_window_f(monkeypatch, early, epi, pf, expect):
    """launchers.forward's window route hands the switches to fwd_into, only with EARLY_Q's
    (CPU: the route forced, fwd_into replaced by a recorder)."""
    from flashtriton import flash_attn_func
    import flashtriton
    from flashtriton.launchers import forward

    monkeypatch.setattr(forward, "gluon_fwd", lambda *a: False)
    monkeypatch.setattr(forward, "gluon_fwd_window", lambda *a: True)
    monkeypatch.setattr(policy, "GLUON_FWD_WINDOW_EARLY_Q", dict(early))
    monkeypatch.setattr(policy, "GLUON_FWD_WINDOW_EPI_DEFER", dict(epi))
    monkeypatch.setattr(policy, "GLUON_FWD_WINDOW_Q_PREFETCH", dict(pf))
    plans.clear()
    got = []

    def fake_fwd_into(q, k, v, out, lse, scale, causal=False, persistent=False, window=None, early_q=False,
                      lean_mask=False, epi_defer=False, q_prefetch=False, **kw):
        got.append((early_q, epi_defer, q_prefetch))
        out.zero_()
        lse.zero_()
    monkeypatch.setattr(forward_gluon, "fwd_into", fake_fwd_into)
    q, k, v = rand_qkv(1, 512, 512, 2, 1, 128, torch.bfloat16, DEVICE)
    with flashtriton.use_backend("triton"):
        flash_attn_func(q, k, v, window_size=(256, 0))
    plans.clear()
    assert got == [expect], got


# ---------------------------------------------------------------------------------------
# CPU: the kernel's own lines
# ---------------------------------------------------------------------------------------
def _ptx_min(a, b):
    """PTX min.f32: the other operand when one is NaN (fmin)."""
    return torch.fmin(a, b)


def test_tie_value_is_negative_zero():
    """_neg_zero_after's PTX in torch: t = min(min(lse, om), -inf) = -inf for every lse / om (NaN,
    +-inf included), rcp(-inf) = -0.0."""
    vals = torch.tensor([0.0, -0.0, 1.5, -7.0, float("inf"), float("-inf"), float("nan"), 3e38, 1e-45])
    a, b = torch.meshgrid(vals, vals, indexing="ij")
    t = _ptx_min(_ptx_min(a, b), torch.full_like(a, float("-inf")))
    assert torch.isneginf(t).all()
    z = 1.0 / t
    assert (z == 0).all() and torch.signbit(z).all()


def test_adding_negative_zero_is_exact():
    """x + (-0.0) == x bitwise for every float32 class (IEEE round-to-nearest: +0 + -0 = +0, -0 + -0
    = -0, denormals kept, NaN stays NaN): the tied scores are the routed kernel's scores."""
    g = torch.Generator().manual_seed(5)
    bits = torch.randint(-2 ** 31, 2 ** 31 - 1, (1 << 16,), generator=g, dtype=torch.int64).to(torch.int32)
    x = torch.cat([bits.view(torch.float32), torch.tensor([0.0, -0.0, 1e-45, -1e-45, float("inf"), float("-inf"),
                                                          1.17e-38, -3.4e38])])
    y = x + torch.tensor(-0.0)
    nan = torch.isnan(x)
    assert torch.equal(torch.isnan(y), nan)
    assert torch.equal(y[~nan].view(torch.int32), x[~nan].view(torch.int32))


def _src() -> str:
    return open(fwd_gluon.__file__).read()


def _between(src, a, b):
    return src[src.index(a):src.index(b, src.index(a))]


def test_tie_ptx_and_placement():
    """The tie's PTX (min, min with -inf, rcp) and its use: EPI_DEFER's branch sits between the peel's
    S_0 issue and the scores' first use, adds s + expand_dims(-0.0 a row), and passes the epilogue's
    results through the S_0 wait."""
    src = _src()
    tie = _between(src, "def _neg_zero_after(", "def _epi_store(")
    assert "min.f32 t, $1, $2; min.f32 t, t, 0fFF800000;" in tie and "rcp.approx.ftz.f32 $0, t;" in tie
    consume = _between(src, "def _fwd_consume(", "def _fwd_drain(")
    issue = consume.index("s_tok = warpgroup_mma(q, k_smem.index(t0 % NUM_STAGES)")
    branch = consume.index("    if EPI_DEFER:\n", issue)
    first_use = consume.index("if kv_empty.shape[0] == 2 * NUM_STAGES:", issue)
    assert issue < branch < first_use
    body = consume[branch:first_use]
    assert "s, o_p, lse_p = warpgroup_mma_wait(0, deps=[s_tok, o_p, lse_p])" in body
    assert "s = s + gl.expand_dims(_neg_zero_after(o_p, lse_p, s_layout), 1)" in body
    assert "else:\n        s = warpgroup_mma_wait(0, deps=[s_tok])" in body


def test_epi_defer_adds_no_barrier_call():
    """EPI_DEFER moves register arithmetic and global stores only: its helpers touch no mbarrier and
    no shared memory, and _fwd_consume's EPI_DEFER branches hold no barrier call (so the waits and
    arrivals of a block, and their order, are EARLY_Q's: no new phase to reason about)."""
    src = _src()
    helpers = _between(src, "def _epi_math(", "def _softmax_step(")
    assert "mbarrier" not in helpers and "smem" not in helpers and "tma." not in helpers
    consume = _between(src, "def _fwd_consume(", "def _fwd_drain(")
    head = consume[consume.index("    if EPI_DEFER:\n"):consume.index("if kv_empty.shape[0] == 2 * NUM_STAGES:",
                                                                     consume.index("    if EPI_DEFER:\n"))]
    assert "mbarrier" not in head
    tail = consume[consume.index("    if EPI_DEFER:\n        # the epilogue runs in the next block"):]
    assert tail.index("return acc, m_i, l_i") < tail.index("else:")
    # the deferred path returns before the epilogue; everything before it is shared with EARLY_Q
    persistent = _between(src, "def _fwd_consume_persistent(", "# win_left / win_right not specialised")
    carry = _between(persistent, "        elif EPI_DEFER:", "        else:\n            _fwd_consume(")
    last = persistent[persistent.index("    if EPI_DEFER:\n        # the CTA's last block"):]
    assert "mbarrier" not in carry and "mbarrier" not in last


def test_q_prefetch_after_the_q_load():
    """The loader prefetches the NEXT block's rows (i + step, when there is one) right after it
    issued this block's Q loads and before the rest of its K / V."""
    src = _src()
    load = _between(src, "def _fwd_load_persistent(", "def _q_prefetch_l2(")
    q_load = load.index("tma.async_copy_global_to_shared(q_desc, [q_row + HALF_M, q_col]")
    pf = load.index("if Q_PREFETCH:")
    rest = load.index("for j in range(n_pre, n_load):")
    assert q_load < pf < rest
    assert "if i + step < hi:" in load[pf:rest]
    assert "_block_of(SCHED, i + step," in load[pf:rest]


@pytest.mark.parametrize("d, elt", [(128, 2), (64, 2), (256, 2)])
def test_prefetch_lines_cover_the_block(d, elt):
    """_q_prefetch_l2's lane -> (row, column) map (its lines, evaluated in Python): the 128-byte lines
    of the block's BLOCK_M rows, each exactly once, at q_row = b * Nq + pid_m * BLOCK_M and q_col =
    head * D (_tile_coords' values), 16-byte aligned, inside the row's D elements."""
    nheads, seqlen_q, pid_m, pid_bh = 4, 1024, 3, 6
    lines_row = (d * elt) // 128
    rows_chunk = 32 // lines_row
    rs = nheads * d
    off_b, off_h = pid_bh // nheads, pid_bh % nheads
    row0 = off_b * seqlen_q + pid_m * BM
    seen = []
    for c in range(BM // rows_chunk):
        for lane in range(32):
            col = off_h * d + (lane % lines_row) * (128 // elt)
            row = row0 + c * rows_chunk + lane // lines_row
            seen.append(row * rs + col)
    want = [(row0 + r) * rs + off_h * d + x * (128 // elt) for r in range(BM) for x in range(lines_row)]
    assert sorted(seen) == sorted(want) and len(set(seen)) == len(want)
    assert all((a * elt) % 16 == 0 for a in seen)
    # the kernel's own constants
    body = _between(_src(), "def _q_prefetch_l2(", "def _epi_math(")
    assert "LINES_ROW: gl.constexpr = (HEAD_DIM * QP.dtype.element_ty.primitive_bitwidth // 8) // 128" in body
    assert "ROWS_CHUNK: gl.constexpr = 32 // LINES_ROW" in body
    assert "(lane % LINES_ROW) * (128 * 8 // QP.dtype.element_ty.primitive_bitwidth)" in body
    assert "(row0 + c * ROWS_CHUNK + lane // LINES_ROW).to(gl.int64) * rs" in body
    assert '"prefetch.global.L2 [$1]; mov.u32 $0, 0;"' in body


_COMPILE = r"""
import json, re, sys
sys.path.insert(0, sys.argv[1])
import gluon_fwd_compile as g
out = {}
base = dict(persistent=True, window=True, early_q=True, lean_mask=True)
for name, kw in (("routed", dict()), ("defer", dict(epi_defer=True)), ("pf", dict(q_prefetch=True)),
                 ("both", dict(epi_defer=True, q_prefetch=True))):
    c = g.compile_fwd(128, "bf16", **base, **kw)
    r = g.report(c)
    text = g.sass(c)
    ins = [(int(a, 16), t.strip()) for a, t in re.findall(r"/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;", text)]
    loops = []
    for a, t in ins:
        m = re.search(r"BRA\s+0x([0-9a-f]+)", t)
        if m and int(m.group(1), 16) <= a:
            body = [x for b, x in ins if int(m.group(1), 16) <= b <= a]
            if sum("WARPGROUP.ARRIVE" in x for x in body) == 2 and any("HGMMA" in x for x in body):
                loops.append((int(m.group(1), 16), a))
    in_loops = sum(1 for a, t in ins if re.search(r"\b(?:LDL|STL)\b", t) and any(lo <= a <= hi for lo, hi in loops))
    out[name] = dict(loops=r["tile_loops"], spill=r["spill_bytes"], smem=r["smem"], hgmma=r["hgmma"],
                     depbar1=r["depbar1"], local_in_loops=in_loops, pf=len(re.findall(r"CCTL\.E\.PF2", text)),
                     setmaxnreg=r["setmaxnreg"])
print(json.dumps(out))
"""


def test_window_f_compiles():
    """Offline sm_90a (no GPU; bench/gluon_fwd_compile.py in a subprocess): EPI_DEFER / Q_PREFETCH
    on the routed window form compile with no local memory in the tile loops (EPI_DEFER spills a
    few scalars in the block head: 72 bytes, both 144), the routed kernel's HGMMA, DEPBAR.LE 1,
    setmaxnreg and shared memory (+16 bytes at most), tile loops within 4 instructions, and
    Q_PREFETCH's 8 L2 prefetches (CCTL.E.PF2) in the loader."""
    pytest.importorskip("triton.experimental.gluon")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, TRITON_INTERPRET="0", PYTHONPATH=os.path.join(root, "src"))
    res = subprocess.run([sys.executable, "-c", _COMPILE, os.path.join(root, "bench")], env=env,
                         capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stderr[-2000:]
    r = json.loads(res.stdout.strip().splitlines()[-1])
    base = r["routed"]
    assert base["spill"] == 0 and base["pf"] == 0
    for name in ("defer", "pf", "both"):
        v = r[name]
        assert v["local_in_loops"] == 0, (name, v)
        assert v["spill"] <= 160, (name, v)
        assert v["hgmma"] == base["hgmma"] and v["depbar1"] == base["depbar1"], (name, v, base)
        assert v["setmaxnreg"] == base["setmaxnreg"], (name, v, base)
        assert base["smem"] <= v["smem"] <= base["smem"] + 16, (name, v, base)
        assert len(v["loops"]) == len(base["loops"]) == 6, (name, v)
        assert all(abs(a - b) <= 6 for a, b in zip(v["loops"], base["loops"])), (name, v, base)
        assert v["pf"] == (8 if name in ("pf", "both") else 0), (name, v)
    assert r["pf"]["spill"] == 0


# ---------------------------------------------------------------------------------------
# GPU (Hopper)
# ---------------------------------------------------------------------------------------
_GPU_WINDOWS = [(1024, 0), (256, 0), (64, 0), (100, 37)]
_GPU_SHAPES = [
    (1, 2048, 2048, 4, 4),
    (2, 1024, 1536, 4, 2),      # Nq < Nk, GQA
    (1, 1536, 1024, 4, 1),      # Nq > Nk, GQA: with (100, 37) / (64, 0) rows that see no key
]
_FLAGS = [dict(epi_defer=True), dict(q_prefetch=True), dict(epi_defer=True, q_prefetch=True)]
_ROUTED_GPU = dict(persistent=True, early_q=True, lean_mask=True)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("flags", _FLAGS)
@pytest.mark.parametrize("window", _GPU_WINDOWS)
@pytest.mark.parametrize("b, nq, nk, h, hk", _GPU_SHAPES)
def test_window_f_matches_reference_gpu(flags, window, b, nq, nk, h, hk):
    q, k, v = rand_qkv(b, nq, nk, h, hk, 128, torch.bfloat16, DEVICE)
    check(q, k, v, window=window, **_ROUTED_GPU, **flags)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("window", [(1024, 0), (100, 37)])
@pytest.mark.parametrize("num_programs", [1, 3])
def test_window_f_few_ctas_matches_reference_gpu(window, num_programs):
    """Few CTAs, each looping over many blocks (1: one CTA carries every block's epilogue into the
    next and every Q prefetch targets its own next block); fp16 too."""
    q, k, v = rand_qkv(1, 1536, 1024, 4, 2, 128, torch.float16, DEVICE)
    check(q, k, v, window=window, num_programs=num_programs, epi_defer=True, q_prefetch=True, **_ROUTED_GPU)


@pytest.mark.gpu
@hopper
def test_window_f_rows_without_keys_gpu():
    """Nq - Nk = 1024 > right: the first 1024 - 37 rows see no key (whole blocks of them): O = 0,
    lse = +inf through the deferred epilogue."""
    q, k, v = rand_qkv(1, 2048, 1024, 2, 2, 128, torch.bfloat16, DEVICE)
    o, lse = check(q, k, v, window=(100, 37), epi_defer=True, q_prefetch=True, **_ROUTED_GPU)
    assert (o[:, :1024 - 37] == 0).all() and torch.isposinf(lse[:, :, :1024 - 37]).all()


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("flags", _FLAGS)
@pytest.mark.parametrize("window", [(1024, 0), (256, 0), (64, 0), (100, 37), (256, 256)])
@pytest.mark.parametrize("b, nq, nk, h, hk", [(1, 4096, 4096, 4, 2)] + _GPU_SHAPES[1:])
@pytest.mark.parametrize("num_programs", [None, 7, 1])
def test_window_f_bitwise_routed_gpu(flags, window, b, nq, nk, h, hk, num_programs):
    """Bitwise the routed kernel (PERSISTENT EARLY_Q LEAN_MASK, the same CTA count) and the
    one-block WINDOW kernel."""
    q, k, v = rand_qkv(b, nq, nk, h, hk, 128, torch.bfloat16, DEVICE)
    scale = 128 ** -0.5
    ref_o, ref_lse = attention_fwd_gluon(q, k, v, scale, window=window, num_programs=num_programs, **_ROUTED_GPU)
    o, lse = attention_fwd_gluon(q, k, v, scale, window=window, num_programs=num_programs, **_ROUTED_GPU, **flags)
    assert torch.equal(o, ref_o) and torch.equal(lse, ref_lse)
    one_o, one_lse = attention_fwd_gluon(q, k, v, scale, window=window)
    assert torch.equal(o, one_o) and torch.equal(lse, one_lse)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("num_programs", [None, 5])
def test_window_f_plain_and_causal_bitwise_gpu(causal, num_programs):
    """EPI_DEFER / Q_PREFETCH on the plain and CAUSAL PERSISTENT EARLY_Q kernels: float64 and bitwise
    their EARLY_Q kernel."""
    q, k, v = rand_qkv(2, 2048, 2048, 4, 2, 128, torch.bfloat16, DEVICE)
    scale = 128 ** -0.5
    ref_o, ref_lse = attention_fwd_gluon(q, k, v, scale, causal=causal, persistent=True, early_q=True,
                                         num_programs=num_programs)
    o, lse = check(q, k, v, scale=scale, causal=causal, persistent=True, early_q=True, num_programs=num_programs,
                   epi_defer=True, q_prefetch=True)
    assert torch.equal(o, ref_o) and torch.equal(lse, ref_lse)


@pytest.mark.gpu
@hopper
def test_window_f_repeated_and_graph_replay_gpu():
    """The same launch 20 times and replayed from a CUDA graph 5 times: bitwise the first launch
    every time (a phase fault would hang or differ)."""
    q, k, v = rand_qkv(1, 4096, 4096, 4, 2, 128, torch.bfloat16, DEVICE)
    launch = forward_gluon.prepare(q, k, v, 128 ** -0.5, window=(1024, 0), epi_defer=True, q_prefetch=True,
                                   num_programs=5, **_ROUTED_GPU)
    o0, lse0 = (t.clone() for t in launch())
    for _ in range(20):
        o, lse = launch()
        assert torch.equal(o, o0) and torch.equal(lse, lse0)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        launch()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        launch()
    for _ in range(5):
        o.zero_()
        lse.zero_()
        g.replay()
        torch.cuda.synchronize()
        assert torch.equal(o, o0) and torch.equal(lse, lse0)


@pytest.mark.gpu
@hopper
def test_flash_attn_func_takes_window_f_gpu(monkeypatch):
    """The route with both switches on (lengths lowered to reach it at 2k): the launch with
    EPI_DEFER and Q_PREFETCH, bitwise the one-block WINDOW kernel; its launch plan replays."""
    from flashtriton import flash_attn_func

    for table in (policy.GLUON_FWD_WINDOW_EARLY_Q, policy.GLUON_FWD_WINDOW_LEAN_MASK, policy.GLUON_FWD_WINDOW_MIN_N,
                  policy.GLUON_FWD_WINDOW_EPI_DEFER, policy.GLUON_FWD_WINDOW_Q_PREFETCH):
        monkeypatch.setitem(table, 128, 1024)
    plans.clear()
    seen = []
    real = forward_gluon._launch_into
    monkeypatch.setattr(forward_gluon, "_launch_into", lambda *a, **kw: seen.append(
        (kw.get("epi_defer", False), kw.get("q_prefetch", False))) or real(*a, **kw))
    q, k, v = rand_qkv(2, 2048, 2048, 4, 2, 128, torch.bfloat16, DEVICE)
    out = flash_attn_func(q, k, v, window_size=(300, 0))
    out2 = flash_attn_func(q, k, v, window_size=(300, 0))          # a plan replay (plans on)
    assert seen and seen[0] == (True, True), seen
    plans.clear()
    ref, _ = attention_fwd_gluon(q, k, v, 128 ** -0.5, window=(300, 0))
    assert torch.equal(out, ref) and torch.equal(out2, ref)
