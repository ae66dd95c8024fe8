"""kernels/fwd_gluon.py O_STAGE (session 42): the PERSISTENT 2-consumer forward in which each consumer arrives on
q_free right after its tile loops (before the block's last P V), the loader lands the next block's Q under that P V
and the epilogue, and O leaves by TMA through the consumer's half of the last tile's K buffer (after q_free's phase
completed: both consumers' last S read all of it), which then goes back to the loader. Host side
launchers/forward_gluon.py (o_stage=True, check_o_stage), switch launchers.policy.GLUON_FWD_O_STAGE, A/B
bench/gpu/s42_o_stage_ab.py.

CPU: validation, the loader's prefetch count (from the kernel's source), launch arguments, fwd_into's guard, the
policy table and the route; the SCHEDULED deal under a CUDA graph capture. GPU (Hopper): against float64 with the
repo criterion (tests/helpers.py) for plain, causal (with and without the host's deal) and windowed calls, Nq != Nk
both ways (rows that see no key: O = 0, lse = +inf), GQA, bf16 / fp16, D = 128 / 64, few CTAs (every CTA loops over
many blocks); bitwise equal to the one-block kernels (the per-row arithmetic is unchanged).
"""
import contextlib
import re

import pytest
import torch

from flashtriton.kernels import fwd_gluon
from flashtriton.launchers import forward_gluon, plans, policy, schedule
from flashtriton.launchers.forward_gluon import attention_fwd_gluon

from conftest import DEVICE
from helpers import graph_replay, rand_qkv, spy
from test_fwd_gluon import check, hopper

BM, BN, _ = fwd_gluon.DEFAULT_CONFIG[128]        # (128, 128, 3)


def qkv(b=1, nq=512, nk=512, h=4, hk=2, d=128, dtype=torch.bfloat16):
    return (torch.empty(b, nq, h, d, dtype=dtype), torch.empty(b, nk, hk, d, dtype=dtype),
            torch.empty(b, nk, hk, d, dtype=dtype))


# ---------------------------------------------------------------------------------------
# CPU
# ---------------------------------------------------------------------------------------
def _code(fn) -> str:
    src = fn.src
    return src[src.index('"""', src.index('"""') + 3) + 3:]      # after the docstring


def test_loader_prefetches_all_but_the_last_stage_before_q():
    """O_STAGE's loader issues NUM_STAGES - 1 K / V tiles of the next block before waiting q_free: their stages
    were freed by P Vs inside the tile loops; the last one (the previous block's last tile's) returns only after
    the O store, which itself waits for q_free's phase: loading it before Q would delay Q behind the store."""
    code = _code(fwd_gluon._fwd_load_persistent)
    branch = code[code.index("        elif O_STAGE:"):code.index("        else:\n            n_pre")]
    assert re.search(r"n_pre = gl\.minimum\(n_load, NUM_STAGES - 1\)", branch)


def test_consumer_frees_q_before_the_last_pv_and_the_stage_after_the_store():
    """The order inside _fwd_consume: q_free arrival before the last P V's wait; in the O_STAGE epilogue the wait
    for q_free's phase before the store into K's buffer, and the stage's kv_empty arrival after tma.store_wait."""
    code = _code(fwd_gluon._fwd_consume)
    arrive = code.index("    if O_STAGE:\n")
    assert "mbarrier.arrive(q_free)" in code[arrive:arrive + 400]
    assert arrive < code.index("mbarrier.wait(v_ready.index(last)")
    epi = code[code.index("    elif O_STAGE:\n"):]
    epi = epi[:epi.index("    else:")]
    order = [epi.index(s) for s in ("mbarrier.wait(q_free, q_phase)", "_store_o_tma(o_desc, k_smem.index(last).slice(",
                                    "mbarrier.arrive(kv_empty.index(last))")]
    assert order == sorted(order)
    # (session 49: the store is _store_o_tma, which returns only after the TMA store completed)
    store = _code(fwd_gluon._store_o_tma)
    assert store.rstrip().endswith("tma.store_wait(0)"), store


