"""kernels/fwd_gluon.py VARLEN (session 49): packed batches (flash_attn_varlen_func) on the Gluon forward, one
query block of one sequence a CTA, plain or causal, D = 128 / 64. Host side launchers/forward_gluon.fwd_varlen
(varlen_tables), route launchers.policy.gluon_fwd_varlen (GLUON_FWD_VARLEN_MIN_N).

CPU: the SCHED tables (layout, the causal dispatch order), the policy's contract. GPU (Hopper): through the public
API against float64 with the repo criterion, outputs poisoned first (conftest), ragged lengths (not multiples of the
tiles), empty sequences, Nq != Nk both ways (rows that see no key: O = 0, lse = +inf), GQA, bf16 / fp16; rows of the
next sequence never written (a check of the block after each sequence's end); the route taken (spy); bitwise
repeatable.
"""
import pytest
import torch

import flashtriton
from flashtriton.launchers import forward_gluon, policy
from flashtriton.launchers.common import AttnParams, Varlen

from conftest import DEVICE
from helpers import assert_close, check_attention, cu_seqlens, offline_compile, rand_varlen, reference_pair, spy
from test_fwd_gluon import hopper


# ---------------------------------------------------------------------------------------
# CPU
# ---------------------------------------------------------------------------------------
def test_varlen_tables_layout():
    """SCHED = [cumulative 128-row block counts | cu_seqlens_q | cu_seqlens_k] (+ causal: the slots' order,
    heaviest first, spare slots last): what _tile_coords_varlen reads at offsets 0, B + 1, 2B + 2, 3B + 3."""
    lens_q, lens_k = [300, 0, 128, 5], [300, 7, 200, 5]
    vl = Varlen(cu_seqlens(lens_q, "cpu"), cu_seqlens(lens_k, "cpu"), 300, 300)
    n_slots = -(-sum(lens_q) // 128) + 4
    plain = forward_gluon.varlen_tables(vl, 128, False, n_slots, order=False)
    assert plain.dtype == torch.int32
    assert plain.tolist() == [0, 3, 3, 4, 5] + [0, 300, 300, 428, 433] + [0, 300, 307, 507, 512]
    causal = forward_gluon.varlen_tables(vl, 128, True, n_slots)
    order = causal[15:].tolist()
    assert causal[:15].tolist() == plain.tolist() and sorted(order) == list(range(n_slots))
    # the heaviest slot first: sequence 0's last block (the kernel reverses blocks: slot 0 is block 2, 300 keys)
    assert order[0] == 0 and set(order[-(n_slots - 5):]) == set(range(5, n_slots))
    # plain: by the sequence's keys, longest first (sequence 2, 200 keys, before sequence 3's 5), stable
    by_keys = forward_gluon.varlen_tables(vl, 128, False, n_slots)[15:].tolist()
    assert by_keys[:5] == [0, 1, 2, 3, 4] and sorted(by_keys) == list(range(n_slots))


def test_policy_contract():
    """gluon_fwd_varlen: plain or canonical causal only, bf16 / fp16, a head dim of the table, max_seqlen_q at
    its entry or more; never under the interpreter (which this CPU run is, or no GPU at all)."""
    q = torch.empty(4096, 4, 128, dtype=torch.bfloat16)
    k = v = torch.empty(4096, 2, 128, dtype=torch.bfloat16)
    vl = Varlen(cu_seqlens([2048, 2048], "cpu"), cu_seqlens([2048, 2048], "cpu"), 2048, 2048)
    p = AttnParams(0.1)
    assert not policy.gluon_fwd_varlen(q, k, v, p, None, 128, vl)      # the interpreter, or a CPU tensor
    assert set(policy.GLUON_FWD_VARLEN_MIN_N) <= {"plain", "causal", "window"}
    assert all(set(t) <= {64, 128} for t in policy.GLUON_FWD_VARLEN_MIN_N.values())


_COMPILE = r"""
import json, re, sys
sys.path.insert(0, sys.argv[1])
import gluon_fwd_compile as g
out = []
# as routed (one block a CTA; causal with VARLEN_TAIL, plain with VARLEN_HALF), then the plain PERSISTENT option
# (EARLY_Q), then plain without VARLEN_HALF, then DROPOUT plain / causal
for causal, persistent, half, dropout, window in ((False, False, True, False, False), (True, False, False, False, False),
                                                  (False, True, False, False, False), (False, False, False, False, False),
                                                  (False, False, False, True, False), (True, False, False, True, False),
                                                  (False, False, False, False, True)):
    c = g.compile_fwd(128, "bf16", causal=causal, varlen=True, varlen_fast=True, varlen_order=True,
                      varlen_tail=causal, persistent=persistent, early_q=persistent, varlen_half=half,
                      dropout=dropout, window=window)
    r = g.report(c)
    text = g.sass(c)
    out.append(dict(loops=r["tile_loops"], spill=r["spill_bytes"], hgmma=r["hgmma"], hmma=r["hmma"],
                    local=len(re.findall(r"\b(?:LDL|STL)\b", text)), utmastg=r["utmastg"]))
print(json.dumps(out))
"""


def test_varlen_dropout_needs_the_rng():
    """fwd_varlen with dropout_p > 0 and no rng state: ValueError naming it, before any launch."""
    (q, k, v), varlen = rand_varlen([300, 200], [300, 200], 2, 1, 128, torch.bfloat16, "cpu")
    with pytest.raises(ValueError, match="rng"):
        forward_gluon.fwd_varlen(q, k, v, Varlen(*varlen), 0.1, dropout_p=0.2)


def test_varlen_compiles_offline():
    """sm_90a, no GPU: the VARLEN kernels as routed (one block a CTA, VARLEN_FAST, ordered; causal with VARLEN_TAIL,
    plain with VARLEN_HALF), the plain PERSISTENT option (EARLY_Q) and plain without VARLEN_HALF: HGMMA and no HMMA,
    four tile loops (a consumer's unmasked and masked; VARLEN_HALF's half-width step adds wgmmas, and its barrier
    wait's retry branch spans the masked loop, which the scan counts as a fifth) each under 800 SASS instructions a
    warp; one block: no spills, no local memory, the full blocks' O TMA stores (2 UTMASTG); PERSISTENT: O by
    register stores (no UTMASTG), at most 16 spill bytes (4 local accesses, once a CTA or a block, as the dense
    PERSISTENT kernel's; none in the tile loops)."""
    pytest.importorskip("triton.experimental.gluon")
    plain, causal, persistent, no_half, drop_plain, drop_causal, window = offline_compile(_COMPILE)
    # WINDOW (session 51): three loops a consumer (left edge, unmasked, right edge), no spills
    assert window["hgmma"] > 0 and window["hmma"] == 0 and len(window["loops"]) == 6, window
    assert all(n < 900 for n in window["loops"]) and window["spill"] == 0 and window["local"] == 0, window
    for r in (drop_plain, drop_causal):
        # DROPOUT (session 51): the keep hash in the loops; D = 128 plain spills 40 bytes (one local access in the
        # second consumer's loops), causal 8
        assert r["hgmma"] > 0 and r["hmma"] == 0 and len(r["loops"]) == 4, r
        assert all(n < 1200 for n in r["loops"]) and r["spill"] <= 64 and r["local"] <= 12, r
    for r in (plain, causal, persistent, no_half):
        assert r["hgmma"] > 0 and r["hmma"] == 0, r
        assert len(r["loops"]) in ((4, 5) if r is plain else (4,)) and all(n < 800 for n in r["loops"]), r
    assert plain["hgmma"] > no_half["hgmma"], (plain, no_half)       # the half-width S and P V wgmmas
    for r in (plain, causal, no_half):
        assert r["spill"] == 0 and r["local"] == 0 and r["utmastg"] == 2, r
    assert persistent["spill"] <= 16 and persistent["local"] <= 4 and persistent["utmastg"] == 0, persistent


# ---------------------------------------------------------------------------------------
# GPU
# ---------------------------------------------------------------------------------------
CASES = [
    # lens_q, lens_k, (H, Hk), D, causal
    ([1100, 300, 2049], [1100, 300, 2049], (4, 2), 128, False),
    ([1100, 300, 2049], [1100, 300, 2049], (4, 2), 128, True),
    ([1024, 0, 513, 17], [1024, 9, 513, 17], (4, 4), 128, True),        # an empty query sequence
    ([1030, 40], [0, 70], (2, 1), 128, False),                          # keys of sequence 0: none
    ([1030, 40], [700, 1500], (4, 1), 128, True),                       # Nq > Nk: rows with no key
    ([1500, 64], [3000, 64], (4, 2), 64, True),
    ([1500, 64], [3000, 64], (4, 2), 64, False),
]


@pytest.fixture
def gluon_varlen_on(monkeypatch):
    """Route every D = 64 / 128 packed call here (the table's lengths lowered to 1) and record the route."""
    monkeypatch.setattr(policy, "GLUON_FWD_VARLEN_MIN_N", {"plain": {128: 1, 64: 1}, "causal": {128: 1, 64: 1}})
    return spy(monkeypatch, forward_gluon, "fwd_varlen")


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("lens_q,lens_k,heads,d,causal", CASES)
def test_varlen_matches_reference_gpu(gluon_varlen_on, dtype, lens_q, lens_k, heads, d, causal):
    (q, k, v), varlen = rand_varlen(lens_q, lens_k, *heads, d, dtype, DEVICE)
    out, lse, _ = flashtriton.flash_attn_varlen_func(q, k, v, *varlen, causal=causal, return_attn_probs=True)
    assert len(gluon_varlen_on) == 1, "the call did not take the Gluon VARLEN kernel"
    truth, lowp = reference_pair(q, k, v, varlen=varlen[:2], softmax_scale=d ** -0.5,
                                 window_right=0 if causal else -1)
    assert not torch.isnan(out).any() and not torch.isnan(lse).any(), "unwritten (NaN-poisoned) output"
    assert_close("out", out, truth["out"], lowp["out"], 2, dtype)
    assert_close("lse", lse, truth["lse"], lowp["lse"], 2, dtype)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("causal", [False, True])
def test_varlen_writes_no_row_of_the_next_sequence_gpu(gluon_varlen_on, causal):
    """Each sequence's last block ends inside it: the kernel's masked stores leave the next sequence's rows alone.
    Checked by running the sequences one at a time into one output buffer's slices: equal to the packed call."""
    lens = [1100, 300, 1029]
    (q, k, v), varlen = rand_varlen(lens, lens, 4, 2, 128, torch.bfloat16, DEVICE)
    packed = flashtriton.flash_attn_varlen_func(q, k, v, *varlen, causal=causal)
    start = 0
    for n in lens:
        one = flashtriton.flash_attn_varlen_func(q[start:start + n], k[start:start + n], v[start:start + n],
                                                 cu_seqlens([n], DEVICE), cu_seqlens([n], DEVICE), n, n,
                                                 causal=causal)
        assert torch.equal(one, packed[start:start + n])
        start += n


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("fast,order", [(False, False), (True, False), (False, True)])
@pytest.mark.parametrize("causal", [False, True])
def test_varlen_variants_match_reference_gpu(gluon_varlen_on, monkeypatch, fast, order, causal):
    """forward_gluon.VARLEN_FAST / VARLEN_PLAIN_ORDER off (the defaults are on: the tests above), against float64."""
    monkeypatch.setattr(forward_gluon, "VARLEN_FAST", fast)
    monkeypatch.setattr(forward_gluon, "VARLEN_PLAIN_ORDER", order)
    (q, k, v), varlen = rand_varlen([1100, 0, 300, 2049], [1100, 5, 300, 2049], 4, 2, 128, torch.float16, DEVICE)
    out, lse, _ = flashtriton.flash_attn_varlen_func(q, k, v, *varlen, causal=causal, return_attn_probs=True)
    truth, lowp = reference_pair(q, k, v, varlen=varlen[:2], softmax_scale=128 ** -0.5,
                                 window_right=0 if causal else -1)
    assert_close("out", out, truth["out"], lowp["out"], 2, torch.float16)
    assert_close("lse", lse, truth["lse"], lowp["lse"], 2, torch.float16)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("persistent", [False, True])
@pytest.mark.parametrize("lens_q,lens_k,heads,d", [c[:4] for c in CASES if not c[4]])
def test_varlen_persistent_matches_reference_gpu(gluon_varlen_on, monkeypatch, persistent, lens_q, lens_k, heads, d):
    """forward_gluon.VARLEN_PERSISTENT (session 50; measured slower, not routed) on and off: the PERSISTENT
    kernel's VARLEN blocks (EARLY_Q, masked register stores of O) against float64, and bitwise the one-block
    kernel's output (the same arithmetic a block, O stored another way)."""
    (q, k, v), varlen = rand_varlen(lens_q, lens_k, *heads, d, torch.bfloat16, DEVICE)
    monkeypatch.setattr(forward_gluon, "VARLEN_PERSISTENT", frozenset({"plain"}) if persistent else frozenset())
    out, lse, _ = flashtriton.flash_attn_varlen_func(q, k, v, *varlen, return_attn_probs=True)
    truth, lowp = reference_pair(q, k, v, varlen=varlen[:2], softmax_scale=d ** -0.5)
    assert not torch.isnan(out).any() and not torch.isnan(lse).any(), "unwritten (NaN-poisoned) output"
    assert_close("out", out, truth["out"], lowp["out"], 2, torch.bfloat16)
    assert_close("lse", lse, truth["lse"], lowp["lse"], 2, torch.bfloat16)
    monkeypatch.setattr(forward_gluon, "VARLEN_PERSISTENT", frozenset() if persistent else frozenset({"plain"}))
    other, lse2, _ = flashtriton.flash_attn_varlen_func(q, k, v, *varlen, return_attn_probs=True)
    assert torch.equal(out, other) and torch.equal(lse, lse2)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("tail", [False, True])
@pytest.mark.parametrize("causal", [False, True])
def test_varlen_tail_matches_reference_gpu(gluon_varlen_on, monkeypatch, tail, causal):
    """forward_gluon.VARLEN_TAIL on and off for both kinds (session 50; the default: causal only): sequences whose
    last block's second half lies wholly past the end (300, 17, 2049: tails of 44, 17 and 1 rows) and one whose does
    not (1100: 76 rows), against float64; the rows of the next sequence untouched (each sequence's output is the
    sequence's own)."""
    monkeypatch.setattr(forward_gluon, "VARLEN_TAIL", frozenset({"plain", "causal"}) if tail else frozenset())
    monkeypatch.setattr(forward_gluon, "VARLEN_PERSISTENT", frozenset())      # (the one-block kernel's option)
    lens = [1100, 300, 17, 2049]
    (q, k, v), varlen = rand_varlen(lens, lens, 4, 2, 128, torch.bfloat16, DEVICE)
    out, lse, _ = flashtriton.flash_attn_varlen_func(q, k, v, *varlen, causal=causal, return_attn_probs=True)
    truth, lowp = reference_pair(q, k, v, varlen=varlen[:2], softmax_scale=128 ** -0.5,
                                 window_right=0 if causal else -1)
    assert not torch.isnan(out).any() and not torch.isnan(lse).any(), "unwritten (NaN-poisoned) output"
    assert_close("out", out, truth["out"], lowp["out"], 2, torch.bfloat16)
    assert_close("lse", lse, truth["lse"], lowp["lse"], 2, torch.bfloat16)


@pytest.mark.gpu
@hopper
def test_varlen_repeatable_gpu(gluon_varlen_on):
    (q, k, v), varlen = rand_varlen([1100, 300, 2049], [1100, 300, 2049], 8, 2, 128, torch.bfloat16, DEVICE)
    a = flashtriton.flash_attn_varlen_func(q, k, v, *varlen, causal=True)
    b = flashtriton.flash_attn_varlen_func(q, k, v, *varlen, causal=True)
    assert torch.equal(a, b) and len(gluon_varlen_on) == 2


@pytest.mark.gpu
@hopper
def test_varlen_route_by_default_gpu(monkeypatch):
    """At the table's length the default route takes the kernel; below it, not; nor with ALiBi or a window with a
    right edge; a window (left, 0) where the table lists windows (session 51)."""
    calls = spy(monkeypatch, forward_gluon, "fwd_varlen")
    n = max(policy.GLUON_FWD_VARLEN_MIN_N["plain"][128], policy.GLUON_FWD_VARLEN_MIN_N["causal"][128])
    (q, k, v), varlen = rand_varlen([n, 100], [n, 100], 4, 2, 128, torch.bfloat16, DEVICE)
    flashtriton.flash_attn_varlen_func(q, k, v, *varlen, causal=True)
    assert len(calls) == 1
    flashtriton.flash_attn_varlen_func(q, k, v, *varlen, window_size=(64, 0))
    window_routed = n >= policy.GLUON_FWD_VARLEN_MIN_N.get("window", {}).get(128, 1 << 30)
    assert len(calls) == 1 + int(window_routed)
    calls.clear()
    flashtriton.flash_attn_varlen_func(q, k, v, *varlen, window_size=(64, 64))
    flashtriton.flash_attn_varlen_func(q, k, v, *varlen, alibi_slopes=torch.rand(4, device=DEVICE))
    n = policy.GLUON_FWD_VARLEN_MIN_N["plain"][128]
    (q, k, v), varlen = rand_varlen([n - 1, 100], [n - 1, 100], 4, 2, 128, torch.bfloat16, DEVICE)
    flashtriton.flash_attn_varlen_func(q, k, v, *varlen)
    assert len(calls) == 0


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("causal", [False, True])
def test_varlen_plan_replay_gpu(gluon_varlen_on, monkeypatch, causal):
    """With launch plans on (FLASHTRITON_PLANS=1; the tests run with them off), the second call of a signature
    replays the first's launch with its own q, k, v and SCHED table: other lengths (same totals, same batch) give
    their own reference's result, bitwise the launcher's."""
    from flashtriton.launchers import plans
    monkeypatch.setenv("FLASHTRITON_PLANS", "1")
    plans.clear()
    (q, k, v), varlen = rand_varlen([1100, 300, 2049], [1100, 300, 2049], 4, 2, 128, torch.bfloat16, DEVICE)
    flashtriton.flash_attn_varlen_func(q, k, v, *varlen, causal=causal)
    before = plans.stats["replayed"]
    (q2, k2, v2), varlen2 = rand_varlen([2000, 1400, 49], [2000, 1400, 49], 4, 2, 128, torch.bfloat16, DEVICE)
    out = flashtriton.flash_attn_varlen_func(q2, k2, v2, *varlen2, causal=causal)
    assert plans.stats["replayed"] == before + 1, "the second call did not replay"
    monkeypatch.setenv("FLASHTRITON_PLANS", "0")
    again = flashtriton.flash_attn_varlen_func(q2, k2, v2, *varlen2, causal=causal)
    assert torch.equal(out, again)
    truth, lowp = reference_pair(q2, k2, v2, varlen=varlen2[:2], softmax_scale=128 ** -0.5,
                                 window_right=0 if causal else -1)
    assert_close("out", out, truth["out"], lowp["out"], 2, torch.bfloat16)


# keys per sequence: remainders mod 128 of 64 (the last tile half-width), 65 (not), 1 (half), 0 (whole tiles), a
# sequence of one key tile (100: the peel, never half-width), 192 (64: half); queries other lengths (Nq != Nk)
HALF_CASES = [
    ([300, 17, 129, 256, 100, 192], [448, 321, 129, 256, 100, 192], (4, 2), 128),
    ([448, 321, 129, 256, 100, 192], [448, 321, 129, 256, 100, 192], (4, 4), 128),
    ([1000, 70, 600], [1088, 65, 577], (4, 1), 64),
]


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("half", [False, True])
@pytest.mark.parametrize("lens_q,lens_k,heads,d", HALF_CASES)
def test_varlen_half_matches_reference_gpu(gluon_varlen_on, monkeypatch, half, lens_q, lens_k, heads, d):
    """forward_gluon.VARLEN_HALF on and off (session 51; the default: plain): last key tiles holding 1, 64, 65 and
    128 keys, a one-tile sequence, Nq != Nk, GQA, D = 128 / 64, against float64, outputs poisoned first."""
    monkeypatch.setattr(forward_gluon, "VARLEN_HALF", frozenset({"plain"}) if half else frozenset())
    (q, k, v), varlen = rand_varlen(lens_q, lens_k, *heads, d, torch.bfloat16, DEVICE)
    out, lse, _ = flashtriton.flash_attn_varlen_func(q, k, v, *varlen, return_attn_probs=True)
    assert len(gluon_varlen_on) == 1, "the call did not take the Gluon VARLEN kernel"
    truth, lowp = reference_pair(q, k, v, varlen=varlen[:2], softmax_scale=d ** -0.5)
    assert not torch.isnan(out).any() and not torch.isnan(lse).any(), "unwritten (NaN-poisoned) output"
    assert_close("out", out, truth["out"], lowp["out"], 2, torch.bfloat16)
    assert_close("lse", lse, truth["lse"], lowp["lse"], 2, torch.bfloat16)


@pytest.mark.gpu
@hopper
def test_varlen_half_plan_keyed_on_the_flag_gpu(gluon_varlen_on, monkeypatch):
    """With launch plans on, a call with VARLEN_HALF switched records its own plan (the A/B toggles it between
    calls of the same inputs) instead of replaying the other arm's."""
    from flashtriton.launchers import plans
    monkeypatch.setenv("FLASHTRITON_PLANS", "1")
    plans.clear()
    (q, k, v), varlen = rand_varlen([448, 321], [448, 321], 4, 2, 128, torch.bfloat16, DEVICE)
    monkeypatch.setattr(forward_gluon, "VARLEN_HALF", frozenset({"plain"}))
    flashtriton.flash_attn_varlen_func(q, k, v, *varlen)
    before = plans.stats["replayed"]
    monkeypatch.setattr(forward_gluon, "VARLEN_HALF", frozenset())
    flashtriton.flash_attn_varlen_func(q, k, v, *varlen)
    assert plans.stats["replayed"] == before, "the flag's other arm replayed the first plan"


DROPOUT_CASES = [
    # lens_q, lens_k, (H, Hk), D, causal
    ([1100, 300, 2049], [1100, 300, 2049], (4, 2), 128, False),
    ([1100, 300, 2049], [1100, 300, 2049], (4, 2), 128, True),
    ([600, 1, 113], [1500, 17, 1023], (4, 2), 128, False),              # Nq < Nk
    ([1030, 0, 40], [700, 9, 1500], (4, 1), 128, True),                 # Nq > Nk, an empty query sequence
]


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("lens_q,lens_k,heads,d,causal", DROPOUT_CASES)
def test_varlen_dropout_matches_reference_gpu(gluon_varlen_on, monkeypatch, lens_q, lens_k, heads, d, causal):
    """DROPOUT (session 51): out, lse (and the gradients, whichever backward runs) against float64 under the call's
    own keep mask (the backend's dropout_mask for the seed, checked against S_dmask's signs), through the Gluon
    VARLEN forward with dropout."""
    monkeypatch.setattr(policy, "GLUON_FWD_VARLEN_DROPOUT", frozenset({64, 128}))
    (q, k, v), varlen = rand_varlen(lens_q, lens_k, *heads, d, torch.bfloat16, DEVICE)
    res = check_attention("triton", q, k, v, varlen=varlen, dropout_p=0.17, seed=sum(lens_k), causal=causal)
    assert not res["keep"].all()
    assert len(gluon_varlen_on) == 1, "the forward did not take the Gluon VARLEN kernel"


@pytest.mark.gpu
@hopper
def test_varlen_dropout_plan_replay_gpu(gluon_varlen_on, monkeypatch):
    """With launch plans on, the second dropout forward of a signature replays the first's launch with its own rng
    state: its output is the launcher's without plans for that seed, another seed's differs."""
    from flashtriton.launchers import plans
    monkeypatch.setattr(policy, "GLUON_FWD_VARLEN_DROPOUT", frozenset({128}))
    monkeypatch.setenv("FLASHTRITON_PLANS", "1")
    plans.clear()
    (q, k, v), varlen = rand_varlen([1100, 300, 2049], [1100, 300, 2049], 4, 2, 128, torch.bfloat16, DEVICE)

    def run(seed):
        torch.manual_seed(seed)
        return flashtriton.flash_attn_varlen_func(q, k, v, *varlen, dropout_p=0.2)

    run(1)
    before = plans.stats["replayed"]
    out = run(2)
    assert plans.stats["replayed"] == before + 1, "the second call did not replay"
    monkeypatch.setenv("FLASHTRITON_PLANS", "0")
    assert torch.equal(out, run(2)) and not torch.equal(out, run(3))


WINDOW_CASES = [
    # lens_q, lens_k, (H, Hk), D, window (left, 0)
    ([1100, 300, 2049], [1100, 300, 2049], (4, 2), 128, (256, 0)),
    ([1100, 300, 2049], [1100, 300, 2049], (4, 2), 128, (1000, 0)),
    ([1030, 0, 40, 17], [700, 9, 1500, 17], (4, 1), 128, (64, 0)),     # Nq > Nk (rows with no key), Nq < Nk, empty
    ([600, 129, 113], [1500, 129, 1023], (4, 4), 128, (127, 0)),
    ([1500, 64], [3000, 64], (4, 2), 64, (300, 0)),
]


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("lens_q,lens_k,heads,d,window", WINDOW_CASES)
def test_varlen_window_matches_reference_gpu(gluon_varlen_on, monkeypatch, dtype, lens_q, lens_k, heads, d, window):
    """WINDOW (session 51): a sliding window (left, 0) per packed sequence on the VARLEN kernel, against float64,
    outputs poisoned first: the band's tiles of each sequence (t_lo .. t_hi), its left edge masked, rows that see no
    key O = 0 / lse = +inf."""
    monkeypatch.setattr(policy, "GLUON_FWD_VARLEN_MIN_N", {kind: {128: 1, 64: 1} for kind in ("plain", "causal",
                                                                                               "window")})
    (q, k, v), varlen = rand_varlen(lens_q, lens_k, *heads, d, dtype, DEVICE)
    out, lse, _ = flashtriton.flash_attn_varlen_func(q, k, v, *varlen, window_size=window, return_attn_probs=True)
    assert len(gluon_varlen_on) == 1, "the call did not take the Gluon VARLEN kernel"
    truth, lowp = reference_pair(q, k, v, varlen=varlen[:2], softmax_scale=d ** -0.5, window_left=window[0],
                                 window_right=0)
    assert not torch.isnan(out).any() and not torch.isnan(lse).any(), "unwritten (NaN-poisoned) output"
    assert_close("out", out, truth["out"], lowp["out"], 2, dtype)
    assert_close("lse", lse, truth["lse"], lowp["lse"], 2, dtype)


def test_varlen_window_rule():
    """fwd_varlen's window: (left >= 0, 0) only, not with causal or dropout (ValueError before any launch)."""
    (q, k, v), varlen = rand_varlen([300, 200], [300, 200], 2, 1, 128, torch.bfloat16, "cpu")
    for kw in (dict(window=(64, 8)), dict(window=(-1, 0)), dict(window=(64, 0), causal=True)):
        with pytest.raises(ValueError, match="window"):
            forward_gluon.fwd_varlen(q, k, v, Varlen(*varlen), 0.1, **kw)
