"""kernels/fwd_gluon.py DYNAMIC (a session-32 helper, offline, not routed: launchers.policy.
GLUON_FWD_CAUSAL_DYNAMIC = {}): the causal PERSISTENT forward whose CTAs take their blocks from a
launch-wide ticket counter (the banded heaviest-first order of _tile_of; band = B * H is the plain
LPT order), the loader publishing each block's ticket to the consumers through shared memory under
q_bar, the counter reset by the launch's last CTA (no memset a call). Host side launchers/
forward_gluon.py (dynamic=True with persistent=True, causal=True; dynamic_counter), A/B bench/gpu/
s32_gluon_causal_dynamic_ab.py.

CPU: the order from the kernel's own lines (_tile_of's CAUSAL branch) is a permutation of the blocks,
heaviest first inside each band and across all heads when band = B * H; the ticket protocol (the
loader's statements, read from its source, in order) simulated under random interleavings of many
CTAs over back-to-back launches: every block dealt exactly once, the counter back at zero after each
launch; the counter buffers (one per device and stream, zeroed once, persistent for plans);
validation; launch arguments; fwd_into's guard; the policy switch (off by default) and the route.
GPU (Hopper): against float64 with the repo's criterion and bitwise against the one-block causal
kernel (2 consumers at D = 128 / 64, 3 at D = 64), NaN-poisoned outputs (tests/conftest.py), Nq !=
Nk both ways, GQA, Nq not a multiple of 192 (3 consumers), B * H blocks many times the grid, few
CTAs, back-to-back calls (a counter left dirty would skip or repeat blocks), a CUDA-graph capture
replayed twice, the route with the switch set.
"""
import contextlib
import random
import re

import pytest
import torch

from flashtriton.kernels import fwd_gluon
from flashtriton.launchers import forward_gluon, plans, policy
from flashtriton.launchers.forward_gluon import attention_fwd_gluon

from conftest import DEVICE
from helpers import check_attention, rand_qkv, spy
from test_fwd_gluon import IS_HOPPER, check, hopper


def _code(fn) -> str:
    src = fn.src
    return src[src.rindex('"""') + 3:]                  # the code, after the docstring


# ---------------------------------------------------------------------------------------
# CPU: the order, from _tile_of's own lines
# ---------------------------------------------------------------------------------------
def _tile_of_lines():
    src = _code(fwd_gluon._tile_of)
    src = src[src.index("    if CAUSAL:") + len("    if CAUSAL:"):src.index("    else:")]
    return [ln.strip() for ln in src.splitlines() if ln.strip() and not ln.strip().startswith("#")]