@pytest.mark.parametrize("kw", [
    dict(o_stage=True),                                              # not persistent
    dict(o_stage=True, persistent=True, early_q=True),
    dict(o_stage=True, persistent=True, split_empty=True),
    dict(o_stage=1, persistent=True),                                # not a bool
    dict(o_stage=True, persistent=True, dropout_p=0.1, rng=torch.zeros(2, dtype=torch.int64)),
])
def test_rejects_o_stage_outside_its_variant(kw):
    q, k, v = qkv()
    with pytest.raises(ValueError, match="o_stage"):
        forward_gluon.prepare(q, k, v, 0.125, causal=True, **kw)


def test_rejects_o_stage_with_three_consumers_and_at_d256():
    q, k, v = qkv(d=64, nq=384, nk=384)
    with pytest.raises(ValueError, match="o_stage"):
        forward_gluon.prepare(q, k, v, 0.125, persistent=True, num_consumers=3, o_stage=True)
    q, k, v = qkv(d=256)
    with pytest.raises(ValueError, match="o_stage=True: head dim 256"):
        forward_gluon.prepare(q, k, v, 0.125, persistent=True, o_stage=True)


@pytest.mark.parametrize("kw", [dict(), dict(causal=True, scheduled=True), dict(window=(256, 0), lean_mask=True)])
def test_valid_o_stage_call_reaches_the_device_check(kw):
    q, k, v = qkv()
    with pytest.raises(ValueError, match="CUDA"):
        forward_gluon.prepare(q, k, v, 0.125, persistent=True, o_stage=True, **kw)


def _recorded_launch(monkeypatch, **kw):
    got = []
    monkeypatch.setattr(torch.cuda, "device", lambda device: contextlib.nullcontext())
    monkeypatch.setattr(plans, "launch", lambda kernel, grid, *a, **k2: got.append((grid, a, k2)))
    q, k, v = qkv()
    lse = torch.empty(1, 4, 512, dtype=torch.float32)
    forward_gluon._launch_into(q, k, v, torch.empty_like(q), lse, 0.125, BM, BN, 3, False, persistent=True,
                               num_programs=3, band=2, **kw)()        # band given: causal_band reads the GPU's L2
    assert len(got) == 1
    return got[0]


def test_launch_arguments_o_stage(monkeypatch):
    grid, _, kw = _recorded_launch(monkeypatch, causal=True, o_stage=True)
    assert grid == (3,) and kw["O_STAGE"] is True and kw["PERSISTENT"] and kw["CAUSAL"] and "EARLY_Q" not in kw
    _, _, kw = _recorded_launch(monkeypatch, causal=True)
    assert "O_STAGE" not in kw


def test_regression_scheduled_deal_under_graph_capture(monkeypatch):
    """A causal call routed SCHEDULED (O_STAGE's causal route) whose deal is not on the device yet, met inside a
    CUDA graph capture, cannot copy the deal there: it takes the kernel's banded deal (SCHEDULED=False, the same
    outputs bitwise) instead of failing the capture; outside a capture, or with the deal cached, SCHEDULED."""
    schedule._CACHE.clear()
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: True)
    _, args, kw = _recorded_launch(monkeypatch, causal=True, scheduled=True, o_stage=True)
    assert kw["SCHEDULED"] is False and not schedule._CACHE
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)
    _, args, kw = _recorded_launch(monkeypatch, causal=True, scheduled=True, o_stage=True)
    assert kw["SCHEDULED"] is True and len(schedule._CACHE) == 1
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: True)
    _, args, kw = _recorded_launch(monkeypatch, causal=True, scheduled=True, o_stage=True)
    assert kw["SCHEDULED"] is True
    schedule._CACHE.clear()


