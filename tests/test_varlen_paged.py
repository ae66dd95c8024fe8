"""flash_attn_varlen_func with block_table: packed queries over a paged KV cache.

k_cache, v_cache (num_blocks, page, Hk, D); sequence b's key position p is row p % page
of page block_table[b, p // page]. The pages are dealt in a random order, and every
cache row no sequence uses holds NaN: a kernel that reads a row outside its sequence (or
multiplies a masked probability by such a value) fails the comparison. Checked against
the float64 reference of the same keys packed contiguously, on every kernel backend and
the reference backend. Forward only, as in flash-attn.
"""
import pytest
import torch

import flashtriton
from flashtriton import flash_attn_varlen_func, paged

from conftest import DEVICE, kernel_backends
from helpers import assert_close, max_err, offline_compile, probs_floor, rand_varlen, reference_pair, reference_probs, spy

BACKENDS = kernel_backends() + ["reference"]


def paged_cache(k, v, lens_k, page):
    """The packed k, v in a paged cache (flashtriton.paged.scatter_to_pages): pages in a random order, two spare
    pages, every unused row NaN, table entries past a sequence's pages -1."""
    return paged.scatter_to_pages(k, v, lens_k, page, fill=float("nan"), spare_blocks=2)


CASES = [
    # lens_q, lens_k, (H, Hk), D, dtype, page, options
    ([17, 1, 40], [17, 30, 1], (4, 4), 40, torch.float16, 16, dict()),
    ([17, 1, 40], [17, 70, 1], (4, 2), 80, torch.bfloat16, 64, dict(causal=True)),
    ([113, 17], [17, 113], (4, 1), 96, torch.float16, 1, dict(causal=True)),
    ([33, 70, 5], [70, 33, 5], (4, 2), 40, torch.bfloat16, 8, dict(causal=True, window_size=(8, -1))),
    ([50, 9], [64, 30], (4, 2), 80, torch.float16, 256, dict(window_size=(6, 4))),
    ([40, 17], [40, 60], (4, 2), 96, torch.float16, 32, dict(alibi="bh", softcap=3.0)),
    ([17, 65], [65, 17], (4, 1), 40, torch.bfloat16, 16, dict(causal=True, alibi="h", softcap=8.0,
                                                              window_size=(20, -1))),
    ([0, 17, 5], [20, 0, 9], (4, 2), 64, torch.bfloat16, 16, dict(causal=True)),   # empty sequences
    ([1, 1, 1], [1, 7, 113], (4, 2), 64, torch.float16, 64, dict(causal=True)),    # decode-like rows
    ([20, 33], [45, 70], (2, 1), 192, torch.bfloat16, 32, dict()),
    ([30, 9], [40, 12], (4, 2), 64, torch.float32, 16, dict(causal=True)),
    # fp32 past the few-rows tile at block_d 128 / 256 (the paged forward's 32 x 32 x 8 tile, maxnreg; session 70)
    ([40, 17], [50, 23], (4, 2), 128, torch.float32, 16, dict(causal=True)),
    ([33, 20], [20, 45], (4, 1), 192, torch.float32, 32, dict(window_size=(10, 3))),
]


def _slopes(batch, nheads, per_batch):
    shape = (batch, nheads) if per_batch else (nheads,)
    return (torch.rand(shape) * 0.3 + 0.05).to(DEVICE)


