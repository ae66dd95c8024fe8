"""Two window-forward levers of a session-33 helper (offline; issue 3), kernels/fwd_gluon.py's
WINDOW_DEAL and SPLIT_Q: (1) the SCHEDULED WINDOW forward, the PERSISTENT WINDOW kernel (routed with
EARLY_Q and LEAN_MASK from 4k) taking its blocks from the host's longest-first deal
(launchers/schedule.py window_schedule) instead of its round robin; (2) SPLIT_Q, the EARLY_Q kernel
with a q_bar / q_free pair a consumer (the Q halves load apart).
Why (bench/wip/gluon-window-opt.md): at (1024, 0) each sequence's first 8 query blocks load 1..8
key tiles, the rest 9, and the round robin gives 60 of the 132 CTAs 16 full blocks (144 tiles) at
16k against a mean of 135.3 tiles; and the single Q barrier lines the two consumers up at every
block boundary when the next Q's load is late. Switches launchers.policy.GLUON_FWD_WINDOW_SCHEDULED
and GLUON_FWD_WINDOW_SPLIT_Q (empty: off), A/B bench/gpu/s33_window_opt_ab.py.

CPU: the deal's costs are the kernel's own n_load (_tile_coords' WINDOW lines), every block dealt
once, the makespan near the mean and below the round robin's; the schedule's cache; validation
(ValueError naming the argument); launch arguments through a recorder; fwd_into's guard; the
switch and the route; an offline sm_90a compile in a subprocess (no spills, no local memory, the
routed kernel's shared memory, HGMMA and tile loops). GPU (Hopper): float64 with the repo
criterion (tests/helpers.py; outputs NaN-poisoned by conftest) for windows (1024, 0), (256, 256),
(100, 37), Nq != Nk both ways (rows that see no key: O = 0, lse = +inf), GQA, bf16 / fp16,
D = 128 and 64, few CTAs; bitwise equal to the routed round-robin kernel and the one-block WINDOW
kernel (each block's arithmetic is unchanged: only which CTA runs it and when). SPLIT_Q: CPU
validation, launch arguments, fwd_into's guard, the switch and the route, the loader's and the
consumers' barrier lines from the source, the offline compile; GPU: float64 and bitwise the EARLY_Q
kernel without it (plain, causal and windows, few CTAs so that every CTA loops; graph replays).
"""
import contextlib
import json
import os
import subprocess
import sys

import pytest
import torch

from flashtriton.kernels import fwd_gluon
from flashtriton.launchers import forward_gluon, plans, policy, schedule
from flashtriton.launchers.forward_gluon import attention_fwd_gluon

from conftest import DEVICE
from helpers import rand_qkv
from test_fwd_gluon import check, hopper
from test_fwd_gluon_window_early_q import _SHAPES, _WINDOWS, BM, BN, _code, window_block

ROUTED = dict(persistent=True, early_q=True, lean_mask=True)       # the route's window form from 4k
SPLIT = dict(ROUTED, split_q=True)