@pytest.mark.parametrize("kw, expect", [
    (dict(persistent=True, causal=True, o_stage=True), True),
    (dict(persistent=True, window=(256, 0), o_stage=True), True),
    (dict(persistent=False, causal=True, o_stage=True), False),       # O_STAGE is persistent only
    (dict(persistent=True, o_stage=True, num_consumers=3), False),    # 3 consumers: not in this variant
    (dict(persistent=True, window=(256, 0), o_stage=True, early_q=True), False),
    (dict(persistent=True, causal=True, o_stage=True, dropout_p=0.1, rng=torch.zeros(2, dtype=torch.int64)), False),
])
def test_fwd_into_o_stage_guard(monkeypatch, kw, expect):
    got = []
    monkeypatch.setattr(forward_gluon, "_launch_into", lambda *a, **k2: got.append(k2.get("o_stage", False))
                        or (lambda: None))
    q, k, v = qkv(d=64, nq=384, nk=384) if kw.get("num_consumers") == 3 else qkv()
    forward_gluon.fwd_into(q, k, v, torch.empty_like(q), None, 0.125, **kw)
    assert got == [expect]


def test_o_stage_switch(monkeypatch):
    """Routed in session 42 (bench/gpu/s42_o_stage_ab.py): the table's ranges of min / max(Nq, Nk) by kind and
    head dim."""
    bf = torch.bfloat16
    monkeypatch.setattr(policy, "GLUON_FWD_O_STAGE", {"causal": {128: (2048, 4096)}, "window": {128: (4096, 1 << 30)}})
    assert policy.gluon_fwd_o_stage("causal", 128, 2048, 2048, bf)
    assert policy.gluon_fwd_o_stage("causal", 128, 4096, 2048, bf)              # min(Nq, Nk) 2048, max 4096: in
    assert policy.gluon_fwd_o_stage("causal", 128, 4096, 2048, torch.float16)
    assert not policy.gluon_fwd_o_stage("causal", 128, 8192, 2048, bf)
    assert not policy.gluon_fwd_o_stage("causal", 128, 1024, 1024, bf)
    assert not policy.gluon_fwd_o_stage("causal", 64, 2048, 2048, bf)
    assert not policy.gluon_fwd_o_stage("plain", 128, 2048, 2048, bf)
    assert policy.gluon_fwd_o_stage("window", 128, 16384, 16384, bf)


def test_o_stage_plain_d128_from_512():
    """D = 128 plain forwards take the O_STAGE persistent kernel from min(Nq, Nk) 512 (session 52,
    bench/gpu/s52_short_routes_grid.py: 1.08-1.10x fwd_ws.py at 512 under the grid's protocol, both dtypes) up to 4k;
    gluon_fwd admits 512 through that range although GLUON_FWD_MIN_N[128] is 1k."""
    bf = torch.bfloat16
    assert policy.GLUON_FWD_O_STAGE["plain"][128] == (512, 4096)
    for dt in (bf, torch.float16):
        assert policy.gluon_fwd_o_stage("plain", 128, 512, 512, dt)
        assert policy.gluon_fwd_o_stage("plain", 128, 512, 4096, dt)
    assert not policy.gluon_fwd_o_stage("plain", 128, 256, 512, bf)
    assert not policy.gluon_fwd_o_stage("plain", 128, 512, 8192, bf)
    # D = 64 plain 512 / 1k (session 52 calls 8-9), the 2-consumer O_STAGE kernel; from 2k the 3-consumer one
    assert policy.GLUON_FWD_O_STAGE["plain"][64] == (512, 1024)
    for dt in (bf, torch.float16):
        assert policy.gluon_fwd_o_stage("plain", 64, 512, 1024, dt)
    assert not policy.gluon_fwd_o_stage("plain", 64, 1024, 2048, bf)
    assert not policy.gluon_fwd_o_stage("plain", 64, 256, 512, bf)
    assert not policy.gluon_fwd_o_stage("plain", 256, 512, 512, bf)


