"""kernels/fwd_gluon.py at head dim 256 (a session-31 helper; routed in session 32): the plain and
CAUSAL forwards, one block a CTA and PERSISTENT, at DEFAULT_CONFIG[256] = (BLOCK_M 128, BLOCK_N 64,
2 stages) with SPLIT_EMPTY (K's and V's ring stages released apart; the launcher's default at
D = 256, fwd_gluon.SPLIT_EMPTY_DEFAULT). Host side launchers/forward_gluon.py (check_head_dim,
check_split_empty); routed by policy.GLUON_FWD_MIN_N[256] and GLUON_FWD_CAUSAL_MIN_N[256]
(both from 512 since session 33) after bench/gpu/s32_gluon_fwd_d256_ab.py.

CPU: the routed tables, each table's 256 key routing its own kind only (plain and causal), never
dropout or windows at D = 256; prepare's validation (what D = 256 cannot take, the 64-key tile
rule, split_empty's own checks) before any launch; the launch arguments (tile, SPLIT_EMPTY,
descriptor boxes) of fwd_into / prepare with the kernel launch replaced by a recorder; an
offline sm_90a compile (bench/gluon_fwd_compile.py in a subprocess): 0 spills and no local
memory, HGMMA and no HMMA, the P V wgmma overlapped (DEPBAR.LE 1), shared memory under 227 KB.
GPU (Hopper): float64 reference with the repo criterion (error <= 2x PyTorch's same-dtype
error; outputs NaN-poisoned before the call by tests/conftest.py, fresh random inputs), Nq != Nk
both ways (causal rows that see no key: O = 0, lse = +inf), GQA, Nk a multiple of 64 but not of
128, negative scale, PINGPONG; PERSISTENT bitwise the one-block kernel (few CTAs: every CTA
loops), SPLIT_EMPTY bitwise without it; the library's route with the switch added.
"""
import contextlib
import json
import os
import subprocess
import sys

import pytest
import torch

from flashtriton.kernels import fwd_gluon
from flashtriton.launchers import common, forward_gluon, plans, policy
from flashtriton.launchers.forward_gluon import attention_fwd_gluon

from conftest import DEVICE
from helpers import check_attention, rand_qkv, spy
from test_fwd_gluon import IS_HOPPER, check, hopper

D = 256
BM, BN, STAGES = fwd_gluon.DEFAULT_CONFIG[D]


def qkv(b=1, nq=128, nk=256, h=4, hk=2, d=D, dtype=torch.bfloat16, device=DEVICE):
    return rand_qkv(b, nq, nk, h, hk, d, dtype, device)


# ---------------------------------------------------------------------------------------
# CPU: the tile, the route switch
# ---------------------------------------------------------------------------------------
def test_d256_tile():
    """BLOCK_M 128, BLOCK_N 64, 2 stages: Q 64 KB + 2 x (K + V) 2 x 32 KB = 192 KB of shared memory
    (3 stages would be 256 KB; BLOCK_N 128 with 2 stages 320 KB); SPLIT_EMPTY on by default at
    D = 256 only; D = 256 is plain / causal only."""
    assert (BM, BN, STAGES) == (128, 64, 2)
    assert 2 * D * (BM + 2 * STAGES * BN) == 192 * 1024
    assert 2 * D * (BM + 2 * (STAGES + 1) * BN) > 227 * 1024
    assert fwd_gluon.SPLIT_EMPTY_DEFAULT == {256}
    assert fwd_gluon.PLAIN_CAUSAL_ONLY == {256}
    assert D not in fwd_gluon.CONSUMERS3_CONFIG


def _rule(monkeypatch):
    monkeypatch.setattr(policy, "interpreting", lambda: False)
    monkeypatch.setattr(policy, "_warp_spec_switch", lambda q: True)

    def rule(q, k, v, params, fn=policy.gluon_fwd):
        return fn(q, k, v, params, None, False, D, q.shape[1], k.shape[1])
    return rule