def _check_paged(backend, lens_q, lens_k, heads, d, dtype, page, opts, lse_floor=False):
    opts = dict(opts)
    alibi = opts.pop("alibi", None)
    (q, k, v), varlen = rand_varlen(lens_q, lens_k, *heads, d, dtype, DEVICE)
    if isinstance(alibi, torch.Tensor):
        opts["alibi_slopes"] = alibi
    elif alibi is not None:
        opts["alibi_slopes"] = _slopes(len(lens_q), heads[0], alibi == "bh")
    k_cache, v_cache, table = paged_cache(k, v, lens_k, page)
    with flashtriton.use_backend(backend):
        out, lse, probs = flash_attn_varlen_func(q, k_cache, v_cache, *varlen, block_table=table,
                                                 return_attn_probs=True, **opts)
    causal = opts.pop("causal", False)
    wl, wr = opts.pop("window_size", (-1, -1))
    scale = opts.pop("softmax_scale", d ** -0.5)
    ref_kw = dict(softmax_scale=scale, window_left=wl, window_right=0 if causal else wr, **opts)
    truth, lowp = reference_pair(q, k, v, varlen=varlen[:2], **ref_kw)
    assert out.shape == q.shape and out.dtype == dtype
    assert lse.shape == (q.shape[1], q.shape[0]) and lse.dtype == torch.float32
    assert_close("out", out, truth["out"], lowp["out"], 2, dtype)
    assert_close("lse", lse, truth["lse"], lowp["lse"], 2, dtype)
    p64 = reference_probs(q, k, varlen, **ref_kw)
    assert probs.shape == p64.shape
    p_lowp = reference_probs(q, k, varlen, **ref_kw).to(dtype)
    if lse_floor:
        # check_attention's S_dmask floor (helpers.probs_floor): a few fp32 ulps of |lse|
        err, base = max_err(probs.float(), p64), max_err(p_lowp, p64)
        assert err <= 2 * base + probs_floor(lse, dtype), f"S_dmask: error {err:.3e} against 2 x {base:.3e} + floor"
    else:
        assert_close("S_dmask", probs.float(), p64, p_lowp, 2, dtype)
    return out


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("lens_q,lens_k,heads,d,dtype,page,opts", CASES)
def test_varlen_paged(backend, lens_q, lens_k, heads, d, dtype, page, opts):
    _check_paged(backend, lens_q, lens_k, heads, d, dtype, page, opts)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("d", [128, 192])
@pytest.mark.parametrize("scale", [-0.2, 0.2])
def test_varlen_paged_fp32_one_query_sharp_scale(backend, d, scale):
    """One query row a sequence over a paged fp32 cache at sharp softmax scales (session 59): kernels/fwd_paged.py
    takes the decode kernel's tiles, and with them its score slices (launchers.common.qk_levels from max_seqlen_q;
    tests/test_kvcache.py::test_float32_one_query_sharp_scale, tests/test_fp32.py::test_fp32_one_query_sharp_scale
    for the reasons). Regression test of the CPU backend too (the pages gathered, then cpu/native_prefill.py's fp32
    forward): with each score summed in FMA chains of 64 terms over d it read lse 2.37e-6 against a bound of 2.08e-6
    at D = 128, scale -0.2; one-query sequences take chains of 16 since session 59 (QK_PIECE_ONE, and the backward's
    S^T / dP^T / delta alike). Its S_dmask check takes the floor check_attention gives every other test's
    (helpers.probs_floor): at |lse| ~ 7-8 a few fp32 ulps of the exponent exceed the plain 1e-6."""
    for seed in range(2):
        torch.manual_seed(seed)
        _check_paged(backend, [1, 1], [113, 77], (8, 2), d, torch.float32, 16, dict(causal=True, softmax_scale=scale),
                     lse_floor=True)


# (sys.argv: bench folder, the constexprs as JSON, warps, stages, maxnreg (0: none); prints [stack bytes, registers])
_PAGED_STACK = """
import json, sys
from flashtriton.bench import compile_report as cr
f = cr.frame(cr.compile_paged(json.loads(sys.argv[2]), "fp32", int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]) or None))
print(json.dumps([f["stack"], f["regs"]]))
"""