def test_o_stage_switch_dtypes(monkeypatch):
    """D = 64 causal 4k takes the 2-consumer O_STAGE in bf16 (session 45, bench/gpu/s45a.sh) and fp16 (session 46,
    s46b.sh), 2k / 8k not; an entry restricted by GLUON_FWD_O_STAGE_DTYPES holds for the dtypes listed only, the
    others for both."""
    bf, hf = torch.bfloat16, torch.float16
    assert policy.GLUON_FWD_O_STAGE["causal"][64] == (4096, 4096)
    assert policy.GLUON_FWD_O_STAGE_DTYPES == {}
    for dt in (bf, hf):
        assert policy.gluon_fwd_o_stage("causal", 64, 4096, 4096, dt)
        assert not policy.gluon_fwd_o_stage("causal", 64, 8192, 8192, dt)
        assert not policy.gluon_fwd_o_stage("causal", 64, 2048, 2048, dt)
    monkeypatch.setattr(policy, "GLUON_FWD_O_STAGE_DTYPES", {("causal", 64): frozenset({bf})})
    assert policy.gluon_fwd_o_stage("causal", 64, 4096, 4096, bf)
    assert not policy.gluon_fwd_o_stage("causal", 64, 4096, 4096, hf)
    assert policy.gluon_fwd_o_stage("causal", 128, 4096, 4096, hf) and policy.gluon_fwd_o_stage("causal", 128, 4096,
                                                                                                 4096, bf)


@pytest.mark.parametrize("dtype, expect", [
    (torch.bfloat16, dict(o_stage=True, persistent=True, scheduled=True, num_consumers=2)),
    (torch.float16, dict(o_stage=True, persistent=True, scheduled=True, num_consumers=2)),
])
def test_route_d64_causal_4k_by_dtype(monkeypatch, dtype, expect):
    """The dense route at D = 64 causal 4k (the real tables): bf16 (session 45) and fp16 (session 46) run the
    2-consumer O_STAGE with the host's deal."""
    from flashtriton.launchers import forward

    monkeypatch.setattr(forward, "gluon_fwd", lambda *a: True)
    got = _routed_fwd_into_kwargs(monkeypatch, n=4096, d=64, dtype=dtype, causal=True)
    for name, want in expect.items():
        assert got.get(name, False if name != "num_consumers" else 2) == want, (name, got)


def _routed_fwd_into_kwargs(monkeypatch, n=512, d=128, dtype=torch.bfloat16, **call):
    """The keyword arguments launchers.forward's route hands to forward_gluon.fwd_into for one flash_attn_func call
    (B = 1, N = n, H = 2, Hk = 1, D = d; CPU: fwd_into replaced by a recorder, the routing switches patched by the
    caller)."""
    from flashtriton import flash_attn_func
    import flashtriton

    plans.clear()
    got = []

    def fake_fwd_into(q, k, v, out, lse, scale, **kw):
        got.append(kw)
        out.zero_()
        lse.zero_()
    monkeypatch.setattr(forward_gluon, "fwd_into", fake_fwd_into)
    q, k, v = rand_qkv(1, n, n, 2, 1, d, dtype, DEVICE)
    with flashtriton.use_backend("triton"):
        flash_attn_func(q, k, v, **call)
    plans.clear()
    assert len(got) == 1
    return got[0]


@pytest.mark.parametrize("causal, table, expect", [
    (True, {"causal": {128: (256, 1024)}}, dict(o_stage=True, persistent=True, scheduled=True, num_consumers=2)),
    (False, {"plain": {128: (256, 1024)}}, dict(o_stage=True, persistent=True, scheduled=False, num_consumers=2)),
    (True, {}, dict(o_stage=False, persistent=False, scheduled=False)),
])
def test_route_passes_o_stage(monkeypatch, causal, table, expect):
    """launchers.forward's dense route hands the switch to fwd_into as persistent + o_stage (+ scheduled for
    causal calls) with 2 consumers."""
    from flashtriton.launchers import forward

    monkeypatch.setattr(forward, "gluon_fwd", lambda *a: True)
    monkeypatch.setattr(policy, "GLUON_FWD_O_STAGE", table)
    got = _routed_fwd_into_kwargs(monkeypatch, causal=causal)
    for name, want in expect.items():
        assert got.get(name, False) == want, (name, got)


