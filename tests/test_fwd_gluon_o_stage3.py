"""kernels/fwd_gluon.py O_STAGE3 (session 43, a helper; not routed): O_STAGE for the NUM_CONSUMERS = 3 kernel at
D = 64 (192-row blocks, three 64-row consumers), PERSISTENT, plain or causal, causal with the host's longest-first
deal (SCHEDULED) or the banded round robin. Each live consumer arrives on q_free after its tile loops (before the
last P V), so the next block's Q lands under that P V and the epilogue; O leaves through a (3, 64, 64) buffer of its
own (the 3-consumer kernel uses 120 KB of shared memory; one CTA an SM is fixed by the registers), and the causal
consumers compute only their own tiles (_fwd_consume_causal3's split) and drain the rest. Host side
launchers/forward_gluon.py (persistent=True, num_consumers=3, o_stage=True: check_o_stage, check_consumers),
launchers/schedule.py (the deal of cdiv(Nq, 192) blocks); A/B bench/gpu/s43_o_stage3_ab.py.

CPU: validation, the launch arguments (recorder), fwd_into's tile choice, the deal's blocks, the barrier order from
the kernel's source, and a model of the barrier protocol (loader + three consumers over mbarrier phases, random
interleavings; the kernel's own tile counts) that checks no deadlock, no stale phase passed, no stage or Q slice
overwritten while read. GPU (Hopper): float64 criterion (tests/helpers.py) for causal (scheduled and banded) and
plain calls, Nq != Nk both ways, Nq not a multiple of 192, GQA, few CTAs; bitwise the one-block 3-consumer causal
kernel's (scheduled or not, num_programs None / 3 / 1) and the plain persistent 3-consumer kernel's; rows that see
no key (O = 0, lse = +inf).
"""
import contextlib
import random
import re

import pytest
import torch

from flashtriton.kernels import fwd_gluon
from flashtriton.launchers import forward_gluon, plans, schedule
from flashtriton.launchers.forward_gluon import attention_fwd_gluon

from conftest import DEVICE
from helpers import rand_qkv
from test_fwd_gluon import check, hopper
from test_fwd_gluon_causal_3wg import split3

BM3, BN, ST = fwd_gluon.CONSUMERS3_CONFIG[64]      # (192, 128, 3)


def qkv(b=1, nq=384, nk=384, h=4, hk=2, d=64, dtype=torch.bfloat16):
    return (torch.empty(b, nq, h, d, dtype=dtype), torch.empty(b, nk, hk, d, dtype=dtype),
            torch.empty(b, nk, hk, d, dtype=dtype))


def _code(fn) -> str:
    src = fn.src
    return src[src.index('"""', src.index('"""') + 3) + 3:]      # after the docstring


# ---------------------------------------------------------------------------------------
# CPU: validation
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("kw", [dict(causal=True, scheduled=True), dict(causal=True), dict(),
                                dict(causal=True, scheduled=True, num_programs=3, band=2)])
def test_valid_three_consumer_o_stage_call_reaches_the_device_check(kw):
    with pytest.raises(ValueError, match="CUDA"):
        forward_gluon.prepare(*qkv(nq=448, nk=512), 0.125, persistent=True, num_consumers=3, o_stage=True, **kw)


@pytest.mark.parametrize("kw, match", [
    (dict(causal=True, o_stage=True), "o_stage=True: the persistent forward"),           # one block a CTA
    (dict(causal=True, persistent=True, o_stage=True, early_q=True), "early_q=True: the persistent 2-consumer"),
    (dict(causal=True, persistent=True, o_stage=True, split_empty=True), "split_empty=True: the 2-consumer"),
    (dict(causal=True, persistent=True, o_stage=True, dropout_p=0.1, rng=torch.zeros(2, dtype=torch.int64)),
     "o_stage=True: the persistent forward"),
    (dict(causal=True, persistent=True), "^num_consumers=3: the plain persistent forward"),   # no O_STAGE
    (dict(causal=True, persistent=True, scheduled=True), "^num_consumers=3: the plain persistent forward"),
    (dict(persistent=True, o_stage=True, window=(64, 0)), "^num_consumers=3: the plain persistent forward"),
    (dict(persistent=True, o_stage=True, scheduled=True), "scheduled=True needs persistent=True and causal"),
    (dict(causal=True, persistent=True, o_stage=1), "o_stage: expected a bool"),
])
def test_rejects_three_consumer_o_stage_outside_its_variant(kw, match):
    with pytest.raises(ValueError, match=match):
        forward_gluon.prepare(*qkv(), 0.125, num_consumers=3, **kw)