@pytest.mark.parametrize("d", [128, 192])
def test_regression_fp32_one_query_paged_tile(monkeypatch, d):
    """Regression (session 69, H100): test_varlen_paged_fp32_one_query_sharp_scale failed on the Triton backend with
    "Triton Error [CUDA]: out of memory" at launch under ten test processes. The paged forward took the fp32 64 x 32
    (D = 128) / 32 x 32 (D = 192) tile for one query row, whose score slices (QK_LEVELS) spilled: a stack frame of
    8.9 / 11.3 KB a thread (sm_90a), which the driver reserves for every resident thread of the card. It now takes
    the forward's few-rows tile (configs.FP32_FEW_ROWS) from max_seqlen_q, as flash_attn_func does. And the same
    session's second bug: ptxas, left to choose, compiled the multi-row fp32 tile to 32 registers with 35-47 KB of
    spill traffic a thread; the launcher now passes maxnreg (configs.FP32_MAXNREG_AT). Checks the tile and maxnreg the
    launcher passes (interpreter off, the launch caught) and the compiled kernels' stack frames and registers
    (ptxas, offline)."""
    import json
    from flashtriton.kernels import configs
    from flashtriton.launchers import common, forward_paged, plans
    from flashtriton.paged import scatter_to_pages
    monkeypatch.setattr(forward_paged, "interpreting", lambda: False)
    monkeypatch.setenv("FLASHTRITON_ALLOW_TF32", "0")   # (true fp32's tile and budget, whatever the environment)
    seen = {}

    def fake_launch(kernel, grid, *args, **kw):
        seen.update(kw)
    monkeypatch.setattr(plans, "launch", fake_launch)
    bd = common.block_d(d)
    for max_q in (1, 16, 17):
        (q, k, v), varlen = rand_varlen([max_q, 1], [113, 77], 8, 2, d, torch.float32, "cpu")
        k_cache, v_cache, table = scatter_to_pages(k, v, [113, 77], 16)
        params = common.AttnParams(d ** -0.5, -1, 0, 0.0, 0.0)
        forward_paged.fwd_paged(q, k_cache, v_cache, table, params, None, common.Varlen(*varlen))
        few = configs.DEFAULTS_FP32["fwd_few_rows"][bd]
        assert (seen["BLOCK_M"], seen["BLOCK_N"]) == ((few.block_m, few.block_n) if max_q <= 16 else
                                                      (configs.DEFAULTS_FP32["fwd_paged"][bd].block_m,
                                                       configs.DEFAULTS_FP32["fwd_paged"][bd].block_n)), (max_q, seen)
        assert seen.get("maxnreg") == configs.FP32_MAXNREG == 255, seen.get("maxnreg")
        if max_q in (1, 17):
            const = {name: seen[name] for name in ("HEAD_DIM", "BLOCK_D", "BLOCK_M", "BLOCK_N", "PAGE_SIZE",
                                                   "PAGE_GATHER", "KV_TMA", "QK_LEVELS", "DOT_PRECISION",
                                                   "HAS_LEFT", "HAS_RIGHT", "HAS_ALIBI", "HAS_SOFTCAP")}
            assert (const["QK_LEVELS"] > 0) == (max_q == 1)
            stack, regs = offline_compile(_PAGED_STACK, json.dumps(const), str(seen["num_warps"]),
                                          str(seen["num_stages"]), str(seen["maxnreg"]))
            # one row: 728 / 2680 bytes now (8904 / 11328 before); 17 rows (the 32 x 32 x 8 tile since session 70,
            # maxnreg 255): ~0.5 / 1.9 KB at 255 registers (at D = 192 without maxnreg ptxas picks 32 registers and
            # 6.6 KB); session 69's 64 x 32 / 32 x 32 x 4 tile: 2112 / 2280 bytes with maxnreg, 6464 / 7456 without
            assert stack <= 4096 and regs > 128, (d, max_q, stack, regs)


@pytest.mark.parametrize("backend", BACKENDS)
def test_regression_fp32_alibi_rows_before_keys_paged(backend):
    """Regression (session 68): fp32 ALiBi on query rows that sit before every key (240 queries
    over 17 keys, 60 over 40; slopes up to 8, so biases of hundreds of units). The Triton paged
    kernel kept the plain bias: out / lse read 2.2 / 2.1x PyTorch's error over four draws (the
    interpreter). It now measures the bias from the rows' anchors, as the other prefill kernels
    (flashtriton/alibi_anchor.py), and moves the lse back before the store: 0.03 / 0.55x."""
    slopes = 4.0 * torch.tensor([[1.0, 0.5, 0.25, 0.125], [0.75, 1.0, 0.3, 2.0]], device=DEVICE)
    for seed in range(4):
        torch.manual_seed(seed)
        _check_paged(backend, [240, 60], [17, 40], (4, 2), 32, torch.float32, 16, dict(alibi=slopes),
                     lse_floor=True)