def test_d256_routed_tables(monkeypatch):
    """Session 32 routed D = 256 by bench/gpu/s32_gluon_fwd_d256_ab.py's rule (plain from 1k,
    causal from 2k), session 33 both from 512 (s33/callC); shorter calls keep fwd_ws.py / fwd.py."""
    assert policy.GLUON_FWD_MIN_N[256] == 512 and policy.GLUON_FWD_CAUSAL_MIN_N[256] == 512
    rule = _rule(monkeypatch)
    plain, causal = common.AttnParams(0.1), common.AttnParams(0.1, window_right=0)
    for params in (plain, causal):
        assert rule(*qkv(nq=512, nk=512, device="cpu"), params)
        assert rule(*qkv(nq=1024, nk=1024, device="cpu"), params)
        assert not rule(*qkv(nq=384, nk=384, device="cpu"), params)
        assert not rule(*qkv(nq=512, nk=448, device="cpu"), params)      # min(Nq, Nk) under 512


@pytest.mark.parametrize("causal", [False, True])
def test_d256_route_switch(monkeypatch, causal):
    """Adding 256: N to GLUON_FWD_MIN_N (plain) or GLUON_FWD_CAUSAL_MIN_N (causal) routes D = 256
    from N on, Nq a multiple of 128 and Nk of 64 (the tile); the other table's key does not."""
    rule = _rule(monkeypatch)
    params = common.AttnParams(0.1, window_right=0) if causal else common.AttnParams(0.1)
    mine, other = ((policy.GLUON_FWD_CAUSAL_MIN_N, policy.GLUON_FWD_MIN_N) if causal
                   else (policy.GLUON_FWD_MIN_N, policy.GLUON_FWD_CAUSAL_MIN_N))
    monkeypatch.delitem(mine, 256, raising=False)
    monkeypatch.setitem(other, 256, 1024)
    assert not rule(*qkv(nq=2048, nk=2048, device="cpu"), params)
    monkeypatch.setitem(mine, 256, 2048)
    assert rule(*qkv(nq=2048, nk=2048, device="cpu"), params)
    assert rule(*qkv(nq=2048, nk=2048 + 64, device="cpu"), params)         # Nk: a multiple of BLOCK_N = 64
    assert not rule(*qkv(nq=2048 + 64, nk=2048, device="cpu"), params)     # Nq: not of BLOCK_M = 128
    assert not rule(*qkv(nq=1024, nk=2048, device="cpu"), params)          # min(Nq, Nk) under the entry
    assert not rule(*qkv(nq=2048, nk=2048, device="cpu"), common.AttnParams(0.1, dropout_p=0.1))


def test_d256_never_routed_with_dropout_or_window(monkeypatch):
    """The D = 256 kernel has no DROPOUT / WINDOW variant: a 256 key in those tables routes nothing."""
    rule = _rule(monkeypatch)
    monkeypatch.setitem(policy.GLUON_FWD_WINDOW_MIN_N, 256, 1024)
    monkeypatch.setattr(policy, "GLUON_FWD_DROPOUT_MIN_N", {"plain": {256: 1024}, "causal": {256: 1024}})
    q, k, v = qkv(nq=2048, nk=2048, device="cpu")
    assert not rule(q, k, v, common.AttnParams(0.1, window_left=256, window_right=0), policy.gluon_fwd_window)
    assert not rule(q, k, v, common.AttnParams(0.1, dropout_p=0.1), policy.gluon_fwd_dropout)
    # (the same tables at D = 128 do route: the exclusion is the head dim's)
    n = policy.GLUON_FWD_WINDOW_MIN_N[128]
    q, k, v = rand_qkv(1, n, n, 2, 1, 128, torch.bfloat16, "cpu")
    assert policy.gluon_fwd_window(q, k, v, common.AttnParams(0.1, window_left=256, window_right=0), None, False,
                                   128, n, n)


# ---------------------------------------------------------------------------------------
# CPU: validation (no launch)
# ---------------------------------------------------------------------------------------
_NOT_AT_256 = r": not supported at head dim 256 \(the plain or causal forward"


@pytest.mark.parametrize("kw, msg", [
    (dict(window=(128, 0)), "^window" + _NOT_AT_256), (dict(window=(-1, 64)), "^window" + _NOT_AT_256),
    (dict(causal=True, window=(64, 0)), "^window" + _NOT_AT_256),
    (dict(dropout_p=0.1, rng=torch.zeros(2, dtype=torch.int64)), "^dropout_p" + _NOT_AT_256),
    (dict(causal=True, persistent=True, scheduled=True), "^scheduled" + _NOT_AT_256),
    (dict(persistent=True, early_q=True), "^early_q" + _NOT_AT_256),
    (dict(window=(128, 0), lean_mask=True), r"^lean_mask=True: the 2-consumer sliding-window forward at head dim 128"),
    (dict(persistent=True, num_consumers=3), r"^num_consumers=3: head dim 256 not supported"),
])
def test_d256_rejects_what_it_cannot_take(kw, msg):
    with pytest.raises(ValueError, match=msg):
        attention_fwd_gluon(*qkv(), 0.1, **kw)