def test_window_route_prefers_o_stage(monkeypatch):
    from flashtriton.launchers import forward

    monkeypatch.setattr(forward, "gluon_fwd", lambda *a: False)
    monkeypatch.setattr(forward, "gluon_fwd_window", lambda *a: True)
    monkeypatch.setattr(policy, "GLUON_FWD_WINDOW_EARLY_Q", {128: 256})
    monkeypatch.setattr(policy, "GLUON_FWD_O_STAGE", {"window": {128: (256, 1 << 30)}})
    got = _routed_fwd_into_kwargs(monkeypatch, window_size=(256, 0))
    assert got.get("o_stage") is True and got.get("persistent") is True and not got.get("early_q")
    assert got.get("scheduled") is True             # the host's window deal (session 43)


# ---------------------------------------------------------------------------------------
# GPU (Hopper)
# ---------------------------------------------------------------------------------------
CASES = [dict(), dict(causal=True), dict(causal=True, scheduled=True), dict(window=(1024, 0), lean_mask=True),
         dict(window=(100, 37), lean_mask=True), dict(window=(256, 256))]


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("kw", CASES)
@pytest.mark.parametrize("d", [128, 64])
@pytest.mark.parametrize("b, nq, nk, h, hk", [
    (1, 2048, 2048, 4, 4),
    (2, 1024, 1536, 4, 2),      # Nq < Nk, GQA
    (1, 1536, 1024, 2, 1),      # Nq > Nk: causal / (100, 37) rows that see no key (O = 0, lse = +inf)
])
@pytest.mark.parametrize("num_programs", [None, 3])
def test_o_stage_matches_reference_gpu(kw, d, b, nq, nk, h, hk, num_programs):
    if "lean_mask" in kw and d != 128:
        kw = {x: y for x, y in kw.items() if x != "lean_mask"}
    q, k, v = rand_qkv(b, nq, nk, h, hk, d, torch.bfloat16, DEVICE)
    check(q, k, v, persistent=True, num_programs=num_programs, o_stage=True, **kw)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("kw", [dict(causal=True, scheduled=True), dict(window=(1024, 0), lean_mask=True)])
def test_o_stage_fp16_and_negative_scale_gpu(kw):
    """fp16 (the routed kinds), a negative scale, GQA, Nq != Nk."""
    q, k, v = rand_qkv(2, 1024, 2048, 8, 2, 128, torch.float16, DEVICE)
    check(q, k, v, scale=-0.07, persistent=True, num_programs=9, o_stage=True, **kw)
    check(q, k, v, persistent=True, o_stage=True, **kw)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("kw", CASES)
@pytest.mark.parametrize("d", [128, 64])
@pytest.mark.parametrize("b, nq, nk, h, hk", [(1, 4096, 4096, 4, 2), (4, 2048, 2048, 3, 3), (1, 1536, 1024, 2, 1)])
@pytest.mark.parametrize("num_programs", [None, 1])
def test_o_stage_bitwise_one_block_gpu(kw, d, b, nq, nk, h, hk, num_programs):
    """The per-row arithmetic is unchanged: bitwise the one-block kernel's; repeated launches from one prepare()
    (the barriers start fresh every launch; with num_programs 1 one CTA walks every block: q_free and the ring's
    phases wrap many times)."""
    if "lean_mask" in kw and d != 128:
        kw = {x: y for x, y in kw.items() if x != "lean_mask"}
    q, k, v = rand_qkv(b, nq, nk, h, hk, d, torch.bfloat16, DEVICE)
    scale = d ** -0.5
    one = {x: y for x, y in kw.items() if x != "scheduled"}
    ref_o, ref_lse = attention_fwd_gluon(q, k, v, scale, **one)
    launch = forward_gluon.prepare(q, k, v, scale, persistent=True, num_programs=num_programs, o_stage=True, **kw)
    o, lse = (t.clone() for t in launch())
    assert torch.isfinite(o).all() and not torch.isnan(lse).any(), "unwritten (NaN-poisoned) output"
    assert torch.equal(o, ref_o) and torch.equal(lse, ref_lse)
    o2, lse2 = launch()
    assert torch.equal(o, o2) and torch.equal(lse, lse2)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("d", [128, 64])