@pytest.mark.parametrize("backend", kernel_backends())
def test_varlen_paged_bitwise_repeatable(backend):
    (q, k, v), varlen = rand_varlen([40, 17], [60, 33], 4, 2, 64, torch.bfloat16, DEVICE)
    k_cache, v_cache, table = paged_cache(k, v, [60, 33], 16)
    with flashtriton.use_backend(backend):
        first = flash_attn_varlen_func(q, k_cache, v_cache, *varlen, causal=True, block_table=table)
        again = flash_attn_varlen_func(q, k_cache, v_cache, *varlen, causal=True, block_table=table)
    assert torch.equal(first, again)


@pytest.mark.parametrize("backend", kernel_backends())
def test_varlen_paged_rows_without_keys_give_zero(backend):
    """A window that leaves some rows no key: those rows are 0 (never NaN), lse +inf, as
    in the unpaged varlen forward."""
    (q, k, v), varlen = rand_varlen([9, 5], [3, 4], 2, 1, 32, torch.float16, DEVICE)
    k_cache, v_cache, table = paged_cache(k, v, [3, 4], 4)
    with flashtriton.use_backend(backend):
        out = flash_attn_varlen_func(q, k_cache, v_cache, *varlen, window_size=(0, 0), block_table=table)
    # bottom-right: in sequence 0 query i sits on key i - 6; rows 0-5 see no key
    assert not out.isnan().any()
    assert torch.equal(out[:6], torch.zeros_like(out[:6]))
    assert (out[6:9].abs().sum(dim=(1, 2)) > 0).all()


@pytest.mark.parametrize("backend", BACKENDS)
def test_varlen_paged_backward_raises(backend):
    """Forward-only, as in flash-attn: inputs that require grad run the forward; a backward
    through it raises NotImplementedError."""
    (q, k, v), varlen = rand_varlen([17, 5], [20, 9], 4, 2, 32, torch.float16, DEVICE)
    k_cache, v_cache, table = paged_cache(k, v, [20, 9], 8)
    q.requires_grad_(True)
    with flashtriton.use_backend(backend):
        out = flash_attn_varlen_func(q, k_cache, v_cache, *varlen, block_table=table)
        with torch.no_grad():
            plain = flash_attn_varlen_func(q, k_cache, v_cache, *varlen, block_table=table)
    assert torch.equal(out.detach(), plain)
    with pytest.raises(NotImplementedError, match="block_table: the backward pass is not implemented"):
        out.sum().backward()


def _inputs(page=8, lens_q=(17, 5), lens_k=(20, 9)):
    (q, k, v), varlen = rand_varlen(list(lens_q), list(lens_k), 4, 2, 32, torch.float16, DEVICE)
    k_cache, v_cache, table = paged_cache(k, v, list(lens_k), page)
    return q, k_cache, v_cache, table, varlen


def test_varlen_paged_dropout_not_implemented(no_launch):
    q, kc, vc, table, varlen = _inputs()
    with pytest.raises(NotImplementedError, match="dropout_p > 0"):
        flash_attn_varlen_func(q, kc, vc, *varlen, dropout_p=0.1, block_table=table)


@pytest.fixture
def no_launch(monkeypatch):
    """Every backend's paged forward replaced by a tripwire: reaching one fails the test."""
    def tripwire(*args, **kwargs):
        raise AssertionError("a backend was called: validation did not stop the bad input")
    for name in BACKENDS:
        monkeypatch.setattr(flashtriton.backends.get(name), "fwd_paged", tripwire)