@pytest.mark.parametrize("nq, nk, what", [(192, 256, "q: sequence length 192 not a positive multiple of BLOCK_M = 128"),
                                          (128, 96, "k: sequence length 96 not a positive multiple of BLOCK_N = 64"),
                                          (128, 0, "k: sequence length 0")])
def test_d256_rejects_sequence_lengths(nq, nk, what):
    with pytest.raises(ValueError, match=rf"^{what}"):
        attention_fwd_gluon(*qkv(nq=nq, nk=nk), 0.1)


@pytest.mark.parametrize("split_empty, msg", [("yes", r"^split_empty: expected None or a bool"),
                                              (1, r"^split_empty: expected None or a bool")])
def test_rejects_split_empty_type(split_empty, msg):
    with pytest.raises(ValueError, match=msg):
        attention_fwd_gluon(*qkv(), 0.1, split_empty=split_empty)


def test_rejects_split_empty_with_three_consumers():
    with pytest.raises(ValueError, match=r"^split_empty=True: the 2-consumer kernel only"):
        attention_fwd_gluon(*qkv(d=64, nq=192), 0.1, persistent=True, num_consumers=3, split_empty=True)


@pytest.mark.skipif(IS_HOPPER, reason="a Hopper GPU launches instead")
@pytest.mark.parametrize("kw", [dict(), dict(causal=True), dict(persistent=True), dict(causal=True, persistent=True),
                                dict(pingpong=True), dict(split_empty=False), dict(causal=True, window=(-1, 0)),
                                dict(window=(-1, -1)), dict(window=(1000, -1))])
def test_d256_valid_call_reaches_the_device_check(kw):
    """D = 256 plain / causal calls (Nk = 320: a multiple of 64, not of 128) pass the validation,
    windows that are the plain or the causal mask (window_args: edges past every key) too."""
    with pytest.raises(ValueError, match=r"needs a CUDA \(Hopper\) device|needs compute capability 9"):
        attention_fwd_gluon(*qkv(nq=256, nk=320), 0.1, **kw)


# ---------------------------------------------------------------------------------------
# CPU: launch arguments (the kernel launch replaced by a recorder)
# ---------------------------------------------------------------------------------------
def _recorded(monkeypatch, d=D, nq=256, nk=320, **kw):
    got = []
    monkeypatch.setattr(torch.cuda, "device", lambda device: contextlib.nullcontext())
    monkeypatch.setattr(forward_gluon.plans, "launch", lambda kernel, grid, *a, **k: got.append((grid, a, k)))
    monkeypatch.setattr(torch.cuda, "get_device_properties",
                        lambda dev: type("P", (), dict(multi_processor_count=132, L2_cache_size=50 << 20))())
    monkeypatch.setattr(forward_gluon, "causal_band", lambda *a: 1)
    b, h, hk = 2, 4, 2
    q, k, v = rand_qkv(b, nq, nk, h, hk, d, torch.bfloat16, "cpu")
    o = torch.empty_like(q)
    lse = torch.empty(b, h, nq, dtype=torch.float32)
    forward_gluon.fwd_into(q, k, v, o, lse, 0.0625, **kw)
    assert len(got) == 1
    return got[0]


@pytest.mark.parametrize("causal, persistent", [(False, False), (False, True), (True, False), (True, True)])
def test_d256_launch_arguments(monkeypatch, causal, persistent):
    grid, args, kw = _recorded(monkeypatch, causal=causal, persistent=persistent)
    assert (kw["HEAD_DIM"], kw["BLOCK_M"], kw["BLOCK_N"], kw["NUM_STAGES"]) == (256, 128, 64, 2)
    assert kw["SPLIT_EMPTY"] is True and "NUM_CONSUMERS" not in kw and "EARLY_Q" not in kw
    assert kw["CAUSAL"] == causal and kw["PERSISTENT"] == persistent
    assert not (kw["WINDOW"] or kw["DROPOUT"] or kw["SCHEDULED"] or kw["PINGPONG"])
    q_desc, k_desc, v_desc, o_desc = args[:4]
    assert list(q_desc.block_shape) == [64, 256] and list(o_desc.block_shape) == [64, 256]
    assert list(k_desc.block_shape) == [64, 256] and list(v_desc.block_shape) == [64, 256]
    assert grid == ((16,) if persistent else (2, 2 * 4))             # 2 query blocks x B * H = 8: 16 tiles