_NS = dict(gl=type("gl", (), dict(minimum=staticmethod(min), maximum=staticmethod(max),
                                  cdiv=staticmethod(lambda a, b: -(-a // b)))))


def tile_of(tile, n_m, n_bh, band):
    """(pid_m, pid_bh) of ticket `tile` by _tile_of's CAUSAL lines (every operand non-negative:
    Python's // and % are the GPU's)."""
    env = dict(tile=tile, n_m=n_m, n_bh=n_bh, band=band)
    for line in _tile_of_lines():
        name, expr = line.split("=", 1)
        env[name.strip()] = eval(expr.split("#")[0], dict(_NS), env)  # noqa: S307  (the kernel's own lines)
    return env["pid_m"], env["pid_bh"]


def n_load(pid_m, nq, nk, bm, bn):
    from flashtriton.launchers.schedule import causal_tiles
    return causal_tiles(pid_m, nq, nk, bm, bn)


def test_dynamic_loaders_use_tile_of():
    """Both DYNAMIC partitions map a ticket to its block through _tile_of's CAUSAL order."""
    for fn in (fwd_gluon._fwd_load_dynamic, fwd_gluon._fwd_consume_dynamic):
        assert "_tile_of(i, n_m, n_bh, band, True)" in _code(fn), fn.__name__


@pytest.mark.parametrize("n_m, n_bh, band", [(16, 128, 30), (16, 128, 128), (128, 16, 3), (128, 16, 16),
                                             (11, 7, 3), (1, 5, 2), (9, 1, 1), (6, 10, 4)])
def test_order_is_a_permutation_heaviest_first(n_m, n_bh, band):
    order = [tile_of(t, n_m, n_bh, band) for t in range(n_m * n_bh)]
    assert sorted(order) == [(m, bh) for m in range(n_m) for bh in range(n_bh)]     # every block once
    for first in range(0, n_bh, band):
        inside = [m for m, bh in order if first <= bh < first + band]
        assert inside == sorted(inside, reverse=True)                                # heaviest first in a band
    bands = [bh // band for _, bh in order]
    assert bands == sorted(bands)                                                    # band by band
    if band >= n_bh:                                                                 # the LPT order
        ms = [m for m, _ in order]
        assert ms == sorted(ms, reverse=True)


def test_order_costs_nonincreasing_with_lpt_band():
    """band = B * H: longest causal rows first across heads (n_load never grows along the tickets)."""
    nq = nk = 2048
    costs = [n_load(tile_of(t, 16, 12, 12)[0], nq, nk, 128, 128) for t in range(16 * 12)]
    assert costs == sorted(costs, reverse=True) and costs[0] == 16 and costs[-1] == 1


# ---------------------------------------------------------------------------------------
# CPU: the ticket protocol
# ---------------------------------------------------------------------------------------
def test_loader_protocol_statements_in_order():
    """The loader's ticket statements, in the order the simulation below models: the first ticket
    before the loop, the next one inside it after the block's Q issue, the stop ticket after the last
    q_free, then the count-out and the last CTA's reset of both words."""
    code = _code(fwd_gluon._fwd_load_dynamic)
    steps = ["i = gl.atomic_add(CNT, 1)", "while i < total:", "mbarrier.wait(q_free, (it & 1) ^ 1)",
             "_publish_block(idx_smem, i, LOADER_WARPS)", "mbarrier.expect(q_bar,", "nxt = gl.atomic_add(CNT, 1)",
             "i = nxt", "mbarrier.wait(q_free, (it & 1) ^ 1)", "_publish_block(idx_smem, total, LOADER_WARPS)",
             "mbarrier.arrive(q_bar)", "out = gl.atomic_add(CNT + 1, 1)", "if out == n_prog - 1:",
             "gl.atomic_xchg(CNT, 0)", "gl.atomic_xchg(CNT + 1, 0)"]
    at = 0
    for s in steps:
        j = code.find(s, at)
        assert j >= 0, f"{s!r} not found after position {at}"
        at = j + len(s)
    assert code.count("gl.atomic_add(CNT, 1)") == 2
    consumer = _code(fwd_gluon._fwd_consume_dynamic)
    assert consumer.count("mbarrier.wait(q_bar, ") == 2 and "while i < total:" in consumer


def simulate(cnt, n_prog, total, rnd, reset_at=None):
    """One launch of the ticket protocol (test_loader_protocol_statements_in_order's statements) with
    the CTAs' atomics interleaved at random; cnt: the counter's two words (mutated). Returns each
    CTA's blocks. reset_at: the count-out value that resets (the kernel's n_prog - 1)."""
    reset_at = n_prog - 1 if reset_at is None else reset_at
    got = [[] for _ in range(n_prog)]
    state = {p: "take" for p in range(n_prog)}           # each CTA's next atomic
    while state:
        p = rnd.choice(list(state))
        if state[p] == "take":
            i = cnt[0]
            cnt[0] += 1                                   # atomic_add(CNT, 1)
            if i < total:
                got[p].append(i)
            else:
                state[p] = "out"
        else:
            out = cnt[1]
            cnt[1] += 1                                   # atomic_add(CNT + 1, 1)
            if out == reset_at:
                cnt[0] = 0                                # atomic_xchg(CNT, 0), (CNT + 1, 0)
                cnt[1] = 0
            del state[p]
    return got


@pytest.mark.parametrize("n_prog, total", [(132, 2048), (132, 100), (3, 40), (1, 7), (7, 1), (132, 132)])
def test_ticket_protocol_deals_each_block_once_and_resets(n_prog, total):
    rnd = random.Random(n_prog * 1000 + total)
    cnt = [0, 0]
    for _ in range(5):                                    # back-to-back launches on one counter
        got = simulate(cnt, n_prog, total, rnd)
        assert sorted(b for lst in got for b in lst) == list(range(total))
        assert cnt == [0, 0]


def test_ticket_protocol_model_catches_an_early_reset():
    """The model can fail: resetting at the first CTA out (not the last) deals blocks twice or
    leaves the counter dirty under some interleaving."""
    rnd = random.Random(7)
    bad = 0
    for _ in range(50):
        cnt = [0, 0]
        got = simulate(cnt, 8, 20, rnd, reset_at=0)
        dealt = sorted(b for lst in got for b in lst)
        bad += dealt != list(range(20)) or cnt != [0, 0]
    assert bad > 0


# ---------------------------------------------------------------------------------------
# CPU: host side
# ---------------------------------------------------------------------------------------
def test_dynamic_counter_zeroed_once_per_device_and_kept(monkeypatch):
    monkeypatch.setattr(forward_gluon, "_dyn_counters", {})
    kept = []
    monkeypatch.setattr(plans, "persistent", lambda t: kept.append(t) or t)
    a = forward_gluon.dynamic_counter("cpu")
    b = forward_gluon.dynamic_counter(torch.device("cpu"))
    assert a is b and a.dtype == torch.int32 and a.numel() == 2 and not a.any()
    assert kept == [a, a]                                  # passed to plans as persistent
    a.fill_(3)
    forward_gluon.dynamic_reset()
    assert not a.any()


def test_policy_off_by_default(monkeypatch):
    assert policy.GLUON_FWD_CAUSAL_DYNAMIC == {}
    assert not policy.gluon_fwd_causal_dynamic(128, 16384, 16384)
    monkeypatch.setitem(policy.GLUON_FWD_CAUSAL_DYNAMIC, 128, 2048)
    assert policy.gluon_fwd_causal_dynamic(128, 2048, 4096)
    assert not policy.gluon_fwd_causal_dynamic(128, 1024, 4096)
    assert not policy.gluon_fwd_causal_dynamic(64, 4096, 4096)


def qkv(b=1, nq=512, nk=512, h=4, hk=2, d=128, dtype=torch.bfloat16):
    return rand_qkv(b, nq, nk, h, hk, d, dtype, DEVICE)


@pytest.mark.parametrize("kw", [dict(causal=True), dict(persistent=True), dict(persistent=True, causal=True,
                                                                                 window=(64, 0)),
                                dict(persistent=True, causal=True, window=(-1, 0)),
                                dict(persistent=True, causal=True, scheduled=True),
                                dict(persistent=True, causal=True, dropout_p=0.1,
                                     rng=torch.zeros(2, dtype=torch.int64)),
                                dict(causal=True, pingpong=True)])
def test_rejects_dynamic_outside_its_variant(kw):
    with pytest.raises(ValueError, match=r"^dynamic=True: the persistent causal forward only"):
        attention_fwd_gluon(*qkv(), 0.1, dynamic=True, **kw)


def test_rejects_dynamic_not_a_bool():
    with pytest.raises(ValueError, match=r"^dynamic: expected a bool"):
        attention_fwd_gluon(*qkv(), 0.1, persistent=True, causal=True, dynamic=1)


def test_persistent_causal_three_consumers_still_needs_dynamic():
    with pytest.raises(ValueError, match=r"^num_consumers=3"):
        attention_fwd_gluon(*qkv(d=64), 0.1, persistent=True, causal=True, num_consumers=3)
    with pytest.raises(ValueError, match=r"^early_q=True"):
        attention_fwd_gluon(*qkv(d=64), 0.1, persistent=True, causal=True, num_consumers=3, early_q=True)


@pytest.mark.skipif(IS_HOPPER, reason="a Hopper GPU launches instead")
@pytest.mark.parametrize("kw", [dict(), dict(early_q=True), dict(num_consumers=3, d=64, nq=448),
                                dict(num_consumers=3, d=64, nq=448, early_q=True), dict(num_programs=3, band=2)])
def test_valid_dynamic_call_reaches_the_device_check(kw):
    shape = {k: kw.pop(k) for k in ("d", "nq") if k in kw}
    with pytest.raises(ValueError, match=r"needs a CUDA \(Hopper\) device|needs compute capability 9"):
        attention_fwd_gluon(*qkv(**shape), 0.1, persistent=True, causal=True, dynamic=True, **kw)


def _recorded_launch(monkeypatch, num_consumers=2, nq=512, nk=512, b=2, h=4, hk=2, d=128, **kw):
    got = []
    monkeypatch.setattr(torch.cuda, "device", lambda device: contextlib.nullcontext())
    monkeypatch.setattr(forward_gluon.plans, "launch", lambda kernel, grid, *a, **k: got.append((grid, a, k)))
    monkeypatch.setattr(forward_gluon, "_dyn_counters", {})
    q, k, v = rand_qkv(b, nq, nk, h, hk, d, torch.bfloat16, "cpu")
    o = torch.empty_like(q)
    lse = torch.empty(b, h, nq, dtype=torch.float32)
    table = fwd_gluon.CONSUMERS3_CONFIG if num_consumers == 3 else fwd_gluon.DEFAULT_CONFIG
    bm, bn, st = table[d]
    forward_gluon._launch_into(q, k, v, o, lse, 0.125, bm, bn, st, False, causal=True, persistent=True,
                               num_programs=5, band=kw.pop("band", 3), num_consumers=num_consumers, **kw)()
    assert len(got) == 1
    return got[0]


def test_launch_arguments_dynamic(monkeypatch):
    grid, args, kw = _recorded_launch(monkeypatch, dynamic=True, early_q=True)
    assert grid == (5,)
    assert kw["DYNAMIC"] and kw["CAUSAL"] and kw["PERSISTENT"] and kw["EARLY_Q"]
    assert not (kw["SCHEDULED"] or kw["WINDOW"] or kw["DROPOUT"] or kw["PINGPONG"])
    sched = args[12]                                       # SCHED: the ticket counter
    assert sched is forward_gluon.dynamic_counter("cpu") and sched.dtype == torch.int32 and not sched.any()
    assert args[11] == 3                                   # band


def test_launch_arguments_dynamic_three_consumers(monkeypatch):
    grid, args, kw = _recorded_launch(monkeypatch, 3, nq=448, d=64, dynamic=True)
    assert grid == (5,) and kw["NUM_CONSUMERS"] == 3 and kw["BLOCK_M"] == 192 and kw["DYNAMIC"]
    assert "EARLY_Q" not in kw


def test_launch_arguments_without_dynamic_unchanged(monkeypatch):
    grid, args, kw = _recorded_launch(monkeypatch)
    assert "DYNAMIC" not in kw and args[12].dtype == torch.float32      # SCHED: lse, never read


def _fwd_into_calls(monkeypatch, **kw):
    got = []

    def fake(q, k, v, o, lse, scale, block_m, block_n, stages, pingpong, causal=False, persistent=False, **rest):
        got.append((block_m, causal, persistent, rest.get("num_consumers", 2), rest.get("dynamic", False),
                    rest.get("early_q", False)))
        return lambda: None
    monkeypatch.setattr(forward_gluon, "_launch_into", fake)
    d = kw.pop("d", 128)
    q, k, v = qkv(nq=384, d=d)
    forward_gluon.fwd_into(q, k, v, torch.empty_like(q), None, 0.125, **kw)
    return got


@pytest.mark.parametrize("kw, expect", [
    (dict(causal=True, dynamic=True), (128, True, True, 2, True, False)),
    (dict(causal=True, dynamic=True, early_q=True), (128, True, True, 2, True, True)),
    (dict(causal=True, dynamic=True, early_q=True, num_consumers=3, d=64), (192, True, True, 3, True, True)),
    (dict(causal=False, dynamic=True), (128, False, False, 2, False, False)),           # not causal: ignored
    (dict(causal=True, dynamic=True, window=(64, 0)), (128, True, False, 2, False, False)),
    (dict(causal=True, dynamic=True, dropout_p=0.1, rng=torch.zeros(2, dtype=torch.int64)),
     (128, True, False, 2, False, False)),
])
def test_fwd_into_dynamic_guard(monkeypatch, kw, expect):
    assert _fwd_into_calls(monkeypatch, **kw) == [expect]


@pytest.mark.parametrize("table, d, expect", [({}, 128, (True, False, 2, False)), ({128: 256}, 128, (True, True, 2, True)),
                                              ({64: 256}, 64, (True, True, 3, True)), ({64: 256}, 128, (True, False, 2, False))])
def test_route_passes_dynamic(monkeypatch, table, d, expect):
    """launchers.forward runs fwd_into(dynamic=True, persistent=True, early_q=True) with the causal consumer
    count where the table lists the head dim (CPU: the route forced, fwd_into replaced by a recorder);
    the plan key holds the stream only while the table is set."""
    from flashtriton import flash_attn_func
    import flashtriton
    from flashtriton.launchers import forward

    monkeypatch.setattr(forward, "gluon_fwd", lambda *a: True)
    monkeypatch.setattr(policy, "GLUON_FWD_CAUSAL_DYNAMIC", dict(table))
    monkeypatch.setitem(policy.GLUON_FWD_PERSISTENT, "causal", False)
    monkeypatch.setitem(policy.GLUON_FWD_CAUSAL_CONSUMERS, 64, 3)
    plans.clear()
    got = []

    def fake_fwd_into(q, k, v, out, lse, scale, causal=False, persistent=False, num_consumers=2, dynamic=False,
                      **kw):
        got.append((causal, persistent, num_consumers, dynamic))
        out.zero_()
        lse.zero_()
    monkeypatch.setattr(forward_gluon, "fwd_into", fake_fwd_into)
    q, k, v = rand_qkv(1, 512, 512, 2, 1, d, torch.bfloat16, DEVICE)
    with flashtriton.use_backend("triton"):
        flash_attn_func(q, k, v, causal=True)
    plans.clear()
    assert got == [expect], got


# ---------------------------------------------------------------------------------------
# GPU (Hopper)
# ---------------------------------------------------------------------------------------
_GPU_SHAPES = [
    (1, 2048, 2048, 4, 4),      # 2048 = 10 x 192 + 128 with 3 consumers
    (2, 384, 1024, 4, 2),       # GQA, Nq < Nk
    (3, 768, 384, 6, 3),        # Nq > Nk: rows that see no key (O = 0, lse = +inf)
    (4, 4096, 4096, 8, 2),      # 1024 (768) blocks on 132 CTAs: each CTA takes many
    (1, 128, 128, 1, 1),        # one block, grid 1
]


def _kw(d, nc):
    return dict(num_consumers=nc) if nc == 3 else {}


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("d, nc", [(128, 2), (64, 3), (64, 2)])
@pytest.mark.parametrize("b, nq, nk, h, hk", _GPU_SHAPES)
@pytest.mark.parametrize("early_q", [True, False])
def test_dynamic_matches_reference_and_one_block_gpu(dtype, d, nc, b, nq, nk, h, hk, early_q):
    q, k, v = rand_qkv(b, nq, nk, h, hk, d, dtype, "cuda")
    o, lse = check(q, k, v, causal=True, persistent=True, dynamic=True, early_q=early_q, **_kw(d, nc))
    o1, lse1 = attention_fwd_gluon(q, k, v, d ** -0.5, causal=True, **_kw(d, nc))
    assert torch.equal(o, o1) and torch.equal(lse, lse1)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("d, nc", [(128, 2), (64, 3)])
@pytest.mark.parametrize("num_programs, band", [(1, None), (3, 1), (7, 64), (None, 1)])
def test_dynamic_few_ctas_and_bands_bitwise_gpu(d, nc, num_programs, band):
    q, k, v = rand_qkv(2, 1152, 1152, 6, 2, d, torch.bfloat16, "cuda")      # 1152 = 6 x 192 = 9 x 128
    o1, lse1 = attention_fwd_gluon(q, k, v, 0.3, causal=True, **_kw(d, nc))
    o, lse = attention_fwd_gluon(q, k, v, 0.3, causal=True, persistent=True, dynamic=True, early_q=True,
                                 num_programs=num_programs, band=band, **_kw(d, nc))
    assert torch.equal(o, o1) and torch.equal(lse, lse1)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("d, nc", [(128, 2), (64, 3)])
def test_dynamic_back_to_back_calls_gpu(d, nc):
    """Ten launches back to back on one stream (one counter), fresh inputs and shapes in turn: a counter
    the previous launch left dirty would skip blocks (NaN-poisoned rows) or hang; the counter is zero after."""
    torch.cuda.synchronize()
    for i in range(10):
        nq = (1024, 2048, 384)[i % 3]
        q, k, v = rand_qkv(2, nq, nq, 4, 2, d, torch.bfloat16, "cuda")
        o1, lse1 = attention_fwd_gluon(q, k, v, 0.2, causal=True, **_kw(d, nc))
        o, lse = attention_fwd_gluon(q, k, v, 0.2, causal=True, persistent=True, dynamic=True, early_q=True,
                                     num_programs=(None, 5)[i % 2], **_kw(d, nc))
        assert torch.equal(o, o1) and torch.equal(lse, lse1), i
    torch.cuda.synchronize()
    assert not forward_gluon.dynamic_counter(q.device).any()


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("d, nc", [(128, 2), (64, 3)])
def test_dynamic_cuda_graph_replayed_twice_gpu(d, nc):
    q, k, v = rand_qkv(2, 2048, 2048, 4, 2, d, torch.bfloat16, "cuda")
    launch = forward_gluon.prepare(q, k, v, 0.2, causal=True, persistent=True, dynamic=True, early_q=True,
                                   **_kw(d, nc))
    launch()                                                   # warm-up (compile), eager counter
    torch.cuda.synchronize()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=s):
            o, lse = launch()
    torch.cuda.current_stream().wait_stream(s)
    for _ in range(2):
        o.fill_(float("nan"))
        lse.fill_(float("nan"))
        q.copy_(torch.randn_like(q))                           # fresh inputs in the captured buffer
        g.replay()
        torch.cuda.synchronize()
        o1, lse1 = attention_fwd_gluon(q, k, v, 0.2, causal=True, **_kw(d, nc))
        assert torch.equal(o, o1) and torch.equal(lse, lse1)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("d", [128, 64])
def test_flash_attn_func_takes_dynamic_gpu(monkeypatch, d):
    """flash_attn_func causal with the switch set runs fwd_into(dynamic=True), its plan replays (twice),
    and output, lse and backward pass the criterion."""
    monkeypatch.setitem(policy.GLUON_FWD_CAUSAL_DYNAMIC, d, 1024)
    monkeypatch.setitem(policy.GLUON_FWD_CAUSAL_MIN_N, d, 1024)
    plans.clear()
    called = spy(monkeypatch, forward_gluon, "fwd_into", record=lambda *a, **kw: kw.get("dynamic"))
    for _ in range(3):
        check_attention("triton", *rand_qkv(1, 2048, 2048, 4, 2, d, torch.bfloat16, "cuda"), causal=True,
                        check_probs=False)
    plans.clear()
    assert called and all(called), called