@pytest.mark.parametrize("make,exc,match", [
    (lambda q, kc, vc, t, vl: (q, kc, vc, t.long(), vl), TypeError, "block_table: dtype must be int32"),
    (lambda q, kc, vc, t, vl: (q, kc, vc, t[:1], vl), ValueError, r"block_table: shape must be \(batch"),
    (lambda q, kc, vc, t, vl: (q, kc[:, :6], vc[:, :6], t, vl), ValueError, "power of two"),
    (lambda q, kc, vc, t, vl: (q, kc[0], vc[0], t, vl), ValueError, "k: with block_table, expected 4 dims"),
    (lambda q, kc, vc, t, vl: (q, kc, vc[..., :16], t, vl), ValueError, "v: shape"),
    (lambda q, kc, vc, t, vl: (q, kc, vc, t, vl[:3] + (5,)), ValueError, "max_seqlen_k: 5 is less than"),
    (lambda q, kc, vc, t, vl: (q, kc, vc, t, (vl[0], vl[1] + 1) + vl[2:]), ValueError,
     "cu_seqlens_k: must start at 0"),
    (lambda q, kc, vc, t, vl: (q, kc, vc, t, (vl[0], vl[1].flip(0)) + vl[2:]), ValueError,
     "cu_seqlens_k: must start at 0"),
    (lambda q, kc, vc, t, vl: (q, kc, vc, t[:, :2], (vl[0], torch.tensor([0, 20, 40], dtype=torch.int32,
                                                                          device=DEVICE), 17, 20)),
     ValueError, "more than its block_table row holds"),
    (lambda q, kc, vc, t, vl: (q, kc, vc, t.masked_fill(t == t[0, 1], kc.shape[0]), vl), ValueError,
     r"block_table: entry \[0, 1\] is \d+; used entries must be block indices"),
    (lambda q, kc, vc, t, vl: (q, kc, vc, t.masked_fill(t == t[1, 0], -3), vl), ValueError,
     r"block_table: entry \[1, 0\] is -3"),
    (lambda q, kc, vc, t, vl: (q, kc.float(), vc.float(), t, vl), TypeError, "k: dtype"),
    (lambda q, kc, vc, t, vl: (q[..., :16], kc, vc, t, vl), ValueError, "k: head dim"),
])
def test_varlen_paged_bad_input(no_launch, make, exc, match):
    """Each broken rule raises before any backend runs, naming the argument."""
    q, kc, vc, table, varlen = make(*_inputs())
    with pytest.raises(exc, match=match):
        flash_attn_varlen_func(q, kc, vc, *varlen, block_table=table)


def test_varlen_paged_unused_table_entries_are_not_checked():
    """Entries past a sequence's pages may hold anything (paged_cache writes -1 there)."""
    q, kc, vc, table, varlen = _inputs(page=4, lens_k=(20, 3))
    assert (table[1, 1:] == -1).all()
    out = flash_attn_varlen_func(q, kc, vc, *varlen, block_table=table)
    assert not out.isnan().any()


def test_gather_kv_matches_the_packed_keys():
    (q, k, v), varlen = rand_varlen([3, 4, 2], [13, 0, 40], 2, 2, 16, torch.float32, DEVICE)
    k_cache, v_cache, table = paged_cache(k, v, [13, 0, 40], 8)
    kg, vg = paged.gather_kv(k_cache, v_cache, table, varlen[1])
    assert torch.equal(kg, k) and torch.equal(vg, v)


def test_varlen_paged_compiles_fullgraph():
    """torch.compile traces the paged call through its registered op (fake kernel) without a
    graph break; same result as eager."""
    q, kc, vc, table, varlen = _inputs()
    cu_q, cu_k, mq, mk = varlen

    def f(q, kc, vc, table, cu_q, cu_k):
        return flash_attn_varlen_func(q, kc, vc, cu_q, cu_k, mq, mk, causal=True, block_table=table)

    with flashtriton.use_backend("reference"):
        eager = f(q, kc, vc, table, cu_q, cu_k)
        compiled = torch.compile(f, fullgraph=True, backend="eager")(q, kc, vc, table, cu_q, cu_k)
    assert torch.equal(eager, compiled)


@pytest.mark.skipif("triton" not in kernel_backends(), reason="the Triton launcher's load paths")
@pytest.mark.parametrize("tma", [True, False])
def test_varlen_paged_tma_and_pointer_loads(monkeypatch, tma):
    """Pages of at least a tile take TMA loads (forward_paged.PAGED_KV_TMA, session 49), smaller ones pointer loads;
    with the switch off, pointer loads everywhere. Both against float64 (NaN in every unused cache row)."""
    from flashtriton.launchers import forward_paged, plans
    monkeypatch.setattr(forward_paged, "PAGED_KV_TMA", tma)
    seen = spy(monkeypatch, plans, "launch", lambda kernel, grid, *a, **kw: kw.get("KV_TMA"))
    for page in (64, 8):
        _check_paged("triton", [40, 17], [70, 33], (4, 2), 64, torch.bfloat16, page, dict(causal=True))
    assert seen == [tma, False], seen
