"""Dropout: counter-based hashes in the kernel, seeded from torch's generator, never stored.

The keep mask of a call is reproduced by the backend's dropout_mask() from the same
rng state (the one the API draws after torch.manual_seed); outputs and gradients must
equal the float64 reference under exactly that mask, and S_dmask's sign must agree.
"""
import math

import pytest
import torch

import flashtriton
from flashtriton import backends, flash_attn_func
from flashtriton.launchers.prefill import AttnParams, Varlen

from conftest import DEVICE, kernel_backends
from helpers import check_attention, dropout_rng, rand_qkv, rand_varlen

BACKENDS = kernel_backends() + ["reference"]


def _keep_mask(backend, q, k, p, seed, varlen=None, causal=False):
    params = AttnParams(1 / math.sqrt(q.shape[-1]), -1, 0 if causal else -1, 0.0, p)
    return backends.get(backend).dropout_mask(q, k, params, dropout_rng(seed, q.device),
                                              None if varlen is None else Varlen(*varlen))


def _bound(p, n, sigmas=6.0):
    return sigmas * math.sqrt(p * (1 - p) / n)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("p", [0.1, 0.5, 0.85])
def test_keep_fraction(backend, p):
    """The kept fraction is 1 - p within 6 sigma: overall, per (batch, head) slice, per
    query row block; the masks of different heads, batches and rows are independent
    (pairs kept together with probability (1 - p)^2)."""
    q, k, _ = rand_qkv(2, 64, 96, 4, 2, 16, torch.float16, DEVICE)
    keep = _keep_mask(backend, q, k, p, seed=11).float()
    assert keep.shape == (2, 4, 64, 96)
    n = keep.numel()
    assert abs(keep.mean().item() - (1 - p)) <= _bound(p, n)
    per_slice = keep.mean(dim=(2, 3))
    assert (per_slice - (1 - p)).abs().max().item() <= _bound(p, 64 * 96)
    per_rows = keep.view(2, 4, 4, 16, 96).mean(dim=(3, 4))
    assert (per_rows - (1 - p)).abs().max().item() <= _bound(p, 16 * 96, 7.0)
    both = (1 - p) ** 2
    for a, b in [((0, 0), (0, 1)), ((0, 0), (1, 0)), ((1, 3), (0, 2))]:
        joint = (keep[a] * keep[b]).mean().item()
        assert abs(joint - both) <= _bound(both, 64 * 96), (a, b)
    rows = keep[0, 0, :-1] * keep[0, 0, 1:]  # neighbouring rows of one head
    assert abs(rows.mean().item() - both) <= _bound(both, rows.numel())


@pytest.mark.parametrize("backend", BACKENDS)
def test_keep_fraction_varlen(backend):
    p = 0.3
    (q, k, _), varlen = rand_varlen([50, 1, 64], [64, 40, 7], 4, 2, 16, torch.float16, DEVICE)
    keep = _keep_mask(backend, q, k, p, seed=5, varlen=varlen)
    assert keep.shape == (3, 4, 64, 64)
    valid = torch.zeros_like(keep)
    for i, (nq, nk) in enumerate(zip([50, 1, 64], [64, 40, 7])):
        valid[i, :, :nq, :nk] = True
    kept = keep[valid].float()
    assert abs(kept.mean().item() - (1 - p)) <= _bound(p, kept.numel())


@pytest.mark.parametrize("backend", BACKENDS)
def test_fraction_kept_in_the_forward_pass(backend):
    """S_dmask of an actual call: negative where dropped, so the fraction of positive
    entries (non-causal, so every probability is > 0) is 1 - p."""
    p = 0.4
    q, k, v = rand_qkv(2, 64, 80, 2, 2, 16, torch.float32, DEVICE)
    with flashtriton.use_backend(backend):
        _, _, s = flash_attn_func(q, k, v, dropout_p=p, return_attn_probs=True)
    assert (s != 0).all()
    assert abs((s > 0).float().mean().item() - (1 - p)) <= _bound(p, s.numel())


