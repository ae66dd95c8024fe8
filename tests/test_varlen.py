"""Variable-length batches: flash_attn_varlen_func and its packed forms.

q (total_q, H, D), k and v (total_k, Hk, D), int32 cu_seqlens; each sequence has its
own bottom-right aligned masks. Checked against reference.attention_varlen in float64
on every kernel backend and the reference backend.
"""
import pytest
import torch
import triton

import flashtriton
from flashtriton import flash_attn_varlen_func
from flashtriton.launchers import backward, common, forward, policy

from conftest import DEVICE, kernel_backends
from helpers import assert_close, check_attention, cu_seqlens, rand_qkv, rand_varlen, reference_pair, spy

BACKENDS = kernel_backends() + ["reference"]


def slopes(batch, nheads, per_batch):
    shape = (batch, nheads) if per_batch else (nheads,)
    return (torch.rand(shape) * 0.3 + 0.05).to(DEVICE)


CASES = [
    # lens_q, lens_k, heads, d, dtype, options
    ([17, 1, 40], [17, 30, 1], (4, 4), 40, torch.float16, dict()),
    ([17, 1, 40], [17, 30, 1], (4, 2), 80, torch.bfloat16, dict(causal=True)),
    ([113, 17], [17, 113], (4, 1), 96, torch.float16, dict(causal=True)),
    ([33, 70, 5], [70, 33, 5], (4, 2), 40, torch.bfloat16, dict(causal=True, window_size=(8, -1))),
    ([50, 9], [64, 30], (4, 2), 80, torch.float16, dict(window_size=(6, 4))),
    ([40, 17], [40, 60], (4, 2), 96, torch.float16, dict(alibi="bh", softcap=3.0)),
    ([17, 65], [65, 17], (4, 1), 40, torch.bfloat16, dict(causal=True, alibi="h", softcap=8.0, window_size=(20, -1))),
    ([1, 1, 1], [1, 7, 113], (4, 2), 64, torch.float16, dict(causal=True)),
]


@pytest.mark.parametrize("backend", kernel_backends())
@pytest.mark.parametrize("lens_q,lens_k,heads,d,dtype,opts", CASES)
def test_varlen(backend, lens_q, lens_k, heads, d, dtype, opts):
    opts = dict(opts)
    alibi = opts.pop("alibi", None)
    (q, k, v), varlen = rand_varlen(lens_q, lens_k, *heads, d, dtype, DEVICE)
    if alibi is not None:
        opts["alibi_slopes"] = slopes(len(lens_q), heads[0], alibi == "bh")
    check_attention(backend, q, k, v, varlen=varlen, **opts)


@pytest.mark.skipif("triton" not in kernel_backends(), reason="a Triton launch variant")
@pytest.mark.parametrize("lens_q,lens_k,heads,d,dtype,opts", [CASES[2], CASES[3], CASES[7]])
def test_varlen_fused_delta(monkeypatch, lens_q, lens_k, heads, d, dtype, opts):
    """backward.BWD_FUSED_DELTA on packed batches: the dQ kernel's delta at each
    sequence's rows (q_start offsets, rows past a sequence's end left alone); no
    preprocess launch; checked against the reference."""
    from flashtriton.kernels import bwd as bwd_kernels
    from flashtriton.launchers import plans
    monkeypatch.setenv("FLASHTRITON_WARP_SPEC", "0")
    monkeypatch.setattr(backward, "BWD_FUSED_DELTA", {64, 128, 256})
    plans.clear()
    pre = spy(monkeypatch, plans, "launch", lambda kernel, *a, **k: (kernel, bool(k.get("FUSED_DELTA"))))
    (q, k, v), varlen = rand_varlen(lens_q, lens_k, *heads, d, dtype, DEVICE)
    check_attention("triton", q, k, v, varlen=varlen, **opts)
    bwd = [x for x in pre if x[0] in (bwd_kernels.bwd_preprocess_kernel, bwd_kernels.attn_bwd_dq_kernel)]
    assert bwd == [(bwd_kernels.attn_bwd_dq_kernel, True)], bwd