def test_d256_launch_split_empty_off_and_other_head_dims_unchanged(monkeypatch):
    """split_empty=False leaves SPLIT_EMPTY out of the launch (the kernel's default False); D = 128
    launches as before (no SPLIT_EMPTY key: its compiled variants unchanged)."""
    _, _, kw = _recorded(monkeypatch, split_empty=False)
    assert "SPLIT_EMPTY" not in kw
    _, _, kw = _recorded(monkeypatch, d=128, nq=256, nk=256, persistent=True)
    assert "SPLIT_EMPTY" not in kw and kw["BLOCK_N"] == 128 and kw["NUM_STAGES"] == 3
    _, _, kw = _recorded(monkeypatch, d=128, nq=256, nk=256, split_empty=True)
    assert kw["SPLIT_EMPTY"] is True


def test_route_hands_d256_to_fwd_into(monkeypatch):
    """launchers.forward with a 256 key added: fwd_into gets the D = 256 call (plain: persistent
    as GLUON_FWD_PERSISTENT says, 2 consumers)."""
    from flashtriton import flash_attn_func
    import flashtriton
    from flashtriton.launchers import forward

    monkeypatch.setattr(forward, "gluon_fwd", lambda *a: True)
    plans.clear()
    got = []

    def fake_fwd_into(q, k, v, out, lse, scale, causal=False, persistent=False, num_consumers=2, **kw):
        got.append((q.shape[-1], causal, persistent, num_consumers))
        out.zero_()
        lse.zero_()
    monkeypatch.setattr(forward_gluon, "fwd_into", fake_fwd_into)
    q, k, v = qkv(nq=256, nk=256)
    with flashtriton.use_backend("triton"):
        flash_attn_func(q, k, v)
    plans.clear()
    assert got == [(256, False, policy.GLUON_FWD_PERSISTENT["plain"], 2)], got


# ---------------------------------------------------------------------------------------
# CPU: offline sm_90a compile
# ---------------------------------------------------------------------------------------
_COMPILE = r"""
import json, re, sys
sys.path.insert(0, sys.argv[1])
import gluon_fwd_compile as g
out = {}
for name, kw in (("plain", dict()), ("persistent", dict(persistent=True)), ("causal", dict(causal=True)),
                 ("causal_persistent", dict(causal=True, persistent=True))):
    c = g.compile_fwd(256, "bf16", split_empty=True, **kw)
    r = g.report(c)
    text = g.sass(c)
    out[name] = dict(loops=r["tile_loops"], spill=r["spill_bytes"], smem=r["smem"], hgmma=r["hgmma"],
                     hmma=r["hmma"], depbar1=r["depbar1"], warps=r["warps"],
                     local=len(re.findall(r"\b(?:LDL|STL)\b", text)))
print(json.dumps(out))
"""