def test_o_stage_rows_without_keys_gpu(d):
    """Nq - Nk = 1024: causal, the first 1024 rows see no key (whole blocks of them)."""
    q, k, v = rand_qkv(1, 2048, 1024, 2, 2, d, torch.bfloat16, DEVICE)
    o, lse = check(q, k, v, causal=True, persistent=True, num_programs=5, o_stage=True, scheduled=True)
    assert (o[:, :1024] == 0).all() and torch.isposinf(lse[:, :, :1024]).all()


@pytest.mark.gpu
@hopper
def test_flash_attn_func_takes_o_stage_gpu(monkeypatch):
    """The route with the switch on (causal 2k, D = 128): the O_STAGE launch with the host's deal, bitwise the
    one-block kernel's result; then the same call captured in a CUDA graph with the deal not yet cached (the
    kernel's banded deal inside the capture), replayed on new inputs."""
    from flashtriton import flash_attn_func

    monkeypatch.setattr(policy, "GLUON_FWD_O_STAGE", {"causal": {128: (2048, 2048)}})
    monkeypatch.setitem(policy.GLUON_FWD_CAUSAL_MIN_N, 128, 2048)
    plans.clear()
    schedule._CACHE.clear()
    seen = spy(monkeypatch, forward_gluon, "_launch_into", lambda *a, **kw: (kw.get("o_stage"), kw.get("scheduled")))
    q, k, v = rand_qkv(2, 2048, 2048, 4, 4, 128, torch.bfloat16, DEVICE)
    out = flash_attn_func(q, k, v, causal=True)
    assert seen == [(True, True)]
    plans.clear()
    ref, _ = attention_fwd_gluon(q, k, v, 128 ** -0.5, causal=True)
    assert torch.equal(out, ref)
    schedule._CACHE.clear()
    q3, k3, v3 = rand_qkv(2, 2048, 2048, 4, 4, 128, torch.bfloat16, DEVICE)
    gout = graph_replay(lambda q2, k2, v2: flash_attn_func(q2, k2, v2, causal=True), [x.clone() for x in (q, k, v)],
                        (q3, k3, v3))
    plans.clear()
    ref3, _ = attention_fwd_gluon(q3, k3, v3, 128 ** -0.5, causal=True)
    assert torch.equal(gout, ref3)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("dtype, o_stage", [(torch.bfloat16, True), (torch.float16, True)])
def test_route_d64_causal_4k_gpu(monkeypatch, dtype, o_stage):
    """The route with the real tables: D = 64 causal 4k takes O_STAGE with the host's deal in bf16 (session 45) and
    fp16 (session 46); the routed output bitwise the 2-consumer one-block kernel's (the same per-row arithmetic),
    which check() holds to the float64 criterion."""
    from flashtriton import flash_attn_func

    plans.clear()
    seen = spy(monkeypatch, forward_gluon, "_launch_into", lambda *a, **kw: kw.get("o_stage"))
    q, k, v = rand_qkv(1, 4096, 4096, 4, 2, 64, dtype, DEVICE)
    out = flash_attn_func(q, k, v, causal=True)
    plans.clear()
    assert seen == [o_stage]
    ref, _ = check(q, k, v, causal=True, **({} if o_stage else dict(num_consumers=3)))
    assert torch.equal(out, ref)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("d", [128, 64])