@pytest.mark.parametrize("opts", [dict(causal=True, window_size=(5, -1)), dict(alibi="bh", softcap=2.0)])
def test_varlen_reference_backend(opts):
    opts = dict(opts)
    alibi = opts.pop("alibi", None)
    (q, k, v), varlen = rand_varlen([17, 0, 30], [20, 5, 0], 4, 2, 40, torch.float16, DEVICE)
    if alibi is not None:
        opts["alibi_slopes"] = slopes(3, 4, True)
    check_attention("reference", q, k, v, varlen=varlen, **opts)


ZERO_LENGTH = [
    ([0, 17, 5], [0, 20, 9]),      # leading empty sequence
    ([17, 0, 5], [20, 0, 9]),      # empty in the middle
    ([17, 5, 0], [20, 9, 0]),      # trailing
    ([17, 0, 5], [20, 30, 9]),     # no queries, but keys: their dK, dV are 0
    ([17, 5, 40], [20, 0, 9]),     # queries without keys: out 0, lse +inf
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("lens_q,lens_k", ZERO_LENGTH)
def test_zero_length_sequences(backend, lens_q, lens_k):
    (q, k, v), varlen = rand_varlen(lens_q, lens_k, 4, 2, 40, torch.float16, DEVICE)
    res = check_attention(backend, q, k, v, varlen=varlen, causal=True)
    cq, ck = varlen[0].tolist(), varlen[1].tolist()
    for i in range(len(lens_q)):
        if lens_k[i] == 0:
            assert torch.all(res["out"][cq[i]:cq[i + 1]] == 0)
            assert torch.all(res["lse"][:, cq[i]:cq[i + 1]] == float("inf"))
            assert torch.all(res["dq"][cq[i]:cq[i + 1]] == 0)
        if lens_q[i] == 0:
            assert torch.all(res["dk"][ck[i]:ck[i + 1]] == 0) and torch.all(res["dv"][ck[i]:ck[i + 1]] == 0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_regression_reference_zero_length_keys(backend):
    """reference.attention crashed (amax over an empty dim) on a sequence with no keys,
    so the reference backend and every varlen test with such a batch failed."""
    (q, k, v), varlen = rand_varlen([3, 4], [5, 0], 2, 2, 16, torch.float16, DEVICE)
    out, lse = flashtriton.reference.attention_varlen(q.double(), k.double(), v.double(), *varlen[:2],
                                                      softmax_scale=0.25)
    assert torch.all(out[3:] == 0) and torch.all(lse[:, 3:] == float("inf"))
    with flashtriton.use_backend(backend):
        out = flash_attn_varlen_func(q, k, v, *varlen)
    assert torch.all(out[3:] == 0) and torch.isfinite(out).all()


@pytest.mark.parametrize("backend", BACKENDS)
def test_all_sequences_empty(backend):
    (q, k, v), varlen = rand_varlen([0, 0], [0, 0], 2, 2, 16, torch.float16, DEVICE, requires_grad=True)
    with flashtriton.use_backend(backend):
        out = flash_attn_varlen_func(q, k, v, *varlen)
        grads = torch.autograd.grad(out.sum(), (q, k, v))
    assert out.shape == (0, 2, 16) and all(g.shape == (0, 2, 16) for g in grads)


@pytest.mark.parametrize("backend", kernel_backends())
def test_varlen_equals_dense(backend):
    """Equal lengths: the varlen result and the padded dense one agree with each other
    (and with the reference)."""
    q, k, v = rand_qkv(3, 40, 50, 4, 2, 40, torch.float16, DEVICE, requires_grad=True)
    packed = [t.detach().flatten(0, 1).requires_grad_() for t in (q, k, v)]
    varlen = (cu_seqlens([40] * 3, DEVICE), cu_seqlens([50] * 3, DEVICE), 40, 50)
    with flashtriton.use_backend(backend):
        dense = flashtriton.flash_attn_func(q, k, v, causal=True)
        dout = torch.randn_like(dense)
        g_dense = torch.autograd.grad(dense, (q, k, v), dout)
        var = flash_attn_varlen_func(*packed, *varlen, causal=True)
        g_var = torch.autograd.grad(var, packed, dout.flatten(0, 1))
    truth, lowp = reference_pair(q, k, v, dout, softmax_scale=40 ** -0.5, window_right=0)
    assert_close("out", var.view_as(dense), truth["out"], lowp["out"], 2, torch.float16)
    torch.testing.assert_close(var.view_as(dense), dense, rtol=0, atol=2e-3)
    for name, a, b in zip(("dq", "dk", "dv"), g_var, g_dense):
        assert_close(name, a.view_as(b), truth[name], lowp[name], 3, torch.float16)
        torch.testing.assert_close(a.view_as(b), b, rtol=0, atol=4e-3)


@pytest.mark.parametrize("backend", BACKENDS)
def test_max_seqlen_larger_than_needed(backend):
    """max_seqlen_* is an upper bound only: a loose one changes nothing."""
    (q, k, v), varlen = rand_varlen([17, 40], [30, 9], 4, 2, 40, torch.bfloat16, DEVICE, requires_grad=True)
    cu_q, cu_k, max_q, max_k = varlen
    with flashtriton.use_backend(backend):
        a = flash_attn_varlen_func(q, k, v, cu_q, cu_k, max_q, max_k, causal=True)
        dout = torch.randn_like(a)
        ga = torch.autograd.grad(a, (q, k, v), dout)
        b = flash_attn_varlen_func(q, k, v, cu_q, cu_k, 500, 700, causal=True)
        gb = torch.autograd.grad(b, (q, k, v), dout)
    assert torch.equal(a, b)
    assert all(torch.equal(x, y) for x, y in zip(ga, gb))


@pytest.mark.parametrize("backend", kernel_backends())
def test_packed_varlen(backend):
    """flash_attn_varlen_qkvpacked_func and flash_attn_varlen_kvpacked_func take strided
    views of one packed tensor; gradients flow back into it."""
    lens = [17, 1, 40]
    cu = cu_seqlens(lens, DEVICE)
    qkv = torch.randn(sum(lens), 3, 4, 40, dtype=torch.float16, device=DEVICE, requires_grad=True)
    with flashtriton.use_backend(backend):
        out = flashtriton.flash_attn_varlen_qkvpacked_func(qkv, cu, max(lens), causal=True)
        dout = torch.randn_like(out)
        (dqkv,) = torch.autograd.grad(out, qkv, dout)
    q, k, v = qkv.detach().unbind(1)
    truth, lowp = reference_pair(q, k, v, dout, varlen=(cu, cu), softmax_scale=40 ** -0.5, window_right=0)
    assert_close("out", out, truth["out"], lowp["out"], 2, torch.float16)
    for i, name in enumerate(("dq", "dk", "dv")):
        assert_close(name, dqkv[:, i], truth[name], lowp[name], 3, torch.float16)

    lens_k = [30, 5, 2]
    cu_k = cu_seqlens(lens_k, DEVICE)
    q = torch.randn(sum(lens), 4, 40, dtype=torch.bfloat16, device=DEVICE, requires_grad=True)
    kv = torch.randn(sum(lens_k), 2, 2, 40, dtype=torch.bfloat16, device=DEVICE, requires_grad=True)
    with flashtriton.use_backend(backend):
        out = flashtriton.flash_attn_varlen_kvpacked_func(q, kv, cu, cu_k, max(lens), max(lens_k),
                                                          window_size=(3, 3))
        dout = torch.randn_like(out)
        dq, dkv = torch.autograd.grad(out, (q, kv), dout)
    truth, lowp = reference_pair(q, kv[:, 0], kv[:, 1], dout, varlen=(cu, cu_k), softmax_scale=40 ** -0.5,
                                 window_left=3, window_right=3)
    assert_close("out", out, truth["out"], lowp["out"], 2, torch.bfloat16)
    assert_close("dq", dq, truth["dq"], lowp["dq"], 3, torch.bfloat16)
    assert_close("dk", dkv[:, 0], truth["dk"], lowp["dk"], 3, torch.bfloat16)
    assert_close("dv", dkv[:, 1], truth["dv"], lowp["dv"], 3, torch.bfloat16)


# --- the program map: no program per padding block -------------------------------------

class _GridSpy:
    """Stands in for a @triton.jit kernel and records the grid of each launch."""

    def __init__(self, kernel):
        self.kernel, self.grids = kernel, []

    def __getitem__(self, grid):
        self.grids.append(tuple(grid))
        return self.kernel[grid]


@pytest.fixture
def grid_spies(monkeypatch):
    spies = {}
    for module, name in ((forward, "attn_fwd_kernel"), (backward, "attn_bwd_dq_kernel"),
                         (backward, "attn_bwd_dkdv_kernel"), (backward, "bwd_preprocess_kernel")):
        spies[name] = _GridSpy(getattr(module, name))
        monkeypatch.setattr(module, name, spies[name])
    return spies


def test_cu_blocks_program_map():
    cu = cu_seqlens([0, 1, 32, 33, 0, 100], "cpu")
    assert common._cu_blocks(cu, 32).tolist() == [0, 0, 1, 2, 4, 4, 8]


@pytest.mark.skipif("triton" not in kernel_backends(), reason="Triton kernels not available")
def test_grid_does_not_depend_on_max_seqlen(grid_spies):
    """The varlen grids are sized by the total token count (plus at most one spare
    program per sequence), never by batch x max_seqlen."""
    lens_q, lens_k = [1, 17, 113, 0, 3], [2, 113, 17, 5, 0]
    (q, k, v), (cu_q, cu_k, _, _) = rand_varlen(lens_q, lens_k, 4, 2, 32, torch.float16, DEVICE,
                                                 requires_grad=True)
    batch, total_q, total_k = len(lens_q), sum(lens_q), sum(lens_k)
    maxes = ((113, 113), (5000, 7000))
    with flashtriton.use_backend("triton"):
        for max_q, max_k in maxes:
            out = flash_attn_varlen_func(q, k, v, cu_q, cu_k, max_q, max_k, causal=True)
            torch.autograd.grad(out, (q, k, v), torch.randn_like(out))
    for name, kind, total, heads in (("attn_fwd_kernel", "fwd", total_q, 4), ("attn_bwd_dq_kernel", "dq", total_q, 4),
                                     ("attn_bwd_dkdv_kernel", "dkdv", total_k, 2)):
        grids = grid_spies[name].grids
        assert len(grids) == len(maxes), (name, grids)
        for grid, (max_q, max_k) in zip(grids, maxes):
            # the tile the launcher picks for this call (varlen: never autotuned)
            params = common.AttnParams(32 ** -0.5, -1, 0, 0.0, 0.0)  # causal
            tile = common._tile(kind, common.block_d(32), q, params, max(max_q, max_k), True, None)
            block = tile.block_n if kind == "dkdv" else tile.block_m
            programs = grid[0] * grid[1] if len(grid) == 2 else grid[0]   # the forward's grid is linear
            assert programs <= heads * (triton.cdiv(total, block) + batch), (name, grid, tile)


@pytest.mark.skipif("triton" not in kernel_backends(), reason="Triton kernels not available")
def test_regression_varlen_preprocess_grid_ignores_padding(grid_spies, monkeypatch):
    """The backward's delta kernel was launched on batch x cdiv(max_seqlen_q) blocks, a
    program per padding block; it now covers the total_q packed rows only. (With
    BWD_FUSED_DELTA the dQ kernel computes delta: its grid is checked in
    test_grid_does_not_depend_on_max_seqlen; here the preprocess runs.)"""
    from flashtriton.launchers import plans
    monkeypatch.setattr(backward, "BWD_FUSED_DELTA", set())
    plans.clear()
    (q, k, v), (cu_q, cu_k, _, _) = rand_varlen([1, 2, 3], [3, 2, 1], 2, 2, 16, torch.float16, DEVICE,
                                                 requires_grad=True)
    with flashtriton.use_backend("triton"):
        out = flash_attn_varlen_func(q, k, v, cu_q, cu_k, 4096, 4096)
        dq, = torch.autograd.grad(out, q, torch.randn_like(out))
    (grid,) = grid_spies["bwd_preprocess_kernel"].grids
    assert grid == (2, 1), grid  # 2 heads x one block of the 6 packed rows


@pytest.mark.parametrize("backend", BACKENDS)
def test_regression_strided_cu_seqlens(backend):
    """The kernels read cu_seqlens[b] at CU + b: a strided view (here every other entry
    of a larger tensor) gave wrong outputs and gradients. It is now made contiguous."""
    cu = torch.tensor([0, 7, 10, 99, 30, 3], dtype=torch.int32, device=DEVICE)[::2]
    assert cu.stride(0) == 2 and cu.tolist() == [0, 10, 30]
    q, k, v = (torch.randn(30, 2, 32, dtype=torch.float16, device=DEVICE) for _ in range(3))
    check_attention(backend, q, k, v, varlen=(cu, cu, 20, 20), causal=True)


@pytest.mark.parametrize("backend", [b for b in kernel_backends() if b == "triton"])
def test_regression_cu_seqlens_checked_once_per_tensor(backend, monkeypatch):
    """2026-11-29, H200: reading cu_seqlens on every call (a host sync) made a 16k-token
    varlen forward take 1.5 ms against 0.7 ms of kernel. A tensor that passed is not
    read again, until an in-place write changes it; then the check runs again. (The
    cpu backend reads the lengths for its own loops: no sync there, not tested.)"""
    (q, k, v), (cu_q, cu_k, mq, mk) = rand_varlen([3, 4], [5, 6], 2, 2, 32, torch.float16, DEVICE)
    with flashtriton.use_backend(backend):
        first = flash_attn_varlen_func(q, k, v, cu_q, cu_k, mq, mk)
        reads = []
        real_tolist = torch.Tensor.tolist
        monkeypatch.setattr(torch.Tensor, "tolist", lambda t: reads.append(t) or real_tolist(t))
        again = flash_attn_varlen_func(q, k, v, cu_q, cu_k, mq, mk)
        assert not any(t is cu_q or t is cu_k for t in reads)
        assert torch.equal(first, again)
        with pytest.raises(ValueError, match=r"max_seqlen_q: 3 is less than the longest sequence"):
            flash_attn_varlen_func(q, k, v, cu_q, cu_k, 3, mk)  # remembered values still check max_seqlen
        cu_k[1] = 12  # in place: version bumps, the values are read and rejected
        with pytest.raises(ValueError, match=r"^cu_seqlens_k: must be non-decreasing"):
            flash_attn_varlen_func(q, k, v, cu_q, cu_k, mq, mk)


def test_heaviest_first_order():
    """The causal varlen forward's dispatch order: a permutation of the grid's slots,
    programs by visible keys (most first), spare programs last."""
    lens = [3, 70, 0, 33]
    cu = cu_seqlens(lens, "cpu")
    block = 16
    cu_blocks = common._cu_blocks(cu, block)
    n_programs = triton.cdiv(sum(lens), block) + len(lens)
    varlen = common.Varlen(cu, cu, max(lens), max(lens))
    order = common._heaviest_first(varlen, cu_blocks, n_programs, block)
    assert sorted(order.tolist()) == list(range(n_programs))
    blocks = cu_blocks.tolist()
    work = []
    for pid in order.tolist():
        if pid >= blocks[-1]:
            work.append(-1)
            continue
        s = max(i for i in range(len(lens)) if blocks[i] <= pid)
        j = (blocks[s + 1] - blocks[s]) - 1 - (pid - blocks[s])  # the kernel reverses blocks in a sequence
        work.append(min(lens[s], (j + 1) * block))
    assert work == sorted(work, reverse=True)
    assert work[0] == 70 and work[-1] == -1


@pytest.mark.skipif("triton" not in kernel_backends(), reason="Triton kernels not available")
def test_regression_varlen_maps_built_once_per_cu_seqlens(monkeypatch):
    """2026-11-29, H200: the program maps (block counts, heaviest-first order) were
    rebuilt by ~20 small torch ops on every call, host time the GPU idled through (a
    16k-token causal varlen forward measured 1.26 ms). They are now built once per
    cu_seqlens contents; an in-place write rebuilds them, and results do not change."""
    (q, k, v), (cu_q, cu_k, mq, mk) = rand_varlen([3, 40, 17], [5, 40, 30], 2, 2, 32, torch.float16, DEVICE,
                                                  requires_grad=True)
    built = []
    real_blocks, real_order = common._cu_blocks, common._heaviest_first
    for module in (common, forward, backward):   # each module that calls _cu_blocks
        monkeypatch.setattr(module, "_cu_blocks", lambda *a: built.append("blocks") or real_blocks(*a))
    monkeypatch.setattr(forward, "_heaviest_first", lambda *a: built.append("order") or real_order(*a))
    with flashtriton.use_backend("triton"):
        first = flash_attn_varlen_func(q, k, v, cu_q, cu_k, mq, mk, causal=True)
        torch.autograd.grad(first, (q, k, v), torch.randn_like(first))
        n_first = len(built)
        assert "order" in built and n_first >= 2
        again = flash_attn_varlen_func(q, k, v, cu_q, cu_k, mq, mk, causal=True)
        torch.autograd.grad(again, (q, k, v), torch.randn_like(again))
        assert len(built) == n_first
        assert torch.equal(first, again)
        cu_q.copy_(cu_q.clone())  # same values, but an in-place write: maps are rebuilt
        third = flash_attn_varlen_func(q, k, v, cu_q, cu_k, mq, mk, causal=True)
        assert len(built) > n_first and torch.equal(first, third)


def _forget_maps(*cu_seqlens):
    """Drop the program maps a launcher cached on these cu_seqlens tensors."""
    for t in cu_seqlens:
        if hasattr(t, "_flashtriton_maps"):
            del t._flashtriton_maps


def _capture(fn):
    """fn() captured in a CUDA graph on a side stream: (the graph, fn's output)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.stream(side), torch.cuda.graph(graph):
        out = fn()
    torch.cuda.current_stream().wait_stream(side)
    return graph, out


@pytest.mark.gpu
def test_varlen_maps_not_cached_during_graph_capture():
    """A map first built inside CUDA-graph capture is only recorded, not computed: it
    must not be remembered for later eager calls (which would read garbage)."""
    (q, k, v), (cu_q, cu_k, mq, mk) = rand_varlen([30, 200, 7], [30, 250, 9], 4, 2, 64, torch.bfloat16, "cuda")
    with flashtriton.use_backend("triton"):
        expected = flash_attn_varlen_func(q, k, v, cu_q, cu_k, mq, mk, causal=True)  # checks cu_seqlens
        _forget_maps(cu_q, cu_k)  # (the forward caches maps on cu_q only)
        _capture(lambda: flash_attn_varlen_func(q, k, v, cu_q, cu_k, mq, mk, causal=True))
        again = flash_attn_varlen_func(q, k, v, cu_q, cu_k, mq, mk, causal=True)
    assert torch.equal(expected, again)


@pytest.mark.skipif("triton" not in kernel_backends(), reason="a Triton launch variant")
@pytest.mark.parametrize("lens_q,lens_k,heads,d,dtype", [
    ([17, 1, 300], [200, 30, 1], (4, 2), 128, torch.bfloat16),   # ragged key tiles, a one-row sequence, GQA
    ([0, 130, 5], [64, 0, 129], (2, 2), 96, torch.float16),      # an empty query and an empty key sequence
    ([256, 128], [128, 256], (4, 1), 128, torch.bfloat16),       # whole tiles, MQA
    ([70, 0, 33], [64, 5, 40], (2, 1), 256, torch.bfloat16),     # D = 256: the forward only (session 23)
    ([70, 0, 33], [64, 5, 40], (2, 1), 192, torch.float16),      # head_dim under BLOCK_D 256 (review, session 23)
])
def test_warp_specialized_varlen(monkeypatch, lens_q, lens_k, heads, d, dtype):
    """The varlen warp-specialized forward (kernels/fwd_ws_varlen.py: slot table, key mask
    in every tile, lse through a per-slot buffer) and backward (bwd_ws_varlen.py, at
    head_dim 128; bwd.py otherwise), forced with FLASHTRITON_WARP_SPEC=1: output, lse and
    gradients pass the reference check; rows without keys give 0 and lse +inf; both ran
    (the backward not at D = 256: policy.WS_VARLEN_BLOCK_DS).
    Keys without queries get dK = dV = 0 (check_attention's reference has them 0).
    (The fused Gluon VARLEN backward, session 50, would take the D = 128 backwards: switched off here.)"""
    monkeypatch.setattr(policy, "GLUON_BWD_FUSED_VARLEN_MIN_N", {})
    fwd_calls = spy(monkeypatch, forward, "_fwd_warp_spec_varlen")
    bwd_calls = spy(monkeypatch, backward, "_bwd_warp_spec_varlen")
    monkeypatch.setenv("FLASHTRITON_WARP_SPEC", "1")
    (q, k, v), varlen = rand_varlen(lens_q, lens_k, *heads, d, dtype, DEVICE)
    res = check_attention("triton", q, k, v, varlen=varlen)
    # the backward's q / dO column descriptors need head_dim == BLOCK_D
    assert len(fwd_calls) == 1 and len(bwd_calls) == (1 if d == 128 else 0), (fwd_calls, bwd_calls)
    cq = varlen[0].tolist()
    for i in range(len(lens_q)):
        if lens_k[i] == 0:
            assert torch.all(res["out"][cq[i]:cq[i + 1]] == 0)
            assert torch.all(res["lse"][:, cq[i]:cq[i + 1]] == float("inf"))


@pytest.mark.skipif("triton" not in kernel_backends(), reason="a Triton launch variant")
@pytest.mark.parametrize("d", [256, 64])
def test_regression_varlen_d256_warp_spec(monkeypatch, d):
    """Regression (session 22, found by review): the varlen rule took every BLOCK_D of the
    dense forward's tile table, 256 included, so a non-causal D = 256 varlen backward on
    Hopper went on to look up a warp-specialized backward tile that does not exist
    (KeyError). Now varlen takes the warp-specialized kernels at D = 128 only
    (policy.WS_VARLEN_BLOCK_DS["bwd"]); forced, D = 256 and 64 run bwd.py and pass."""
    monkeypatch.setenv("FLASHTRITON_WARP_SPEC", "1")
    called = spy(monkeypatch, backward, "_bwd_warp_spec_varlen")
    (q, k, v), varlen = rand_varlen([70, 0, 33], [70, 5, 40], 4, 2, d, torch.bfloat16, DEVICE)
    check_attention("triton", q, k, v, varlen=varlen)
    assert not called


def test_warp_spec_varlen_rule(monkeypatch):
    """Which varlen calls take the warp-specialized forward (and backward): non-causal
    without window, ALiBi, softcap or dropout, bf16 / fp16 at BLOCK_D 128, and 256 for
    the forward only (policy.WS_VARLEN_BLOCK_DS: never 64, forced or not);
    FLASHTRITON_WARP_SPEC applies (here, under the interpreter or on a CPU, only when
    forced)."""
    bf16, plain = torch.bfloat16, common.AttnParams(0.1)
    q = torch.empty(8, 2, 128, dtype=bf16)
    monkeypatch.setenv("FLASHTRITON_WARP_SPEC", "1")
    rule = policy.warp_spec_varlen
    if common.interpreting():
        assert rule(q, plain, None, 128) and rule(q.half(), plain, None, 128)
    for p in (common.AttnParams(0.1, window_right=0), common.AttnParams(0.1, window_left=4),
              common.AttnParams(0.1, softcap=3.0), common.AttnParams(0.1, dropout_p=0.1)):
        assert not rule(q, p, None, 128)
    assert not rule(q, plain, torch.ones(2), 128) and not rule(q, plain, None, 64) and not rule(q.float(), plain, None, 128)
    assert not rule(q, plain, None, 256, "bwd") and not rule(q, plain, None, 64, "bwd")
    if common.interpreting():
        assert rule(q, plain, None, 256) and rule(q, plain, None, 128, "bwd")
    monkeypatch.setenv("FLASHTRITON_WARP_SPEC", "0")
    assert not rule(q, plain, None, 128)
    monkeypatch.setenv("FLASHTRITON_WARP_SPEC", "on")
    with pytest.raises(ValueError, match=r"^FLASHTRITON_WARP_SPEC: must be auto, 0 or 1"):
        rule(q, plain, None, 128)


@pytest.mark.gpu
def test_warp_specialized_varlen_in_cuda_graph():
    """The varlen warp-specialized forward (non-causal, D = 128, on Hopper) captured in a
    CUDA graph: its slot table and lse gather are built inside the capture (not cached),
    and the replay equals the eager call bit for bit. (Written in session 7 after the
    last GPU run: first checked by the next GPU test run.)"""
    if torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("the warp-specialized kernels run on Hopper only")
    (q, k, v), (cu_q, cu_k, mq, mk) = rand_varlen([300, 77, 1024], [290, 128, 1000], 4, 2, 128, torch.bfloat16,
                                                  "cuda")
    with flashtriton.use_backend("triton"):
        expected = flash_attn_varlen_func(q, k, v, cu_q, cu_k, mq, mk)
        _forget_maps(cu_q, cu_k)
        graph, out = _capture(lambda: flash_attn_varlen_func(q, k, v, cu_q, cu_k, mq, mk))
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
    assert torch.equal(out, expected)