def test_d256_compiles_offline():
    """sm_90a, no GPU: 0 spills and no local memory anywhere (so none in the tile loops), HGMMA
    (40 a consumer plain: the peel's S 16, a tile's S 16 + P V 4, the last P V 4; causal's
    masked loop 40 more) and no HMMA, the P V wgmma left in flight under the softmax in every
    loop (DEPBAR.LE 1), 12 warps, shared memory 192 KB + barriers; tile loops 2 a kernel
    (4 causal: unmasked and masked), each under 600 SASS instructions a warp (415 / 413 plain)."""
    pytest.importorskip("triton.experimental.gluon")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, TRITON_INTERPRET="0", PYTHONPATH=os.path.join(root, "src"))
    res = subprocess.run([sys.executable, "-c", _COMPILE, os.path.join(root, "bench")], env=env,
                         capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stderr[-2000:]
    r = json.loads(res.stdout.strip().splitlines()[-1])
    for name, x in r.items():
        causal = name.startswith("causal")
        assert x["spill"] == 0 and x["local"] == 0, (name, x)
        assert x["hgmma"] == (120 if causal else 80) and x["hmma"] == 0, (name, x)
        assert x["depbar1"] == (4 if causal else 2), (name, x)
        assert x["warps"] == 12, (name, x)
        assert 192 * 1024 < x["smem"] <= 192 * 1024 + 1024, (name, x)
        assert len(x["loops"]) == (4 if causal else 2) and max(x["loops"]) < 600, (name, x)


# ---------------------------------------------------------------------------------------
# GPU (Hopper): numerics
# ---------------------------------------------------------------------------------------
_SHAPES = [
    (1, 128, 128, 2, 2),        # one block, two tiles
    (2, 1024, 1024, 4, 2),      # GQA
    (1, 256, 640, 4, 1),        # Nq < Nk, Nk = 10 x 64
    (2, 640, 320, 4, 4),        # Nq > Nk, Nk a multiple of 64 only (causal: rows without keys)
    (1, 2048, 2048, 2, 2),
]


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("b, nq, nk, h, hk", _SHAPES)
def test_d256_matches_reference_gpu(dtype, causal, b, nq, nk, h, hk):
    check(*rand_qkv(b, nq, nk, h, hk, D, dtype, "cuda"), causal=causal)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("b, nq, nk, h, hk", [(2, 1024, 1024, 4, 2), (1, 384, 704, 4, 1), (3, 768, 256, 2, 2)])
@pytest.mark.parametrize("num_programs", [None, 5, 1])
def test_d256_persistent_bitwise_gpu(causal, b, nq, nk, h, hk, num_programs):
    """PERSISTENT (every CTA looping when num_programs is small: the ring's and q_free's phases
    wrap many times) gives the one-block kernel's outputs bitwise, and those pass the reference."""
    q, k, v = rand_qkv(b, nq, nk, h, hk, D, torch.bfloat16, "cuda")
    o1, lse1 = check(q, k, v, causal=causal)
    o2, lse2 = attention_fwd_gluon(q, k, v, D ** -0.5, causal=causal, persistent=True, num_programs=num_programs)
    assert torch.equal(o1, o2) and torch.equal(lse1, lse2)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("persistent", [False, True])
def test_d256_split_empty_bitwise_gpu(causal, persistent):
    """SPLIT_EMPTY changes only when the ring's stages are released: bitwise the same outputs."""
    q, k, v = rand_qkv(2, 1024, 1536, 4, 2, D, torch.bfloat16, "cuda")
    kw = dict(causal=causal, persistent=persistent, **(dict(num_programs=3) if persistent else {}))
    o1, lse1 = attention_fwd_gluon(q, k, v, 0.07, split_empty=True, **kw)
    o2, lse2 = attention_fwd_gluon(q, k, v, 0.07, split_empty=False, **kw)
    assert torch.isfinite(o1).all() and torch.equal(o1, o2) and torch.equal(lse1, lse2)


@pytest.mark.gpu
@hopper
def test_d256_negative_scale_pingpong_and_repeat_gpu():
    q, k, v = rand_qkv(2, 512, 768, 4, 2, D, torch.bfloat16, "cuda")
    check(q, k, v, scale=-0.05)
    check(q, k, v, scale=0.3, causal=True)
    o1, lse1 = check(q, k, v, pingpong=True)
    o2, lse2 = attention_fwd_gluon(q, k, v, D ** -0.5)
    assert torch.equal(o1, o2) and torch.equal(lse1, lse2)           # the same arithmetic, another issue order


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("causal", [False, True])
def test_flash_attn_func_takes_gluon_d256_gpu(monkeypatch, causal):
    """flash_attn_func at D = 256 with the 256 key added runs fwd_into (plain: persistent; causal:
    one block a CTA, GLUON_FWD_PERSISTENT), and its output, lse and the backward built on that
    lse pass the reference criterion."""
    monkeypatch.setitem(policy.GLUON_FWD_CAUSAL_MIN_N if causal else policy.GLUON_FWD_MIN_N, 256, 1024)
    plans.clear()
    called = spy(monkeypatch, forward_gluon, "fwd_into",
                 record=lambda *a, **kw: (a[0].shape[-1], kw.get("causal"), kw.get("persistent")))
    check_attention("triton", *rand_qkv(1, 1024, 1024, 4, 2, D, torch.bfloat16, "cuda"), causal=causal,
                    check_probs=False)
    plans.clear()
    assert called == [(256, causal, policy.GLUON_FWD_PERSISTENT["causal" if causal else "plain"])], called