# ---------------------------------------------------------------------------------------
# CPU: the deal
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("left, right", _WINDOWS)
@pytest.mark.parametrize("nq, nk", _SHAPES)
def test_window_tiles_are_the_kernels_n_load(nq, nk, left, right):
    """schedule.window_tiles is _tile_coords' n_load (the kernel's WINDOW lines, evaluated)."""
    for pid_m in range(nq // BM):
        assert schedule.window_tiles(pid_m, nq, nk, BM, BN, left, right) == window_block(nq, nk, left, right, pid_m)[1]


def _round_robin(n_m, n_bh, n_prog):
    """The kernel's non-causal deal (_block_range / _tile_of: block t = pid + i * n_prog, query
    block fastest), as lists of pid_bh * n_m + pid_m."""
    return [[(t // n_m) * n_m + t % n_m for t in range(p, n_m * n_bh, n_prog)] for p in range(n_prog)]


@pytest.mark.parametrize("n, n_bh, band", [(16384, 16, 8), (4096, 64, 8), (16384, 16, 16), (4096, 64, 1)])
def test_window_deal_covers_and_balances(n, n_bh, band):
    """(1024, 0), 132 CTAs: every block once; the largest load within one full block of the mean,
    and at least 2.5% below the round robin's (offline: 168 -> 160 tile units at 16k, 156 -> 148
    at 4k with bands of 8)."""
    n_m, n_prog = n // BM, 132
    costs = [schedule.window_tiles(m, n, n, BM, BN, 1024, 0) + schedule.BLOCK_OVERHEAD_TILES for m in range(n_m)]
    assert costs[:9] == [m + 1 + schedule.BLOCK_OVERHEAD_TILES for m in range(8)] + [10.5]
    lists = schedule.lpt_deal(costs, n_bh, n_prog, band)
    assert sorted(b for lst in lists for b in lst) == list(range(n_m * n_bh))
    mean = sum(costs) * n_bh / n_prog
    lpt, rr = schedule.makespan(lists, costs, n_m), schedule.makespan(_round_robin(n_m, n_bh, n_prog), costs, n_m)
    assert lpt <= mean + max(costs)
    assert lpt < 0.975 * rr, (lpt, rr, mean)


def test_window_schedule_cached_and_keyed_by_window():
    a = schedule.window_schedule("cpu", 1024, 1024, 8, 5, 2, 128, 128, 256, 0)
    assert schedule.window_schedule("cpu", 1024, 1024, 8, 5, 2, 128, 128, 256, 0) is a
    assert schedule.window_schedule("cpu", 1024, 1024, 8, 5, 2, 128, 128, 512, 0) is not a
    assert schedule.causal_schedule("cpu", 1024, 1024, 8, 5, 2, 128, 128) is not a
    assert a.dtype == torch.int32 and a.numel() == 5 + 1 + 8 * 8
    offsets, blocks = a[:6].tolist(), a[6:].tolist()
    assert offsets[0] == 0 and offsets[-1] == 64 and sorted(blocks) == list(range(64))


def test_kernel_admits_scheduled_window():
    """The kernel's static_assert: SCHEDULED with WINDOW (PERSISTENT only), where it refused it."""
    code = fwd_gluon.attn_fwd_gluon_kernel.src
    assert "not (SCHEDULED and WINDOW) or PERSISTENT" in code
    assert "SCHEDULED deals causal blocks: not with WINDOW" not in code


# ---------------------------------------------------------------------------------------
# CPU: host side
# ---------------------------------------------------------------------------------------
def qkv(b=1, nq=512, nk=512, h=4, hk=2, d=128, dtype=torch.bfloat16):
    return (torch.empty(b, nq, h, d, dtype=dtype), torch.empty(b, nk, hk, d, dtype=dtype),
            torch.empty(b, nk, hk, d, dtype=dtype))


@pytest.mark.parametrize("kw, match", [
    (dict(window=(256, 0)), r"^scheduled=True needs persistent=True and causal=True or a window"),
    (dict(persistent=True), r"^scheduled=True needs persistent=True and causal=True or a window"),
    (dict(persistent=True, window=(5000, 5000)), r"^scheduled=True: window=\(5000, 5000\) is the plain mask"),
    (dict(persistent=True, window=(256, 0), dropout_p=0.1, rng=torch.zeros(2, dtype=torch.int64)),
     r"^scheduled=True with a window: no dropout"),
    (dict(persistent=True, window=(256, 0)), r"^scheduled=True with a window: with early_q=True and lean_mask"),
    (dict(persistent=True, window=(256, 0), early_q=True), r"^scheduled=True with a window: with early_q=True"),
    (dict(persistent=True, window=(256, 0), lean_mask=True), r"^scheduled=True with a window: with early_q=True"),
])
def test_rejects_scheduled_window_outside_its_variant(kw, match):
    """The window deal in the routed form only (EARLY_Q and LEAN_MASK: the others spilled offline,
    SCHEDULED WINDOW alone 64 bytes, D = 64 with EARLY_Q 8)."""
    q, k, v = qkv()
    with pytest.raises(ValueError, match=match):
        forward_gluon.prepare(q, k, v, 0.125, scheduled=True, **kw)


@pytest.mark.parametrize("scheduled", [1, "yes", None])
def test_rejects_scheduled_not_a_bool(scheduled):
    q, k, v = qkv()
    with pytest.raises(ValueError, match=r"^scheduled: expected a bool"):
        forward_gluon.prepare(q, k, v, 0.125, persistent=True, window=(256, 0), scheduled=scheduled,
                              early_q=True, lean_mask=True)


@pytest.mark.parametrize("kw", [
    dict(persistent=True, window=(256, 0), scheduled=True, early_q=True, lean_mask=True),
    dict(persistent=True, window=(256, 0), scheduled=True, band=3, early_q=True, lean_mask=True),
    dict(persistent=True, window=(-1, 0), scheduled=True),                 # window_args: the causal deal
    dict(persistent=True, causal=True, window=(100, 0), scheduled=True, early_q=True, lean_mask=True),  # WINDOW
])
def test_valid_scheduled_window_call_reaches_the_device_check(kw):
    q, k, v = qkv()
    with pytest.raises(ValueError, match="CUDA"):
        forward_gluon.prepare(q, k, v, 0.125, **kw)


def test_band_without_scheduled_window_still_refused():
    q, k, v = qkv()
    with pytest.raises(ValueError, match=r"^band: only with causal=True"):
        forward_gluon.prepare(q, k, v, 0.125, persistent=True, window=(256, 0), band=2)


def _recorded_launch(monkeypatch, window=(256, 0), b=1, h=4, **kw):
    got = []
    monkeypatch.setattr(torch.cuda, "device", lambda device: contextlib.nullcontext())
    monkeypatch.setattr(plans, "launch", lambda kernel, grid, *a, **k2: got.append((grid, a, k2)))
    q, k, v = qkv(b=b, h=h)
    o = torch.empty_like(q)
    lse = torch.empty(b, h, 512, dtype=torch.float32)
    forward_gluon._launch_into(q, k, v, o, lse, 0.125, BM, BN, 3, False, persistent=True, num_programs=3,
                               window=window, **kw)()
    assert len(got) == 1
    grid, args, k2 = got[0]
    names = [n for n in fwd_gluon.attn_fwd_gluon_kernel.arg_names if n.upper() != n or n in ("LSE", "SCHED", "RNG", "O")]
    return grid, dict(zip(names, args)), k2, lse


@pytest.mark.parametrize("b, h, band, want_band", [(1, 4, None, 4), (4, 4, None, schedule.WINDOW_SCHED_BAND),
                                                   (4, 4, 3, 3)])
def test_launch_arguments_scheduled_window(monkeypatch, b, h, band, want_band):
    """SCHEDULED, PERSISTENT and WINDOW; SCHED is window_schedule's deal for the shape, the window
    as window_args gives it (256, 0) and the band (default min(WINDOW_SCHED_BAND, B * H))."""
    grid, a, kw, lse = _recorded_launch(monkeypatch, b=b, h=h, scheduled=True, early_q=True, lean_mask=True,
                                        band=band)
    assert grid == (3,)
    assert kw["SCHEDULED"] and kw["PERSISTENT"] and kw["WINDOW"] and kw["EARLY_Q"] and kw["LEAN_MASK"]
    assert not (kw["CAUSAL"] or kw["DROPOUT"])
    assert a["band"] == want_band
    want = schedule.window_schedule(lse.device, 512, 512, b * h, 3, want_band, BM, BN, 256, 0)
    assert a["SCHED"] is want
    assert (a["win_left"], a["win_right"]) == (256, 0)


def test_window_schedule_is_a_plan_constant(monkeypatch):
    """The cached schedule goes through plans.persistent (a constant of a recorded launch plan:
    without it the recorder cannot place the SCHED tensor and the call never replays)."""
    marked = []
    real = plans.persistent
    monkeypatch.setattr(plans, "persistent", lambda t: marked.append(t) or real(t))
    _, a, _, _ = _recorded_launch(monkeypatch, scheduled=True, early_q=True, lean_mask=True)
    assert len(marked) == 1 and marked[0] is a["SCHED"]


def test_launch_arguments_unscheduled_window_unchanged(monkeypatch):
    _, a, kw, lse = _recorded_launch(monkeypatch)
    assert not kw["SCHEDULED"] and kw["WINDOW"] and a["SCHED"] is lse and a["band"] == 1


def test_launch_drops_scheduled_for_a_plain_window(monkeypatch):
    """A window that window_args makes the plain mask has no blocks of unequal cost: no SCHEDULED
    (prepare refuses it; this is fwd_into's path)."""
    _, a, kw, lse = _recorded_launch(monkeypatch, window=(5000, 5000), scheduled=True)
    assert not kw["SCHEDULED"] and not kw["WINDOW"] and a["SCHED"] is lse


@pytest.mark.parametrize("kw, expect", [
    (dict(persistent=True, window=(256, 0), scheduled=True, **{k: True for k in ("early_q", "lean_mask")}), True),
    (dict(persistent=True, window=(256, 0), scheduled=True), False),                   # not the routed form
    (dict(persistent=True, window=(256, 0), scheduled=True, early_q=True), False),
    (dict(persistent=False, window=(256, 0), scheduled=True, early_q=True, lean_mask=True), False),
    (dict(persistent=True, window=(256, 0), scheduled=True, early_q=True, dropout_p=0.1,
          rng=torch.zeros(2, dtype=torch.int64)), False),     # (EARLY_Q dropped with dropout)
    (dict(persistent=True, window=(256, 0), early_q=True, lean_mask=True), False),
    (dict(persistent=True, window=(-1, 0), scheduled=True, early_q=True, lean_mask=False), False),  # causal window
    (dict(persistent=True, causal=True, scheduled=True), True),             # the causal deal, as before
])
def test_fwd_into_scheduled_guard(monkeypatch, kw, expect):
    got = []
    monkeypatch.setattr(forward_gluon, "_launch_into",
                        lambda *a, **k2: got.append(k2.get("scheduled")) or (lambda: None))
    q, k, v = qkv()
    forward_gluon.fwd_into(q, k, v, torch.empty_like(q), None, 0.125, **kw)
    assert got == [expect]


def test_window_scheduled_switch(monkeypatch):
    """Not routed (no GPU has run it): the table is empty; the table's min(Nq, Nk) and head dims."""
    assert policy.GLUON_FWD_WINDOW_SCHEDULED == {}
    assert not policy.gluon_fwd_window_scheduled(128, 16384, 16384)
    monkeypatch.setitem(policy.GLUON_FWD_WINDOW_SCHEDULED, 128, 4096)
    assert policy.gluon_fwd_window_scheduled(128, 4096, 8192)
    assert not policy.gluon_fwd_window_scheduled(128, 2048, 8192)
    assert not policy.gluon_fwd_window_scheduled(64, 16384, 16384)


@pytest.mark.parametrize("sched_table, early_table, expect", [
    ({}, {128: 256}, (True, False)),
    ({128: 256}, {128: 256}, (True, True)),
    ({128: 256}, {}, (False, False)),            # scheduled only where the call runs persistent
])
def test_route_passes_scheduled(monkeypatch, sched_table, early_table, expect):
    """launchers.forward's window route adds scheduled=True where the table lists the call and
    GLUON_FWD_WINDOW_EARLY_Q / LEAN_MASK make it the routed persistent form (CPU: the route forced,
    fwd_into a recorder)."""
    from flashtriton import flash_attn_func
    import flashtriton
    from flashtriton.launchers import forward

    monkeypatch.setattr(forward, "gluon_fwd", lambda *a: False)
    monkeypatch.setattr(forward, "gluon_fwd_window", lambda *a: True)
    monkeypatch.setattr(policy, "GLUON_FWD_WINDOW_SCHEDULED", dict(sched_table))
    monkeypatch.setattr(policy, "GLUON_FWD_WINDOW_EARLY_Q", dict(early_table))
    monkeypatch.setattr(policy, "GLUON_FWD_WINDOW_LEAN_MASK", dict(early_table))    # routed together
    plans.clear()
    got = []

    def fake_fwd_into(q, k, v, out, lse, scale, persistent=False, scheduled=False, **kw):
        got.append((persistent, scheduled))
        out.zero_()
        lse.zero_()
    monkeypatch.setattr(forward_gluon, "fwd_into", fake_fwd_into)
    q, k, v = rand_qkv(1, 512, 512, 2, 1, 128, torch.bfloat16, DEVICE)
    with flashtriton.use_backend("triton"):
        flash_attn_func(q, k, v, window_size=(256, 0))
    plans.clear()
    assert got == [expect], got


# ---------------------------------------------------------------------------------------
# CPU: SPLIT_Q
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("kw, match", [
    (dict(persistent=True, window=(256, 0), split_q=True), r"^split_q=True: with early_q=True only"),
    (dict(persistent=True, window=(256, 0), early_q=True, split_q=1), r"^split_q: expected a bool"),
    (dict(window=(256, 0), early_q=True, split_q=True), r"^early_q=True: the persistent"),   # EARLY_Q's own rule
])
def test_rejects_split_q_outside_its_variant(kw, match):
    q, k, v = qkv()
    with pytest.raises(ValueError, match=match):
        forward_gluon.prepare(q, k, v, 0.125, **kw)


@pytest.mark.parametrize("kw", [dict(window=(256, 0), lean_mask=True), dict(), dict(causal=True),
                                dict(window=(256, 0), lean_mask=True, scheduled=True)])
def test_valid_split_q_call_reaches_the_device_check(kw):
    q, k, v = qkv()
    with pytest.raises(ValueError, match="CUDA"):
        forward_gluon.prepare(q, k, v, 0.125, persistent=True, early_q=True, split_q=True, **kw)


def test_launch_arguments_split_q(monkeypatch):
    _, _, kw, _ = _recorded_launch(monkeypatch, early_q=True, split_q=True)
    assert kw["SPLIT_Q"] is True and kw["EARLY_Q"] and kw["PERSISTENT"] and kw["WINDOW"]
    _, _, kw, _ = _recorded_launch(monkeypatch, early_q=True)
    assert "SPLIT_Q" not in kw                                     # the other launches as they were


@pytest.mark.parametrize("kw, expect", [
    (dict(persistent=True, window=(256, 0), early_q=True, split_q=True), True),
    (dict(persistent=True, window=(256, 0), split_q=True), None),              # no EARLY_Q: dropped
    (dict(persistent=False, window=(256, 0), early_q=True, split_q=True), None),
])
def test_fwd_into_split_q_guard(monkeypatch, kw, expect):
    got = []
    monkeypatch.setattr(forward_gluon, "_launch_into",
                        lambda *a, **k2: got.append(k2.get("split_q")) or (lambda: None))
    q, k, v = qkv()
    forward_gluon.fwd_into(q, k, v, torch.empty_like(q), None, 0.125, **kw)
    assert got == [expect]


def test_window_split_q_switch(monkeypatch):
    assert policy.GLUON_FWD_WINDOW_SPLIT_Q == {}
    assert not policy.gluon_fwd_window_split_q(128, 16384, 16384)
    monkeypatch.setitem(policy.GLUON_FWD_WINDOW_SPLIT_Q, 128, 4096)
    assert policy.gluon_fwd_window_split_q(128, 4096, 8192)
    assert not policy.gluon_fwd_window_split_q(128, 2048, 8192)
    assert not policy.gluon_fwd_window_split_q(64, 16384, 16384)


@pytest.mark.parametrize("split_table, early_table, expect", [
    ({}, {128: 256}, (True, False)), ({128: 256}, {128: 256}, (True, True)), ({128: 256}, {}, (False, False))])
def test_route_passes_split_q(monkeypatch, split_table, early_table, expect):
    from flashtriton import flash_attn_func
    import flashtriton
    from flashtriton.launchers import forward

    monkeypatch.setattr(forward, "gluon_fwd", lambda *a: False)
    monkeypatch.setattr(forward, "gluon_fwd_window", lambda *a: True)
    monkeypatch.setattr(policy, "GLUON_FWD_WINDOW_SPLIT_Q", dict(split_table))
    monkeypatch.setattr(policy, "GLUON_FWD_WINDOW_EARLY_Q", dict(early_table))
    plans.clear()
    got = []

    def fake_fwd_into(q, k, v, out, lse, scale, early_q=False, split_q=False, **kw):
        got.append((early_q, split_q))
        out.zero_()
        lse.zero_()
    monkeypatch.setattr(forward_gluon, "fwd_into", fake_fwd_into)
    q, k, v = rand_qkv(1, 512, 512, 2, 1, 128, torch.bfloat16, DEVICE)
    with flashtriton.use_backend("triton"):
        flash_attn_func(q, k, v, window_size=(256, 0))
    plans.clear()
    assert got == [expect], got


def test_split_q_barrier_lines():
    """The protocol from the source: the loader waits q_free[w] and loads half w on q_bar[w] for
    w = 0, 1 (one half's bytes each); a consumer binds q_bar[WG] / q_free[WG]; the kernel makes the
    pairs count 1 each and keeps the single barriers of before without SPLIT_Q."""
    load = _code(fwd_gluon._fwd_load_persistent)
    split = load[load.index("if q_bar.shape[0] == 2:"):load.index("        else:\n            mbarrier.wait(q_free, ")]
    assert "mbarrier.wait(q_free.index(w), (it & 1) ^ 1)" in split
    assert "mbarrier.expect(q_bar.index(w), q_desc.block_type.nbytes)" in split
    assert "[q_row + w * HALF_M, q_col], q_bar.index(w), q_smem.index(w)" in split
    assert "for w in gl.static_range(2):" in split
    cons = _code(fwd_gluon._fwd_consume)
    assert "q_bar = q_bar.index(WG)" in cons and "q_free = q_free.index(WG)" in cons
    assert cons.index("q_free = q_free.index(WG)") < cons.index("mbarrier.wait(q_bar, q_phase)")
    kern = fwd_gluon.attn_fwd_gluon_kernel.src
    assert kern.count("mbarrier.init(q_free.index(0), count=1)") == 1
    assert kern.count("mbarrier.init(q_bar.index(1), count=1)") == 1
    assert "mbarrier.init(q_free, count=NUM_CONSUMERS)" in kern


# ---------------------------------------------------------------------------------------
# CPU: offline compile (sm_90a)
# ---------------------------------------------------------------------------------------
_COMPILE = r"""
import json, re, sys
sys.path.insert(0, sys.argv[1])
import gluon_fwd_compile as g
out = {}
for name, kw in (("routed", dict()), ("sched", dict(scheduled=True)), ("split", dict(split_q=True)),
                 ("sched_split", dict(scheduled=True, split_q=True))):
    c = g.compile_fwd(128, "bf16", window=True, persistent=True, early_q=True, lean_mask=True, **kw)
    r = g.report(c)
    text = g.sass(c)
    out[name] = dict(loops=r["tile_loops"], spill=r["spill_bytes"], smem=r["smem"], hgmma=r["hgmma"],
                     regs=r["setmaxnreg"], local=len(re.findall(r"\b(?:LDL|STL)\b", text)))
print(json.dumps(out))
"""


def test_scheduled_window_compiles_like_the_routed_kernel():
    """Offline sm_90a (no GPU; bench/gluon_fwd_compile.py in a subprocess): the SCHEDULED, SPLIT_Q and
    SCHEDULED + SPLIT_Q forms of the routed window kernel (PERSISTENT EARLY_Q LEAN_MASK, D = 128)
    have no spills and no local memory,
    fits the shared memory (227 KB), the same HGMMA and setmaxnreg, and tile loops within a few
    instructions of the round-robin kernel's (session 33: 755 / 526 / 722, 756 / 521 / 717)."""
    pytest.importorskip("triton.experimental.gluon")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, TRITON_INTERPRET="0", PYTHONPATH=os.path.join(root, "src"))
    res = subprocess.run([sys.executable, "-c", _COMPILE, os.path.join(root, "bench")], env=env,
                         capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stderr[-2000:]
    r = json.loads(res.stdout.strip().splitlines()[-1])
    base = r["routed"]
    for name in ("sched", "split", "sched_split"):
        new = r[name]
        assert new["spill"] == 0 and new["local"] == 0, (name, new)
        assert new["smem"] <= 232448 and abs(new["smem"] - base["smem"]) <= 64, (name, new, base)
        assert new["hgmma"] == base["hgmma"] and new["regs"] == base["regs"], (name, new, base)
        assert len(new["loops"]) == len(base["loops"]) == 6
        assert all(abs(a - b) <= 4 for a, b in zip(new["loops"], base["loops"])), (name, new, base)


# ---------------------------------------------------------------------------------------
# GPU (Hopper)
# ---------------------------------------------------------------------------------------
@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("window", [(1024, 0), (256, 256), (100, 37)])
@pytest.mark.parametrize("b, nq, nk, h, hk", [
    (1, 2048, 2048, 4, 4),
    (2, 1024, 1536, 4, 2),      # Nq < Nk, GQA
    (1, 1536, 1024, 2, 1),      # Nq > Nk: with (100, 37) rows that see no key (O = 0, lse = +inf)
])
@pytest.mark.parametrize("num_programs", [None, 3])
def test_scheduled_window_matches_reference_gpu(dtype, window, b, nq, nk, h, hk, num_programs):
    q, k, v = rand_qkv(b, nq, nk, h, hk, 128, dtype, DEVICE)
    check(q, k, v, window=window, num_programs=num_programs, scheduled=True, **ROUTED)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("split_q", [False, True])
def test_scheduled_window_rows_without_keys_gpu(split_q):
    """Nq - Nk = 1024 > right: the first 1024 - 37 rows see no key (whole blocks of them)."""
    q, k, v = rand_qkv(1, 2048, 1024, 2, 2, 128, torch.bfloat16, DEVICE)
    o, lse = check(q, k, v, window=(100, 37), num_programs=5, scheduled=True, split_q=split_q, **ROUTED)
    assert (o[:, :1024 - 37] == 0).all() and torch.isposinf(lse[:, :, :1024 - 37]).all()


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("window", [(1024, 0), (256, 256), (100, 37), (5000, 1)])
@pytest.mark.parametrize("b, nq, nk, h, hk", [(1, 4096, 4096, 4, 2), (2, 1024, 1536, 2, 2), (1, 1536, 1024, 2, 1)])
@pytest.mark.parametrize("num_programs, band", [(None, None), (7, None), (7, 1), (132, 3)])
def test_scheduled_window_bitwise_routed_gpu(window, b, nq, nk, h, hk, num_programs, band):
    """Each block's arithmetic is unchanged (the same tiles in the same order, another CTA): bitwise
    the routed round-robin kernel's and the one-block WINDOW kernel's outputs (window (5000, 1): an
    unbounded left edge with a right edge, WINDOW at these lengths)."""
    q, k, v = rand_qkv(b, nq, nk, h, hk, 128, torch.bfloat16, DEVICE)
    scale = 128 ** -0.5
    ref_o, ref_lse = attention_fwd_gluon(q, k, v, scale, window=window)
    rr_o, rr_lse = attention_fwd_gluon(q, k, v, scale, window=window, num_programs=num_programs, **ROUTED)
    o, lse = attention_fwd_gluon(q, k, v, scale, window=window, num_programs=num_programs, scheduled=True,
                                 band=band, **ROUTED)
    assert torch.equal(o, rr_o) and torch.equal(lse, rr_lse)
    assert torch.equal(o, ref_o) and torch.equal(lse, ref_lse)


@pytest.mark.gpu
@hopper
def test_scheduled_window_back_to_back_and_graph_gpu():
    """The same prepared launch twice and replayed in a CUDA graph (the schedule built by prepare,
    before the capture): the same outputs bitwise, every element rewritten (NaN-filled before)."""
    q, k, v = rand_qkv(2, 2048, 2048, 4, 4, 128, torch.bfloat16, DEVICE)
    call = forward_gluon.prepare(q, k, v, 128 ** -0.5, window=(1024, 0), scheduled=True, **ROUTED)
    o1, l1 = (t.clone() for t in call())
    o, lse = call()
    assert torch.equal(o, o1) and torch.equal(lse, l1)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        call()
    o.fill_(float("nan"))
    lse.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(o, o1) and torch.equal(lse, l1)


@pytest.mark.gpu
@hopper
def test_flash_attn_func_takes_scheduled_window_gpu(monkeypatch):
    """The route with the switch on: the SCHEDULED launch (with EARLY_Q and LEAN_MASK as routed),
    bitwise the routed round-robin kernel through the library's own entry point."""
    from flashtriton import flash_attn_func

    monkeypatch.setitem(policy.GLUON_FWD_WINDOW_SCHEDULED, 128, 1024)
    monkeypatch.setitem(policy.GLUON_FWD_WINDOW_EARLY_Q, 128, 1024)
    monkeypatch.setitem(policy.GLUON_FWD_WINDOW_LEAN_MASK, 128, 1024)
    monkeypatch.setitem(policy.GLUON_FWD_WINDOW_MIN_N, 128, 1024)
    plans.clear()
    seen = []
    real = forward_gluon._launch_into
    monkeypatch.setattr(forward_gluon, "_launch_into",
                        lambda *a, **kw: seen.append(kw.get("scheduled")) or real(*a, **kw))
    q, k, v = rand_qkv(1, 2048, 2048, 4, 4, 128, torch.bfloat16, DEVICE)
    out = flash_attn_func(q, k, v, window_size=(256, 0))
    assert seen == [True]
    plans.clear()
    ref, _ = attention_fwd_gluon(q, k, v, 128 ** -0.5, window=(256, 0), **ROUTED)
    assert torch.equal(out, ref)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("window", [(1024, 0), (256, 256), (100, 37)])
@pytest.mark.parametrize("b, nq, nk, h, hk", [(1, 2048, 2048, 4, 4), (2, 1024, 1536, 4, 2), (1, 1536, 1024, 2, 1)])
@pytest.mark.parametrize("num_programs", [None, 3])
@pytest.mark.parametrize("scheduled", [False, True])
def test_split_q_matches_reference_gpu(dtype, window, b, nq, nk, h, hk, num_programs, scheduled):
    q, k, v = rand_qkv(b, nq, nk, h, hk, 128, dtype, DEVICE)
    check(q, k, v, window=window, num_programs=num_programs, scheduled=scheduled, **SPLIT)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("causal, window", [(False, None), (True, None), (False, (1024, 0)), (False, (100, 37)),
                                            (False, (-1, 0))])
@pytest.mark.parametrize("b, nq, nk, h, hk", [(1, 4096, 4096, 4, 2), (2, 1024, 1536, 2, 2), (1, 1536, 1024, 2, 1)])
@pytest.mark.parametrize("num_programs", [None, 1, 7])
def test_split_q_bitwise_early_q_gpu(causal, window, b, nq, nk, h, hk, num_programs):
    """A Q barrier pair a consumer changes no arithmetic: bitwise the EARLY_Q kernel without it
    (plain, causal and windows; one CTA looping over every block, and 7)."""
    q, k, v = rand_qkv(b, nq, nk, h, hk, 128, torch.bfloat16, DEVICE)
    scale = 128 ** -0.5
    kw = dict(causal=causal, window=window, persistent=True, num_programs=num_programs, early_q=True)
    ref_o, ref_lse = attention_fwd_gluon(q, k, v, scale, **kw)
    o, lse = attention_fwd_gluon(q, k, v, scale, split_q=True, **kw)
    assert torch.equal(o, ref_o) and torch.equal(lse, ref_lse)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("d", [128, 64])
def test_split_q_rows_without_keys_gpu(d):
    q, k, v = rand_qkv(1, 2048, 1024, 2, 2, d, torch.bfloat16, DEVICE)
    o, lse = check(q, k, v, window=(100, 37), persistent=True, num_programs=5, early_q=True, split_q=True)
    assert (o[:, :1024 - 37] == 0).all() and torch.isposinf(lse[:, :, :1024 - 37]).all()


@pytest.mark.gpu
@hopper
def test_split_q_graph_replays_gpu():
    """Back-to-back graph replays of the SCHEDULED SPLIT_Q window kernel (the barriers start fresh
    each launch): every replay rewrites the NaN-filled outputs with the same values."""
    q, k, v = rand_qkv(2, 2048, 2048, 4, 4, 128, torch.bfloat16, DEVICE)
    call = forward_gluon.prepare(q, k, v, 128 ** -0.5, window=(1024, 0), scheduled=True, **SPLIT)
    o1, l1 = (t.clone() for t in call())
    o, lse = call()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        call()
    for _ in range(3):
        o.fill_(float("nan"))
        lse.fill_(float("nan"))
        graph.replay()
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(o, o1) and torch.equal(lse, l1)


@pytest.mark.gpu
@hopper
def test_scheduled_window_route_replays_its_plan_gpu(monkeypatch):
    """With launch plans on, the second and third calls of the scheduled window route replay the
    first one's plan (the cached schedule is a plan constant, plans.persistent) and stay bitwise
    the routed round-robin kernel's outputs for their new inputs."""
    from flashtriton import flash_attn_func

    monkeypatch.setenv("FLASHTRITON_PLANS", "1")      # (conftest turns plans off for the other tests)
    for table in (policy.GLUON_FWD_WINDOW_SCHEDULED, policy.GLUON_FWD_WINDOW_SPLIT_Q, policy.GLUON_FWD_WINDOW_EARLY_Q,
                  policy.GLUON_FWD_WINDOW_LEAN_MASK, policy.GLUON_FWD_WINDOW_MIN_N):
        monkeypatch.setitem(table, 128, 1024)
    plans.clear()
    for seed in (0, 1, 2):
        torch.manual_seed(seed)
        q, k, v = rand_qkv(1, 2048, 2048, 4, 4, 128, torch.bfloat16, DEVICE)
        before = plans.stats["replayed"]
        out = flash_attn_func(q, k, v, window_size=(256, 0))
        if seed > 0:
            assert plans.stats["replayed"] > before, "the scheduled window forward's plan did not replay"
        ref, _ = attention_fwd_gluon(q, k, v, 128 ** -0.5, window=(256, 0), **ROUTED)
        assert torch.equal(out, ref), seed
    plans.clear()