def test_rejects_three_consumer_o_stage_at_other_head_dims_and_lengths():
    with pytest.raises(ValueError, match=r"o_stage=True with num_consumers=3: head dim 128 not supported"):
        forward_gluon.prepare(*qkv(d=128), 0.125, persistent=True, causal=True, num_consumers=3, o_stage=True)
    with pytest.raises(ValueError, match="BLOCK_M = 64"):                         # Nq a multiple of 64
        forward_gluon.prepare(*qkv(nq=400), 0.125, persistent=True, causal=True, num_consumers=3, o_stage=True)
    with pytest.raises(ValueError, match="pingpong"):
        forward_gluon.prepare(*qkv(), 0.125, persistent=True, num_consumers=3, o_stage=True, pingpong=True)


def test_check_o_stage_direct():
    forward_gluon.check_o_stage(True, True, 3, False, False, 64)
    forward_gluon.check_o_stage(True, True, 3, False, False, None)
    with pytest.raises(ValueError, match="head dim 256"):
        forward_gluon.check_o_stage(True, True, 3, False, False, 256)
    with pytest.raises(ValueError, match="persistent forward"):
        forward_gluon.check_o_stage(True, False, 3, False, False, 64)
    forward_gluon.check_consumers(3, 64, True, True, None, 0.0, True, False, True)
    forward_gluon.check_consumers(3, 64, True, False, None, 0.0, False, False, True)
    with pytest.raises(ValueError, match="num_consumers=3"):
        forward_gluon.check_consumers(3, 64, True, True, None, 0.0, True, False, False)
    with pytest.raises(ValueError, match="num_consumers=3"):
        forward_gluon.check_consumers(3, 64, False, False, None, 0.0, False, False, True)   # one-block plain


# ---------------------------------------------------------------------------------------
# CPU: launch arguments, fwd_into, the deal
# ---------------------------------------------------------------------------------------
def _recorded_launch(monkeypatch, nq=2048, nk=2048, b=1, h=4, hk=2, **kw):
    got = []
    monkeypatch.setattr(torch.cuda, "device", lambda device: contextlib.nullcontext())
    monkeypatch.setattr(plans, "launch", lambda kernel, grid, *a, **k2: got.append((grid, a, k2)))
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)
    q, k, v = qkv(b=b, nq=nq, nk=nk, h=h, hk=hk)
    lse = torch.empty(b, h, nq, dtype=torch.float32)
    forward_gluon._launch_into(q, k, v, torch.empty_like(q), lse, 0.125, BM3, BN, ST, False, persistent=True,
                               num_programs=kw.pop("num_programs", 3), band=2, num_consumers=3, **kw)()
    assert len(got) == 1
    return got[0]