CASES = [
    # nq, nk, heads, d, dtype, p, options
    (17, 17, (4, 4), 40, torch.float16, 0.2, dict()),
    (113, 65, (4, 2), 80, torch.bfloat16, 0.5, dict(causal=True)),
    (40, 113, (4, 1), 96, torch.float16, 0.1, dict(causal=True)),
    (65, 65, (4, 2), 64, torch.float16, 0.85, dict()),
    (50, 70, (4, 2), 40, torch.bfloat16, 0.3, dict(window_size=(10, 4), alibi=True, softcap=3.0)),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("nq,nk,heads,d,dtype,p,opts", CASES)
def test_dropout_matches_reference_under_its_mask(backend, nq, nk, heads, d, dtype, p, opts):
    opts = dict(opts)
    if opts.pop("alibi", False):
        opts["alibi_slopes"] = (torch.rand(heads[0]) * 0.3).to(DEVICE)
    batch = 2 if nq * nk < 5000 else 1
    q, k, v = rand_qkv(batch, nq, nk, *heads, d, dtype, DEVICE)
    res = check_attention(backend, q, k, v, dropout_p=p, seed=nq + nk, **opts)
    assert not res["keep"].all()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("opts", [dict(causal=True), dict(window_size=(6, 6), alibi=True)])
def test_dropout_varlen(backend, opts):
    opts = dict(opts)
    if opts.pop("alibi", False):
        opts["alibi_slopes"] = (torch.rand(3, 4) * 0.3).to(DEVICE)
    (q, k, v), varlen = rand_varlen([17, 0, 40], [30, 5, 33], 4, 2, 40, torch.float16, DEVICE)
    check_attention(backend, q, k, v, varlen=varlen, dropout_p=0.25, seed=3, **opts)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("d", [64, 128])
def test_regression_varlen_dropout_backward_fused_rule(backend, d):
    """Session 26's review: a varlen dropout backward at a head dim the fused Gluon
    backward takes (64, 128; deterministic=False, the default) raised in
    policy.gluon_bwd_fused, which unpacked the 3-D varlen q as (B, N, H, D). Now the rule
    refuses varlen first, and the gradients match the reference under the mask."""
    (q, k, v), varlen = rand_varlen([17, 40], [30, 33], 2, 1, d, torch.float16, DEVICE)
    check_attention(backend, q, k, v, varlen=varlen, dropout_p=0.25, seed=5, causal=True)


@pytest.mark.parametrize("backend", BACKENDS)
def test_same_seed_same_result(backend):
    """torch.manual_seed reproduces outputs and gradients bitwise; another seed draws
    another mask; two calls in a row draw different masks."""
    q, k, v = rand_qkv(2, 33, 47, 4, 2, 32, torch.float16, DEVICE, requires_grad=True)
    dout = torch.randn(2, 33, 4, 32, dtype=torch.float16, device=DEVICE)

    def run(seed):
        torch.manual_seed(seed)
        with flashtriton.use_backend(backend):
            out = flash_attn_func(q, k, v, dropout_p=0.3, causal=True)
            return (out,) + torch.autograd.grad(out, (q, k, v), dout)

    a, b, c = run(1), run(1), run(2)
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    assert not torch.equal(a[0], c[0])
    with flashtriton.use_backend(backend):
        torch.manual_seed(1)
        first = flash_attn_func(q, k, v, dropout_p=0.3)
        second = flash_attn_func(q, k, v, dropout_p=0.3)
    assert not torch.equal(first, second)


@pytest.mark.parametrize("backend", BACKENDS)
def test_mask_is_never_stored(backend):
    """Nothing of size Nq x Nk is saved for the backward pass: it regenerates the mask."""
    nq, nk = 48, 80
    q, k, v = rand_qkv(1, nq, nk, 2, 2, 16, torch.float16, DEVICE, requires_grad=True)
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t.shape) or t, lambda t: t):
        with flashtriton.use_backend(backend):
            out = flash_attn_func(q, k, v, dropout_p=0.5)
    assert saved and all(math.prod(s) < nq * nk for s in saved), saved
    torch.autograd.grad(out, (q, k, v), torch.randn_like(out))


@pytest.mark.parametrize("backend", BACKENDS)
def test_dropout_zero_is_no_dropout(backend):
    q, k, v = rand_qkv(1, 40, 40, 2, 2, 32, torch.float16, DEVICE)
    with flashtriton.use_backend(backend):
        a, lse_a, s = flash_attn_func(q, k, v, dropout_p=0.0, causal=True, return_attn_probs=True)
        b = flash_attn_func(q, k, v, causal=True)
    assert torch.equal(a, b) and (s >= 0).all()