@pytest.mark.parametrize("b, nq, nk, h, hk", [(8, 512, 512, 4, 4), (2, 512, 1024, 8, 2), (1, 640, 512, 2, 1)])
def test_route_plain_o_stage_short_gpu(monkeypatch, dtype, d, b, nq, nk, h, hk):
    """The route with the real tables (session 52): D = 128 plain calls from min(Nq, Nk) 512 (to 4k) and D = 64
    plain ones from 512 to 1k take the persistent 2-consumer O_STAGE kernel (they took fwd_ws.py before); its output
    and lse pass the float64 criterion (check), and the routed output is bitwise the one-block 2-consumer kernel's
    (the same per-row arithmetic); GQA and Nq != Nk both ways. (The D = 64 cases were added after the session's
    last GPU call: first GPU run in the next session.)"""
    from flashtriton import flash_attn_func

    plans.clear()
    # (fwd_into passes persistent to _launch_into positionally, its 12th argument: session 52's first GPU run of this
    # test read it from the keywords and failed on the route it meant to check)
    seen = spy(monkeypatch, forward_gluon, "_launch_into",
               lambda *a, **kw: (kw.get("o_stage"), a[11] if len(a) > 11 else kw.get("persistent")))
    q, k, v = rand_qkv(b, nq, nk, h, hk, d, dtype, DEVICE)
    out = flash_attn_func(q, k, v)
    plans.clear()
    assert seen == [(True, True)], seen
    ref, _ = check(q, k, v)
    assert torch.equal(out, ref)


@pytest.mark.parametrize("scale, neg", [(0.125, False), (0.0, True), (-0.1, True)])
@pytest.mark.parametrize("kw", [dict(causal=True), dict(window=(256, 0), lean_mask=True)])
def test_zero_scale_takes_the_neg_scale_step(monkeypatch, scale, neg, kw):
    """(FOLD, session 52) the masked steps fold a positive scale into the exponent, where a hidden score's -inf
    times a zero scale would be NaN: the launcher passes NEG_SCALE for scale <= 0 (the old masked step, the scale
    applied before the mask), False only for a positive one."""
    got = []
    monkeypatch.setattr(torch.cuda, "device", lambda device: contextlib.nullcontext())
    monkeypatch.setattr(plans, "launch", lambda kernel, grid, *a, **k2: got.append(k2))
    q, k, v = qkv()
    lse = torch.empty(1, 4, 512, dtype=torch.float32)
    forward_gluon._launch_into(q, k, v, torch.empty_like(q), lse, scale, BM, BN, 3, False, **kw)()
    assert len(got) == 1 and got[0]["NEG_SCALE"] is neg, got


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("kw", [dict(causal=True), dict(window=(256, 0), lean_mask=True),
                                dict(causal=True, persistent=True, o_stage=True, scheduled=True)])
@pytest.mark.parametrize("scale", [-0.09, 0.11])
def test_masked_steps_any_scale_gpu(kw, scale):
    """(FOLD, session 52) the masked steps at a negative and a positive scale against float64 (check): the folded
    form for a positive scale, the old one for a negative; rows past the diagonal and the window's left edge. A zero
    scale never reaches these kernels: check_inputs refuses it (below) and the policy routes it to the Triton kernel
    (session 53's first GPU run of this test had a 0.0 case, which met that ValueError)."""
    q, k, v = rand_qkv(1, 1024, 1024, 2, 2, 128, torch.bfloat16, DEVICE)
    check(q, k, v, scale=scale, **kw)


def test_gluon_forward_refuses_zero_scale():
    """A zero scale is refused before any launch, naming the argument (the policy sends it elsewhere)."""
    q, k, v = qkv()
    with pytest.raises(ValueError, match="softmax_scale"):
        forward_gluon.check_inputs(q, k, v, 0.0, BM, BN)