@pytest.mark.parametrize("scheduled", [False, True])
def test_launch_arguments_three_consumer_o_stage(monkeypatch, scheduled):
    schedule._CACHE.clear()
    grid, args, kw = _recorded_launch(monkeypatch, causal=True, scheduled=scheduled, o_stage=True)
    assert grid == (3,)
    assert kw["O_STAGE"] is True and kw["NUM_CONSUMERS"] == 3 and kw["PERSISTENT"] and kw["CAUSAL"]
    assert kw["SCHEDULED"] is scheduled and kw["BLOCK_M"] == BM3 and kw["BLOCK_N"] == BN and kw["NUM_STAGES"] == ST
    assert "EARLY_Q" not in kw and "SPLIT_EMPTY" not in kw and kw["HEAD_DIM"] == 64
    assert list(args[0].block_shape) == [64, 64] and list(args[3].block_shape) == [64, 64]     # Q / O boxes
    assert list(args[1].block_shape) == [BN, 64]
    if scheduled:
        sched = args[12].cpu().tolist()
        n_m = -(-2048 // BM3)                          # 11: the last block holds rows 1920-2047 (2 live consumers)
        offsets, blocks = sched[:4], sched[4:]
        assert offsets[0] == 0 and offsets[-1] == len(blocks) == n_m * 4
        assert sorted(blocks) == list(range(n_m * 4))
    schedule._CACHE.clear()


def test_launch_arguments_three_consumer_o_stage_plain(monkeypatch):
    grid, _, kw = _recorded_launch(monkeypatch, nq=448, nk=512, b=2, o_stage=True, num_programs=132)
    assert grid == (min(132, 3 * 2 * 4),)
    assert kw["O_STAGE"] is True and kw["NUM_CONSUMERS"] == 3 and not kw["CAUSAL"] and not kw["SCHEDULED"]


def test_launch_arguments_without_o_stage_unchanged(monkeypatch):
    _, _, kw = _recorded_launch(monkeypatch, nq=448, nk=512)
    assert "O_STAGE" not in kw and kw["NUM_CONSUMERS"] == 3


def _fwd_into_seen(monkeypatch, **kw):
    got = []

    def fake(q, k, v, o, lse, scale, block_m, block_n, stages, pingpong, causal=False, persistent=False,
             num_consumers=2, o_stage=False, scheduled=False, **rest):
        got.append((num_consumers, block_m, bool(o_stage), bool(scheduled)))
        return lambda: None
    monkeypatch.setattr(forward_gluon, "_launch_into", fake)
    q, k, v = qkv(nq=384)
    forward_gluon.fwd_into(q, k, v, torch.empty_like(q), None, 0.125, **kw)
    return got


@pytest.mark.parametrize("kw, expect", [
    (dict(causal=True, persistent=True, scheduled=True, num_consumers=3, o_stage=True), (3, 192, True, True)),
    (dict(causal=True, persistent=True, num_consumers=3, o_stage=True), (3, 192, True, False)),
    (dict(persistent=True, num_consumers=3, o_stage=True), (3, 192, True, False)),
    (dict(causal=True, persistent=True, num_consumers=3), (2, 128, False, False)),      # no O_STAGE: 2 consumers
    (dict(causal=True, persistent=True, scheduled=True, o_stage=True), (2, 128, True, True)),
    (dict(causal=True, num_consumers=3), (3, 192, False, False)),                        # one block a CTA
    (dict(causal=True, persistent=True, num_consumers=3, o_stage=True, window=(64, 0)), (2, 128, True, False)),
])
def test_fwd_into_three_consumer_o_stage(monkeypatch, kw, expect):
    assert _fwd_into_seen(monkeypatch, **kw) == [expect]


@pytest.mark.parametrize("nq, nk", [(2048, 2048), (4096, 4096), (448, 512), (1536, 1024)])
def test_causal_deal_covers_cdiv_blocks(nq, nk):
    """schedule.causal_schedule with BLOCK_M 192: n_m = cdiv(Nq, 192) blocks a head (the kernel's n_m), each once,
    priced by the loader's n_load; with BLOCK_M 128 (Nq a multiple) the deal of before (n_m = Nq // 128)."""
    schedule._CACHE.clear()
    n_bh, n_prog = 6, 5
    for bm in (BM3, 128):
        if nq % bm and bm == 128:
            continue
        sched = schedule.causal_schedule("cpu", nq, nk, n_bh, n_prog, 2, bm, BN).tolist()
        n_m = -(-nq // bm)
        assert sorted(sched[n_prog + 1:]) == list(range(n_m * n_bh))
        lists = [sched[n_prog + 1 + sched[p]:n_prog + 1 + sched[p + 1]] for p in range(n_prog)]
        costs = [schedule.causal_tiles(m, nq, nk, bm, BN) + schedule.BLOCK_OVERHEAD_TILES for m in range(n_m)]
        assert lists == schedule.lpt_deal(costs, n_bh, n_prog, 2)
    schedule._CACHE.clear()


def test_shared_memory_budget():
    """O's own buffer fits: Q (3, 64, 64) + 3 stages of K and V (128, 64) + O (3, 64, 64), 2-byte elements, under
    the H200's 227 KB a block (offline: 147,848 B with the barriers)."""
    d = 64
    q = o = BM3 * d * 2
    kv = ST * 2 * BN * d * 2
    assert (q, kv, o) == (24576, 98304, 24576)
    assert q + kv + o == 144 * 1024 <= 227 * 1024


# ---------------------------------------------------------------------------------------
# CPU: barrier order from the kernel's source
# ---------------------------------------------------------------------------------------
def test_three_consumer_epilogue_uses_its_own_buffer_and_releases_the_stage_after_the_last_pv():
    code = _code(fwd_gluon._fwd_consume)
    pv = code.index("o_tok = warpgroup_mma(p16, v_smem.index(last), acc, is_async=True)")
    rel = code.index("    elif q_smem.shape[0] == 3:\n", pv)
    assert "mbarrier.arrive(kv_empty.index(last))" in code[rel:rel + 200]
    assert rel < code.index("# epilogue")
    epi = code[code.index("    elif O_STAGE and q_smem.shape[0] == 3:\n"):]
    epi = epi[:epi.index("    elif O_STAGE:\n")]
    assert "mbarrier.wait" not in epi and "k_smem" not in epi and "q.store" not in epi
    order = [epi.index(s) for s in ("o_buf = o_smem.index(WG)", "o_buf.store(acc.to(dtype))", "fence_async_shared()",
                                    "tma.async_copy_shared_to_global(o_desc, [q_row + WG * HALF_M, q_col], o_buf)",
                                    "tma.store_wait(0)")]
    assert order == sorted(order)
    # the q_free arrival (every O_STAGE kernel) before the last P V, once
    arrive = code.index("    if O_STAGE:\n        # O_STAGE (session 42)")
    assert arrive < code.index("mbarrier.wait(v_ready.index(last)")
    assert code.count("mbarrier.arrive(q_free)") == 2              # O_STAGE's, and the Q-buffer epilogue's


def test_persistent_causal_split_is_the_one_block_kernels():
    """The persistent consumer's causal 3-consumer split is _fwd_consume_causal3's arithmetic (same d0, n_own,
    n_full lines), the skip comes after the block's _fwd_consume, on ring tiles t0 + n_own .. t0 + n_load."""
    pers = _code(fwd_gluon._fwd_consume_persistent)
    one = _code(fwd_gluon._fwd_consume_causal3)

    def rhs(src, name):
        return re.findall(rf"^\s*{name} = ([^#\n]+)", src, flags=re.M)[0].strip()
    assert rhs(pers, "d0") == rhs(one, "d0")
    assert rhs(pers, "n_own") == rhs(one, "n_own")
    assert rhs(pers, "n_full_own") == rhs(one, "n_full")
    branch = pers[pers.index("                if CAUSAL:"):pers.index("                else:")]
    assert branch.index("_fwd_consume(") < branch.index(
        "_fwd_skip_tiles(k_ready, v_ready, kv_empty, t0 + n_own, t0 + n_load, NUM_STAGES)")
    assert "O_STAGE, o_smem)" in branch


def test_o_buffer_allocated_only_for_three_consumer_o_stage():
    code = fwd_gluon.attn_fwd_gluon_kernel.src          # (no docstring)
    i = code.index("    if O_STAGE and NUM_CONSUMERS == 3:\n")
    assert "o_smem = gl.allocate_shared_memory(dtype, [NUM_CONSUMERS, HALF_M, HEAD_DIM], o_desc.layout)" in \
        code[i:i + 300]
    assert code.count("gl.allocate_shared_memory(dtype,") == 4     # q, k, v and this o


# ---------------------------------------------------------------------------------------
# CPU: a model of the barrier protocol (loader + 3 consumers, random interleavings)
# ---------------------------------------------------------------------------------------
class _Bar:
    """An mbarrier: count arrivals complete a phase; wait(parity) passes iff the current phase's parity differs
    (the phase with that parity completed), as mbarrier.try_wait.parity. `completed` counts phases."""

    def __init__(self, count):
        self.count, self.pending, self.completed = count, count, 0

    def arrive(self):
        self.pending -= 1
        assert self.pending >= 0
        if self.pending == 0:
            self.completed += 1
            self.pending = self.count

    def passes(self, parity):
        return (self.completed & 1) != parity


def _simulate(nq, nk, n_bh, n_prog, seed):
    """Runs the kernel's protocol for the O_STAGE 3-consumer causal persistent kernel over one CTA's block list
    (a scheduled deal), with TMA completions delayed at random. Checks: each wait passes only on the phase it means
    (the tile / block it waits for has landed), a stage is refilled only after all 3 consumers released its
    previous tile, Q is refilled only after all 3 arrived on q_free for the previous block, nothing deadlocks."""
    rng = random.Random(seed)
    sched = schedule.pack(schedule.lpt_deal(
        [schedule.causal_tiles(m, nq, nk, BM3, BN) + 1.5 for m in range(-(-nq // BM3))], n_bh, n_prog, n_bh))
    sched = sched.tolist()
    n_m = -(-nq // BM3)
    lists = [[sched[n_prog + 1 + i] for i in range(sched[p], sched[p + 1])] for p in range(n_prog)]
    for blocks in lists:
        q_bar, q_free = _Bar(1), _Bar(3)
        k_ready = [_Bar(1) for _ in range(ST)]
        v_ready = [_Bar(1) for _ in range(ST)]
        kv_empty = [_Bar(3) for _ in range(ST)]
        stage_tile = [None] * ST              # ring tile currently in the stage (landed or in flight)
        readers = [set() for _ in range(ST)]  # consumers that may still read the stage's tile
        q_block = [None]
        q_readers = set()
        inflight = []                         # (barrier, callback) TMA completions not yet delivered

        def tiles(pid_m):
            return split3(nq, nk, pid_m, 0)[1]

        def loader():
            t0 = 0
            for it, blk in enumerate(blocks):
                n_load = tiles(blk % n_m)
                n_pre = min(n_load, ST - 1)
                order = list(range(n_pre)) + ["Q"] + list(range(n_pre, n_load))
                for j in order:
                    if j == "Q":
                        while not q_free.passes((it & 1) ^ 1):
                            yield
                        assert not q_readers, "Q overwritten while read"
                        q_block[0] = None
                        inflight.append((q_bar, lambda blk=blk: q_block.__setitem__(0, blk)))
                        continue
                    g = t0 + j
                    s = g % ST
                    while not kv_empty[s].passes(((g // ST) & 1) ^ 1):
                        yield
                    assert not readers[s], f"stage {s} overwritten while read by {readers[s]}"
                    stage_tile[s] = None
                    inflight.append((k_ready[s], lambda s=s, g=g: stage_tile.__setitem__(s, g)))
                    inflight.append((v_ready[s], None))
                    yield
                t0 += n_load

        def consumer(wg):
            t0 = 0
            for it, blk in enumerate(blocks):
                pid_m = blk % n_m
                live, n_load, n_own, _ = split3(nq, nk, pid_m, wg)
                while not q_bar.passes(it & 1):
                    yield
                assert q_block[0] == blk, "q_bar passed on a stale phase"
                if live:
                    q_readers.add(wg)
                own = n_own if live else 0
                for j in range(n_load):
                    g = t0 + j
                    s = g % ST
                    while not (k_ready[s].passes((g // ST) & 1) and v_ready[s].passes((g // ST) & 1)):
                        yield
                    assert stage_tile[s] == g, "k_ready passed on a stale phase"
                    if j < own:
                        readers[s].add(wg)
                        yield                                     # S_j (reads K), later P V (reads V)
                        if j == own - 1:
                            q_readers.discard(wg)                 # last S: Q no longer read
                            q_free.arrive()                       # O_STAGE: before the last P V
                            yield
                        readers[s].discard(wg)
                        kv_empty[s].arrive()
                    else:
                        if j == own and live:
                            yield                                 # the epilogue (O through o_smem, no barrier)
                        kv_empty[s].arrive()                      # _fwd_skip_tiles / _fwd_drain
                if not live:
                    q_free.arrive()                               # _fwd_drain: at its end
                t0 += n_load

        procs = [loader()] + [consumer(w) for w in range(3)]
        done = [False] * 4
        steps = 0
        while not all(done):
            steps += 1
            assert steps < 10 ** 6, "deadlock"
            if inflight and rng.random() < 0.3:
                bar, cb = inflight.pop(rng.randrange(len(inflight)))
                if cb:
                    cb()
                bar.arrive()
                continue
            live_procs = [i for i in range(4) if not done[i]]
            i = rng.choice(live_procs)
            try:
                next(procs[i])
            except StopIteration:
                done[i] = True
            if all(done[i] or False for i in range(4)):
                break
        while inflight:                                           # nothing may be left in flight at the end
            bar, cb = inflight.pop()
            raise AssertionError("a TMA load left in flight at the CTA's end")


@pytest.mark.parametrize("nq, nk", [(2048, 2048), (1024, 1024), (448, 512), (1536, 1024), (448, 256), (64, 128)])
@pytest.mark.parametrize("seed", range(3))
def test_barrier_protocol_model(nq, nk, seed):
    _simulate(nq, nk, n_bh=3, n_prog=2, seed=seed)


# ---------------------------------------------------------------------------------------
# GPU (Hopper)
# ---------------------------------------------------------------------------------------
CASES = [dict(causal=True, scheduled=True), dict(causal=True), dict()]


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("kw", CASES)
@pytest.mark.parametrize("b, nq, nk, h, hk", [
    (1, 2048, 2048, 4, 4),      # 2048 = 10 x 192 + 128: the last block's consumer 2 past the end
    (2, 1024, 1536, 4, 2),      # Nq < Nk, GQA
    (1, 1536, 1024, 2, 1),      # Nq > Nk: causal rows that see no key (O = 0, lse = +inf)
    (3, 448, 256, 6, 3),        # Nq > Nk, 448 = 2 x 192 + 64
    (2, 448, 512, 4, 1),        # Nk - Nq = 64 (not a multiple of 128)
    (1, 4096, 4096, 2, 2),      # 4096 = 21 x 192 + 64: consumers 1 / 2 of the last block past the end
])
@pytest.mark.parametrize("num_programs", [None, 3])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_o_stage3_matches_reference_gpu(kw, b, nq, nk, h, hk, num_programs, dtype):
    q, k, v = rand_qkv(b, nq, nk, h, hk, 64, dtype, DEVICE)
    check(q, k, v, persistent=True, num_programs=num_programs, num_consumers=3, o_stage=True, **kw)


@pytest.mark.gpu
@hopper
def test_o_stage3_negative_scale_gpu():
    q, k, v = rand_qkv(2, 704, 768, 4, 2, 64, torch.bfloat16, DEVICE)      # 704 = 3 x 192 + 128
    check(q, k, v, scale=-0.1, causal=True, scheduled=True, persistent=True, num_consumers=3, o_stage=True)
    check(q, k, v, scale=-0.1, persistent=True, num_programs=5, num_consumers=3, o_stage=True)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("scheduled", [False, True])
@pytest.mark.parametrize("b, nq, nk, h, hk", [(1, 4096, 4096, 4, 2), (4, 2048, 2048, 3, 3), (1, 1536, 1024, 2, 1),
                                              (2, 448, 512, 4, 1)])
@pytest.mark.parametrize("num_programs", [None, 3, 1])
def test_o_stage3_bitwise_one_block_causal_gpu(scheduled, b, nq, nk, h, hk, num_programs):
    """The per-row arithmetic is the one-block 3-consumer causal kernel's (the same split, the same
    _fwd_consume): bitwise its outputs; repeated launches from one prepare() (the barriers start fresh every
    launch; with num_programs 1 one CTA walks every block: q_free and the ring's phases wrap many times)."""
    q, k, v = rand_qkv(b, nq, nk, h, hk, 64, torch.bfloat16, DEVICE)
    ref_o, ref_lse = attention_fwd_gluon(q, k, v, 0.125, causal=True, num_consumers=3)
    launch = forward_gluon.prepare(q, k, v, 0.125, causal=True, persistent=True, num_programs=num_programs,
                                   scheduled=scheduled, num_consumers=3, o_stage=True)
    o, lse = (t.clone() for t in launch())
    assert torch.isfinite(o).all() and not torch.isnan(lse).any(), "unwritten (NaN-poisoned) output"
    assert torch.equal(o, ref_o) and torch.equal(lse, ref_lse)
    o2, lse2 = launch()
    assert torch.equal(o, o2) and torch.equal(lse, lse2)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("b, nq, nk, h, hk", [(2, 2048, 2048, 4, 2), (1, 448, 1024, 3, 1)])
@pytest.mark.parametrize("num_programs", [None, 3])
def test_o_stage3_bitwise_plain_persistent_gpu(b, nq, nk, h, hk, num_programs):
    q, k, v = rand_qkv(b, nq, nk, h, hk, 64, torch.bfloat16, DEVICE)
    ref_o, ref_lse = attention_fwd_gluon(q, k, v, 0.125, persistent=True, num_programs=num_programs,
                                         num_consumers=3)
    o, lse = attention_fwd_gluon(q, k, v, 0.125, persistent=True, num_programs=num_programs, num_consumers=3,
                                 o_stage=True)
    assert torch.equal(o, ref_o) and torch.equal(lse, ref_lse)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("scheduled", [False, True])
def test_o_stage3_rows_without_keys_gpu(scheduled):
    """Nq - Nk = 1024: causal, the first 1024 rows see no key (whole blocks of them, and a block of which one
    consumer's rows do: 1024 = 5 x 192 + 64)."""
    q, k, v = rand_qkv(1, 2048, 1024, 2, 2, 64, torch.bfloat16, DEVICE)
    o, lse = check(q, k, v, causal=True, persistent=True, num_programs=5, scheduled=scheduled, num_consumers=3,
                   o_stage=True)
    assert (o[:, :1024] == 0).all() and torch.isposinf(lse[:, :, :1024]).all()
    assert torch.isfinite(lse[:, :, 1024:]).all()