@pytest.mark.parametrize("backend", BACKENDS)
def test_dropout_scales_kept_values(backend):
    """With v = 1 everywhere, out = sum of kept probabilities / (1 - p): the 1 / (1 - p)
    scaling and the mask agree with S_dmask exactly."""
    p = 0.6
    q, k, _ = rand_qkv(1, 30, 50, 2, 2, 16, torch.float32, DEVICE)
    v = torch.ones_like(k)
    with flashtriton.use_backend(backend):
        out, _, s = flash_attn_func(q, k, v, dropout_p=p, return_attn_probs=True)
    expect = s.clamp(min=0).sum(-1) / (1 - p)  # (B, H, Nq)
    torch.testing.assert_close(out[..., 0].transpose(1, 2), expect, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("p", [0.1, 0.5])
def test_neighbours_and_blocks_independent(backend, p):
    """Neighbouring columns, and the four elements of 2 x 2 blocks, are kept together
    with the probability of independent draws ((1 - p)^2 and (1 - p)^4), and the
    parity of a 2 x 2 block is that of four independent bits. The Triton mask is
    built from a row key XOR a column key: this is the test that structure must pass."""
    q, k, _ = rand_qkv(1, 256, 256, 2, 2, 16, torch.float16, DEVICE)
    keep = _keep_mask(backend, q, k, p, seed=3).double()[0]  # (H, Nq, Nk)
    kq = 1 - p
    cols = keep[:, :, :-1] * keep[:, :, 1:]
    assert abs(cols.mean().item() - kq ** 2) <= _bound(kq ** 2, cols.numel())
    a, b, c, d = keep[:, :-1, :-1], keep[:, :-1, 1:], keep[:, 1:, :-1], keep[:, 1:, 1:]
    quad = a * b * c * d
    assert abs(quad.mean().item() - kq ** 4) <= _bound(kq ** 4, quad.numel())
    parity = ((a + b + c + d) % 2)
    odd = 0.5 * (1 - (1 - 2 * kq) ** 4)
    assert abs(parity.mean().item() - odd) <= _bound(odd, parity.numel())
    # The Triton column key is itself an in-group key XOR a group key (groups of 128
    # columns), so columns j, j + 1, j + 128, j + 129 of one row have keys that XOR to
    # zero, as a 2 x 2 block does: the same tests on those four.
    a, b, c, d = keep[:, :, 0:127], keep[:, :, 1:128], keep[:, :, 128:255], keep[:, :, 129:256]
    quad = a * b * c * d
    assert abs(quad.mean().item() - kq ** 4) <= _bound(kq ** 4, quad.numel())
    parity = ((a + b + c + d) % 2)
    assert abs(parity.mean().item() - odd) <= _bound(odd, parity.numel())


def _fmix32(x):
    x = x ^ (x >> 16)
    x = (x * 0x85EBCA6B) & 0xFFFFFFFF
    x = x ^ (x >> 13)
    x = (x * 0xC2B2AE35) & 0xFFFFFFFF
    return x ^ (x >> 16)


def _col_keys(j, s_hi):
    """ck of columns j: an in-group key of j % 128 xor a group key of j // 128, each
    hashed with its own seed word (kernels.common.DROPOUT_GROUP)."""
    cs_in = _fmix32(torch.tensor(s_hi ^ 0x5BD1E995))
    cs_group = _fmix32(torch.tensor(s_hi ^ 0x27D4EB2F))
    return _fmix32((j % 128) ^ cs_in) ^ _fmix32((j // 128) ^ cs_group)


def _mult_seed(s_hi):
    return _fmix32(torch.tensor(s_hi ^ 0x1B873593))


def _col_mults(j, s_hi):
    """mk of columns j: the odd multiplier of the group j // 128."""
    return _fmix32((j // 128) ^ _mult_seed(s_hi)) | 1


@pytest.mark.skipif("triton" not in kernel_backends(), reason="the Triton backend's own mask")
def test_triton_keep_mask_is_its_definition():
    """kernels.common.dropout_keep, recomputed here in int64 torch arithmetic: row key
    XOR column key (itself an in-group key XOR a group key), times the odd multiplier of
    the column's group of 128 (301 columns cross two group edges); its top 23 bits
    against those of p * 2^32."""
    p, seed = 0.3, 77
    batch, nq, nk, nheads = 2, 37, 301, 3
    q, k, _ = rand_qkv(batch, nq, nk, nheads, 1, 16, torch.float16, DEVICE)
    keep = _keep_mask("triton", q, k, p, seed=seed).cpu()
    rng = dropout_rng(seed, q.device).cpu()
    s_lo, s_hi = int(rng[0]) & 0xFFFFFFFF, (int(rng[0]) >> 32) & 0xFFFFFFFF
    h = torch.arange(nheads).view(1, nheads, 1, 1)
    b = torch.arange(batch).view(batch, 1, 1, 1)
    i = torch.arange(nq).view(1, 1, nq, 1)
    j = torch.arange(nk).view(1, 1, 1, nk)
    row_id = int(rng[1]) + h * (batch * nq) * nk + (b * nq + i) * nk
    rk = _fmix32(_fmix32((row_id & 0xFFFFFFFF) ^ s_lo) ^ ((row_id >> 32) & 0xFFFFFFFF) ^ s_hi)
    ck = _col_keys(j, s_hi)
    x = ((rk ^ ck) * _col_mults(j, s_hi)) & 0xFFFFFFFF
    threshold = int(torch.tensor(p, dtype=torch.float32).item() * 4294967296.0)
    assert torch.equal(keep, (x >> 9) >= (threshold >> 9))


@pytest.mark.skipif("triton" not in kernel_backends(), reason="the Triton backend's key table")
def test_triton_key_table_holds_the_mask_hashes():
    """The prefill kernels load row and column keys from the per-call table of
    kernels/dropout_keys.py instead of hashing in their loops: the table must hold
    exactly the hashes of kernels.common.dropout_keep (checked here in int64 torch
    arithmetic), head-major row keys after the column keys, then the seed word of the
    group multipliers, for a GQA-sized head count."""
    from flashtriton.launchers import common
    seed, nheads, rows, cols = 5, 6, 77, 301
    rng = dropout_rng(seed, DEVICE)
    table = common._dropout_keys(rng, nheads, rows, cols).cpu().long() & 0xFFFFFFFF
    rng = rng.cpu()
    s_lo, s_hi = int(rng[0]) & 0xFFFFFFFF, (int(rng[0]) >> 32) & 0xFFFFFFFF
    j = torch.arange(cols)
    ck = _col_keys(j, s_hi)
    h = torch.arange(nheads).view(nheads, 1)
    i = torch.arange(rows).view(1, rows)
    row_id = int(rng[1]) + (h * rows + i) * cols
    rk = _fmix32(_fmix32((row_id & 0xFFFFFFFF) ^ s_lo) ^ ((row_id >> 32) & 0xFFFFFFFF) ^ s_hi)
    assert table.shape == (cols + nheads * rows + 1,)
    assert torch.equal(table[:cols], ck)
    assert torch.equal(table[cols:-1].view(nheads, rows), rk)
    assert int(table[-1]) == int(_mult_seed(s_hi))



@pytest.mark.skipif("triton" not in kernel_backends() or DEVICE != "cpu",
                    reason="sets the Triton interpreter's tile")
@pytest.mark.parametrize("block_n", [64, 128])
@pytest.mark.parametrize("nk,causal,warp_spec", [(300, False, False), (300, True, False), (384, False, True)])
def test_dropout_key_tile_paths(monkeypatch, block_n, nk, causal, warp_spec):
    """The warp-specialized forward hashes the in-group column keys once when a key tile
    is a whole column group of 128, and per tile otherwise (a 64-key tile is either half
    of a group); every kernel hashes one group key and multiplier per tile or key block
    (kernels.common.dropout_tile_keep). The interpreter's default 32-key tile covers
    neither case, so this runs the kernels with 64- and 128-key tiles (fwd.py / bwd.py,
    and forced warp-specialized kernels) across three groups, against the reference
    under the returned mask."""
    from flashtriton.kernels import configs
    from flashtriton.launchers import forward
    from helpers import spy
    monkeypatch.setattr(configs, "INTERPRETER_TILE", configs.Tile(32, block_n, 4, 1))
    calls = spy(monkeypatch, forward, "_fwd_warp_spec")
    if warp_spec:
        monkeypatch.setenv("FLASHTRITON_WARP_SPEC", "1")
    # (the warp-specialized forward takes query counts that are multiples of its 128-row tile)
    q, k, v = rand_qkv(1, 128 if warp_spec else 64, nk, 2, 1, 128, torch.bfloat16, DEVICE)
    res = check_attention("triton", q, k, v, dropout_p=0.3, seed=block_n + nk, causal=causal)
    assert not res["keep"].all()
    assert bool(calls) == warp_spec, "the warp-specialized forward did not run" if warp_spec else "it ran"


@pytest.mark.skipif("triton" not in kernel_backends(), reason="a Triton launch variant")
@pytest.mark.parametrize("b,nq,nk,heads,d,opts,variant", [
    (2, 200, 200, (2, 2), 128, dict(causal=True), None),               # ragged, causal (2 heads: CI time)
    (1, 116, 204, (4, 2), 128, dict(causal=True), None),               # Nq < Nk, GQA
    (1, 116, 204, (4, 2), 128, dict(causal=True), "vec_ptr"),          # the bulk's pointer loads (GQA x Nq > 4096)
    (1, 116, 204, (4, 2), 128, dict(causal=True), "halved"),           # the GPU's halved resumed tiles
    (1, 260, 232, (2, 1), 128, dict(window_size=(70, 0)), None),        # both edges masked, MQA
    (1, 113, 203, (4, 2), 128, dict(causal=True), None),               # counts not multiples of 4: bwd.py
])
def test_split_backward_with_dropout(monkeypatch, b, nq, nk, heads, d, opts, variant):
    """policy.BWD_SPLIT_DROPOUT_MAX_N: a masked dropout backward on the split path, bwd_ws.py's
    PARTIAL launch given the call's key table and bwd.py's RESUME launches adding the
    masked tiles with their own dropout (both leave dropout-scaled partials). Gradients
    equal the reference's under the returned mask; the bulk ran partial, with the keys
    (without them it would compute the bulk as if nothing were dropped). Counts that are
    not multiples of 4 stay on bwd.py (policy.warp_spec_split: the key table's 1-D
    descriptor boxes start on 16 bytes). Variants (review, session 21): the bulk's dK/dV
    loop with pointer loads (VEC_PTR: what a GQA call at 4k gets on the GPU) and the
    resumed launches on halved tiles (the GPU's default form; the interpreter's tiles are
    the bulk's)."""
    from flashtriton.kernels import configs
    from flashtriton.launchers import backward, plans
    from helpers import spy
    monkeypatch.setenv("FLASHTRITON_WARP_SPEC", "1")
    if variant == "vec_ptr":
        monkeypatch.setattr(backward, "WS_DKDV_VEC_PTR", True)
    if variant == "halved":
        ws_dkdv, ws_dq = backward._bwd_ws_tiles(128)
        stages = 1 if DEVICE == "cpu" else 2
        monkeypatch.setattr(backward, "RESUME_TILES", {128: (
            configs.Tile(ws_dkdv.block_m, ws_dkdv.block_n // 2, 4, stages),
            configs.Tile(ws_dq.block_m // 2, ws_dq.block_n, 4, stages))})
    plans.clear()
    calls = spy(monkeypatch, backward, "_bwd_warp_spec",
                lambda *a, **k: (a[11] is not None, k.get("partial", False)))
    q, k, v = rand_qkv(b, nq, nk, *heads, d, torch.bfloat16, DEVICE)
    res = check_attention("triton", q, k, v, dropout_p=0.2, seed=nq + nk, **opts)
    assert not res["keep"].all()
    assert calls == ([(True, True)] if nq % 4 == 0 and nk % 4 == 0 else []), calls


def test_split_dropout_rule(monkeypatch):
    """policy.warp_spec_split with dropout (session 21): at D = 128 up to
    BWD_SPLIT_DROPOUT_MAX_N, with Nq and Nk multiples of 4 (the key table's 16-byte
    boxes); not at D = 64 (measured level or slower); any length when forced, never with
    counts off the multiple of 4."""
    from flashtriton.launchers import common, policy
    monkeypatch.setenv("FLASHTRITON_WARP_SPEC", "auto")
    split, bf16 = policy.warp_spec_split, torch.bfloat16
    drop = common.AttnParams(0.1, window_right=0, dropout_p=0.1)
    top = policy.BWD_SPLIT_DROPOUT_MAX_N[128]
    assert split(bf16, drop, None, False, 128, top, top, "bwd")
    assert not split(bf16, drop, None, False, 128, 2 * top, 2 * top, "bwd")
    assert not split(bf16, drop, None, False, 128, top - 1, top, "bwd")
    assert not split(bf16, drop, None, False, 64, 1024, 1024, "bwd")
    monkeypatch.setenv("FLASHTRITON_WARP_SPEC", "1")
    assert split(bf16, drop, None, False, 128, 2 * top, 2 * top, "bwd")
    assert not split(bf16, drop, None, False, 128, 203, 204, "bwd")
    # the whole rule on a Hopper GPU (review, session 21): persistent from
    # BWD_SPLIT_PERSISTENT_MIN_N, one tile a program from BWD_SPLIT_MIN_N, to the cap
    monkeypatch.setenv("FLASHTRITON_WARP_SPEC", "auto")
    monkeypatch.setattr(policy, "_warp_spec_switch", lambda q: True)
    yes, no = (lambda masked: True), (lambda masked: False)

    def mode(n, persistent):
        q = torch.empty(1, n, 2, 128, dtype=bf16)
        return policy.warp_spec_mode(q, drop, None, False, 128, n, n, kernel="bwd", dout=q, bwd_persistent=persistent)
    short = policy.BWD_SPLIT_PERSISTENT_MIN_N[128]
    assert mode(short, yes) == "split" and mode(short, no) is None and mode(short // 2, yes) is None
    assert policy.BWD_SPLIT_MIN_N[128] <= top and mode(top, no) == "split"
    assert mode(2 * top, yes) is None
