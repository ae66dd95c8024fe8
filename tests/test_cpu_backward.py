"""The CPU backward's own machinery (cpu/backward.py): the (sequence, KV head) items run
on one Python thread per intra-op thread (config.BWD_HEAD_THREADS), the folded lse /
delta columns, bf16 products with bf16 score tiles, and the float32 engine's strided
products (engine.mm / addmm_). Gradients are held to the suite's criterion against
float64 (tests/helpers.py); the shared suite (test_prefill.py, test_masks.py, ...)
covers the features on small shapes, test_cpu_prefill.py many tiles."""
import math
import threading

import pytest
import torch

from flashtriton import backends

from conftest import DEVICE
from helpers import assert_close, check_attention, rand_qkv, rand_varlen, reference_pair

pytestmark = pytest.mark.skipif(not backends.cpu_available() or DEVICE != "cpu", reason="CPU backend tests")

if backends.cpu_available():
    import flashtriton
    from flashtriton.cpu import backward, config, engine, native_bwd


def _grads(q, k, v, dout, **kw):
    q, k, v = (t.detach().requires_grad_(True) for t in (q, k, v))
    with flashtriton.use_backend("cpu"):
        out = flashtriton.flash_attn_func(q, k, v, **kw)
        return torch.autograd.grad(out, (q, k, v), dout)


@pytest.fixture(autouse=True)
def ops_path(monkeypatch):
    """This file tests the torch-ops backward's machinery: float32 / fp16 would take the compiled backward
    (native_backward.py, config.BWD_PATH = "auto"; tests/test_cpu_backward_compiled.py has its tests)."""
    monkeypatch.setattr(config, "BWD_PATH", "ops")


@pytest.fixture
def small_tiles(monkeypatch):
    monkeypatch.setattr(config, "BWD_KEYS", 32)
    monkeypatch.setattr(config, "BWD_ROWS", 48)


@pytest.mark.parametrize("fused", [False, True])
@pytest.mark.parametrize("threads", [False, True])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_head_threads_meet_the_criterion(small_tiles, monkeypatch, threads, dtype, fused):
    """Both schedules (heads on threads, or ops spread over the threads), with and
    without the compiled pass (native_bwd.py), GQA with a group of 3, causal, awkward
    lengths and head dim, several key tiles and row blocks."""
    monkeypatch.setattr(config, "BWD_HEAD_THREADS", threads)
    monkeypatch.setattr(config, "BWD_FUSED", fused)
    q, k, v = rand_qkv(2, 113, 97, 6, 2, 80, dtype, DEVICE)
    check_attention("cpu", q, k, v, causal=True)


def test_head_threads_are_bitwise_repeatable(small_tiles, monkeypatch):
    """Which thread takes which head must not change a bit: every op of a head runs
    single-threaded on the thread that took it."""
    monkeypatch.setattr(config, "BWD_HEAD_THREADS", True)
    q, k, v = rand_qkv(1, 70, 90, 8, 8, 64, torch.bfloat16, DEVICE)
    dout = torch.randn(1, 70, 8, 64, dtype=torch.bfloat16)
    first = _grads(q, k, v, dout, window_size=(20, 5))
    for _ in range(5):
        again = _grads(q, k, v, dout, window_size=(20, 5))
        assert all(torch.equal(a.view(torch.int16), b.view(torch.int16)) for a, b in zip(first, again))


def test_worker_error_reaches_the_caller(monkeypatch):
    """An exception in a worker thread is raised by the calling thread, and the
    caller's intra-op thread count is left alone (workers set their own)."""
    monkeypatch.setattr(config, "BWD_HEAD_THREADS", True)
    real_threads = torch.get_num_threads
    before = real_threads()
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)   # two workers even on one core
    seen = []

    def boom(*a, **kw):
        seen.append(threading.current_thread().name)
        raise ValueError("boom in a worker")

    monkeypatch.setattr(backward, "_key_tile", boom)
    q, k, v = rand_qkv(1, 16, 16, 4, 4, 32, torch.float32, DEVICE, requires_grad=True)
    with flashtriton.use_backend("cpu"):
        out = flashtriton.flash_attn_func(q, k, v)
        with pytest.raises(ValueError, match="boom in a worker"):
            torch.autograd.grad(out, (q, k, v), torch.randn_like(out))
    assert seen and all(name.startswith("flashtriton-cpu-bwd-") for name in seen)
    assert real_threads() == before


@pytest.mark.parametrize("threads", [False, True])
def test_backward_under_grad_mode(monkeypatch, threads):
    """Bug found on the way (named test): grad mode is thread-local, so worker threads
    start with grad enabled while autograd runs a backward with it disabled, and the
    out= ops refused tensors that require grad; with create_graph=True the caller's
    thread has grad enabled too. The backend's backward is a kernel (as the Triton
    backend's): it runs under no_grad on every thread. A direct call with grad enabled
    and create_graph=True both give the default call's gradients."""
    monkeypatch.setattr(config, "BWD_HEAD_THREADS", threads)
    q, k, v = rand_qkv(1, 40, 40, 4, 2, 32, torch.bfloat16, DEVICE)
    dout = torch.randn(1, 40, 4, 32, dtype=torch.bfloat16)
    ref = _grads(q, k, v, dout)
    from flashtriton.cpu import fwd
    from flashtriton.launchers.prefill import AttnParams
    params = AttnParams(32 ** -0.5)
    out, lse = fwd(q, k, v, params)
    args = [t.detach().requires_grad_(True) for t in (q, k, v, out, lse)]
    with torch.enable_grad():
        got = backward.bwd(dout, *args, params)
    assert all(torch.equal(a, b) for a, b in zip(ref, got))
    qg, kg, vg = (t.detach().requires_grad_(True) for t in (q, k, v))
    with flashtriton.use_backend("cpu"):
        o = flashtriton.flash_attn_func(qg, kg, vg)
        got = torch.autograd.grad(o, (qg, kg, vg), dout, create_graph=True)
    assert all(torch.equal(a, b) for a, b in zip(ref, got))


def test_rows_without_keys_fold_lse_inf():
    """float32 folds -lse into the score product: a row that sees no key has lse = +inf,
    so its scores are -inf (P = 0) and its gradients 0, never NaN (0 * inf)."""
    q, k, v = rand_qkv(1, 60, 30, 2, 1, 32, torch.float32, DEVICE)
    res = check_attention("cpu", q, k, v, window_size=(3, 0))
    assert torch.isinf(res["lse"][:, :, :27]).all()


def test_bf16_delta_fold_keeps_cancellation_small():
    """V with identical rows: dP_ij = dO_i . v for every key, so dS = P (dP - delta) = 0
    and dQ = dK = 0 exactly. The bf16 path forms dP - delta inside one product (delta
    split into two bf16 numbers), so only the tiny difference is rounded: dQ / dK stay
    far below the bf16 PyTorch math's error, which rounds dP first."""
    q, k, _ = rand_qkv(1, 64, 64, 2, 2, 64, torch.bfloat16, DEVICE)
    v = torch.randn(1, 1, 2, 64, dtype=torch.bfloat16).expand(1, 64, 2, 64).contiguous()
    dout = torch.randn(1, 64, 2, 64, dtype=torch.bfloat16)
    dq, dk, _ = _grads(q, k, v, dout)
    assert dq.float().abs().max() < 2e-2 and dk.float().abs().max() < 2e-2


@pytest.mark.parametrize("mkl", [True, False])
def test_engine_strided_products(monkeypatch, mkl):
    """engine.mm / addmm_ on the backward's operand layouts (transposed views, row
    slices of wider tensors), on both engines, against float64."""
    if not mkl and engine._LINEAR is None:
        pytest.skip("no oneDNN op in this torch")
    monkeypatch.setattr(engine, "_MKL_FAST", mkl)
    g = torch.Generator().manual_seed(5)
    a = torch.randn(70, 41, generator=g)[:, :33]          # row slice of a wider tensor
    b = torch.randn(50, 33, generator=g).t()               # transposed view
    ref = a.double() @ b.double()
    got = engine.mm(a, b, out=torch.empty(70, 50))
    assert (got.double() - ref).abs().max() < 1e-4
    c = torch.randn(50, 70, generator=g)
    c0 = c.double().clone()
    engine.addmm_(c, b.t(), a.t())                         # c += (a @ b)^T
    assert (c.double() - (c0 + ref.t())).abs().max() < 1e-4


def test_varlen_head_threads(small_tiles, monkeypatch):
    monkeypatch.setattr(config, "BWD_HEAD_THREADS", True)
    (q, k, v), varlen = rand_varlen([17, 0, 113, 1], [40, 12, 70, 0], 4, 2, 40, torch.bfloat16, DEVICE)
    check_attention("cpu", q, k, v, varlen=varlen, causal=True)


def _lib_or_skip():
    lib = native_bwd.load()
    if lib is None:
        pytest.skip("the compiled backward pass does not build here")
    return lib


@pytest.mark.parametrize("variant", [(), ("FT_NO_BF16CVT",), ("FT_NO_VEC",)])
@pytest.mark.parametrize("shape", [(300, 257), (5, 3), (64, 1024), (1, 16)])
def test_fused_bf16_pass_rounds_like_float64(shape, variant):
    """p16 = bf16(exp2(c s + nlse2)), ds16 = bf16(p y) against the float64 values rounded
    once: equal but for rare ties (the polynomial's < 2e-7 error) and p < 2^-127 (flushed
    to 0); -inf / very negative scores give exactly 0, NaN stays NaN; vector body and
    scalar tail alike; also the builds of CPUs without AVX512-BF16 / AVX-512."""
    lib = _lib_or_skip()
    if variant:
        lib = native_bwd.load_variant(*variant)
    w, r = shape
    g = torch.Generator().manual_seed(11)
    s = (torch.randn(w, r, generator=g) * 8).bfloat16()
    y = torch.randn(w, r, generator=g).bfloat16()
    nl = -(torch.rand(r, generator=g) * 10 + 5)
    s[0, :min(r, 20)] = float("-inf")
    if w > 2:
        s[1, r - 1] = float("nan")
        s[2, :] = -1000.0
    p16 = torch.empty(w, r, dtype=torch.bfloat16)
    ds16 = torch.empty_like(p16)
    native_bwd.p_ds_bf16(lib, s, y, nl, 0.18, p16, ds16, 2)
    p = torch.exp2(s.double() * 0.18 + nl.double())
    for got, want in ((p16, p.to(torch.bfloat16)), (ds16, (p * y.double()).to(torch.bfloat16))):
        nan = got.isnan()
        assert torch.equal(nan, want.isnan())
        differ = (got.view(torch.int16) != want.view(torch.int16)) & ~nan & (want.double().abs() >= 2.0 ** -126)
        assert differ.sum().item() <= max(2, w * r // 5000)
        # below 2^-127 the pass flushes p to 0 (bf16 would keep a few subnormal bits)
        assert ((got.double() - want.double()).abs() <= 2 ** -7 * want.double().abs() + 1e-37)[~nan].all()  # 1 ulp
    assert (p16[0, :min(r, 20)] == 0).all() and (w <= 2 or (p16[2] == 0).all())


@pytest.mark.parametrize("variant", [(), ("FT_NO_VEC",)])
def test_fused_f32_pass(variant):
    lib = _lib_or_skip()
    if variant:
        lib = native_bwd.load_variant(*variant)
    g = torch.Generator().manual_seed(12)
    x = torch.rand(33, 70, generator=g) * -40
    x[0, :3] = float("-inf")
    x[1, 5] = float("nan")
    y = torch.randn(33, 70, generator=g)
    want_p = torch.exp2(x.double())
    want_ds = want_p * y.double()
    native_bwd.p_ds_f32(lib, x, y, 1)
    fin = torch.isfinite(want_p)
    assert ((x.double() - want_p).abs() <= 3e-7 * want_p.abs())[fin].all()
    assert ((y.double() - want_ds).abs() <= 3e-7 * want_ds.abs() + 1e-30)[fin].all()
    assert (x[0, :3] == 0).all() and x[1, 5].isnan() and y[1, 5].isnan()


def test_more_threads_than_items(small_tiles, monkeypatch):
    """Two items and four intra-op threads: two workers with two intra-op threads each
    (backward._run), and the same bits on every repeat."""
    monkeypatch.setattr(config, "BWD_HEAD_THREADS", True)
    seen = []
    real_set = torch.set_num_threads
    monkeypatch.setattr(torch, "get_num_threads", lambda: 4)
    monkeypatch.setattr(torch, "set_num_threads", lambda n: seen.append(n) or real_set(n))
    q, k, v = rand_qkv(1, 90, 90, 4, 2, 64, torch.bfloat16, DEVICE)
    check_attention("cpu", q, k, v, causal=True)
    assert seen and set(seen) == {2}
    dout = torch.randn(1, 90, 4, 64, dtype=torch.bfloat16)
    first = _grads(q, k, v, dout)
    again = _grads(q, k, v, dout)
    assert all(torch.equal(a.view(torch.int16), b.view(torch.int16)) for a, b in zip(first, again))


@pytest.mark.parametrize("softcap", [0.0, 5.0])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_regression_scale_zero(small_tiles, dtype, softcap):
    """Regression (session 35): softmax_scale=0.0 (valid: uniform attention over the visible keys,
    dq = dk = 0) raised ZeroDivisionError in the float32 / fp16 backward, which scaled dK by
    softmax_scale / q_scale with q_scale = 0, and gave NaN dq / dk in bf16, whose compiled pass
    scaled the masked (-inf) scores by 0. Several key tiles and row blocks, causal, GQA."""
    q, k, v = rand_qkv(1, 70, 90, 4, 2, 40, dtype, DEVICE)
    check_attention("cpu", q, k, v, causal=True, softmax_scale=0.0, softcap=softcap)


@pytest.mark.parametrize("causal, window_size", [(True, (-1, -1)), (False, (3, 5))])
def test_regression_negative_scale_masked_bf16(small_tiles, causal, window_size):
    """Regression (session 35): a negative softmax_scale (valid in flash-attn) with any mask (causal,
    a window) gave NaN dq / dk / dv in bf16: the backward's compiled pass masks the unscaled bf16
    scores with -inf and then multiplies them by the (negative) scale, making hidden keys +inf.
    Several key tiles and row blocks, GQA."""
    q, k, v = rand_qkv(1, 70, 90, 4, 2, 40, torch.bfloat16, DEVICE)
    check_attention("cpu", q, k, v, causal=causal, window_size=window_size, softmax_scale=-0.15)


@pytest.mark.parametrize("fused", [False, True])
@pytest.mark.parametrize("scale, causal, window_size", [(8.0, True, (-1, -1)), (-8.0, False, (-1, -1)),
                                                        (0.5, False, (20, 5)), (0.01, True, (-1, -1))])
def test_regression_bf16_large_logits(small_tiles, monkeypatch, fused, scale, causal, window_size):
    """Regression (session 36): the bf16 backward rounded S^T = k q^T to bf16 before the scale and
    subtracted the forward's lse afterwards, so large logits (|scale * s| in the tens) put P off by
    |scale * s| * 2^-9 in log units, inconsistent with lse: 3.4-7.6x PyTorch's bf16 gradient error
    at scale 5 (4.5x already at 0.5). The product now carries a per-row shift (config.BWD_BF16_SHIFT):
    the rounding meets s - u, near 0 where P is large. Both the compiled pass and the torch-ops
    path; a tiny scale (the shift must not hurt there), GQA, masks, several tiles and row blocks."""
    monkeypatch.setattr(config, "BWD_FUSED", fused)
    q, k, v = rand_qkv(1, 70, 90, 4, 2, 40, torch.bfloat16, DEVICE)
    check_attention("cpu", q, k, v, causal=causal, window_size=window_size, softmax_scale=scale)


def test_bf16_large_logits_fail_without_the_shift(small_tiles, monkeypatch):
    """The A/B of test_regression_bf16_large_logits: with the unshifted product (session 35's) the
    criterion catches scale 8 (12 of 12 random draws failed when written): the test can fail."""
    monkeypatch.setattr(config, "BWD_BF16_SHIFT", False)
    q, k, v = rand_qkv(1, 70, 90, 4, 2, 40, torch.bfloat16, DEVICE)
    with pytest.raises(AssertionError):
        check_attention("cpu", q, k, v, causal=True, softmax_scale=8.0, check_probs=False)


# (shape B, Nq, Nk, H, Hk, D; ALiBi slopes; softmax_scale; the seed of q / k / v): each draw failed the
# criterion before session 66's fix with bf16 products (far_rows: dQ 3.6x PyTorch's error; few_rows: dV 5.1x)
ALIBI_FAR_CASES = {
    "far_rows": ((1, 160, 24, 4, 2, 40), [2.0, 1.0, 0.5, 0.25], None, 100),
    "few_rows": ((1, 2, 257, 4, 2, 64), [0.25, 0.125, 0.0625, 0.03], -0.2, 104),
}


@pytest.mark.parametrize("products", ["bf16", "f32"])
@pytest.mark.parametrize("case", sorted(ALIBI_FAR_CASES))
def test_regression_alibi_far_rows_grads(small_tiles, monkeypatch, products, case):
    """Regression (session 66, found by bench/cpu/s54_cpu_accuracy_fuzz.py): with ALiBi the bf16
    backward's per-row shift u = (lse2 - log2(keys seen)) / q_scale kept the row's bias inside
    lse2, so where every key is far from the row (Nq > Nk, bottom-right aligned: a bias of
    hundreds of log2 units) the bf16 product S^T - u held the bias's magnitude and its rounding
    put P off by up to ~20% (dV 9-90x the criterion's bound with one key, 55x PyTorch's error in the
    sweep; here dQ 3.6x PyTorch's error with 24 keys). And where the bias makes few keys matter
    (Nq << Nk), log2(keys seen) overstated the row's spread (dQ / dK / dV 1.2-1.3x the bound). The
    shift now takes the bias's own log-sum, log2 sum_j 2^bias_j, for the key count
    (backward._log2_alibi_weight): it holds the bias at the row's nearest key, which so leaves u,
    and it counts the keys the bias leaves weight to. Since session 67 the bias of a row before every
    key is also anchored at key 0 (flashtriton/alibi_anchor.py), which keeps its lse small too.
    Both product modes (the float32 one was and stays within it); several tiles and row blocks."""
    monkeypatch.setattr(config, "BF16_PRODUCTS", products)
    shape, slopes, scale, seed = ALIBI_FAR_CASES[case]
    torch.manual_seed(seed)
    q, k, v = rand_qkv(*shape, torch.bfloat16, DEVICE)
    check_attention("cpu", q, k, v, alibi_slopes=torch.tensor(slopes), softmax_scale=scale, seed=seed - 100)


@pytest.mark.parametrize("n_q, n_k, left, right", [(5, 9, -1, -1), (9, 5, -1, 0), (7, 7, 2, 1), (3, 10, -1, 2),
                                                   (6, 2, -1, -1), (4, 12, 3, -1), (3, 4, 0, 0), (300, 3, -1, -1),
                                                   (2, 900, -1, -1)])
def test_alibi_weight_matches_sums(n_q, n_k, left, right):
    """backward._log2_alibi_weight (closed form) against direct sums over each row's visible keys of
    2^(slope |max(i + off, 0) - j|) (slope = -ALiBi slope * log2 e; the anchor of
    flashtriton/alibi_anchor.py), in float64 relative to the row's largest
    term: a zero slope gives log2(keys seen) (_log2_visible); 900 keys reach biases of ~-2,700 log2
    units with the usual sign (2^bias underflows float64 there) and ~+360 with the other (a negative
    ALiBi slope: the weight sits at the farthest keys); 300 rows over 3 keys are anchored at key 0."""
    band = backward.Band(n_q, n_k, left, right)
    slopes = torch.tensor([-0.7, 0.0, -3.0, 0.4]).view(1, 4, 1)     # -slope * log2 e
    got = backward._log2_alibi_weight(band, slopes).view(n_q, 4)
    for i in range(n_q):
        p = i + n_k - n_q
        seen = [abs(max(p, 0) - j) for j in range(n_k) if (left < 0 or j >= p - left) and (right < 0 or j <= p + right)]
        for g in range(4):
            t = slopes[0, g, 0].item()
            if not seen:
                want = 0.0
            else:
                top = max(t * dist for dist in seen)
                want = top + math.log2(sum(2.0 ** (t * dist - top) for dist in seen))
            assert abs(got[i, g].item() - want) <= 1e-6 * max(1.0, abs(want)), (i, g, got[i, g].item(), want)
    assert torch.equal(got[:, 1], backward._log2_visible(band, 1).view(-1))


def test_regression_alibi_negative_slopes_softcap(small_tiles, monkeypatch):
    """Regression (session 66, found while testing the fix above): the first _log2_alibi_weight counted
    the keys of a negative ALiBi slope (a bias growing with distance) as unbiased, so with softcap the
    shift's tanh argument (lse2 - L) held the far keys' bias, saturated the clamp and put u far from
    every score: dQ 6.5x PyTorch's bf16 error (softcap 20, slopes -0.3 / 0.2 / -0.05 / 0, Nq = 5,
    Nk = 90, causal), where the unshifted session-65 code met the criterion. The weight is now the
    true log-sum for either sign."""
    monkeypatch.setattr(config, "BF16_PRODUCTS", "bf16")
    torch.manual_seed(9)
    q, k, v = rand_qkv(1, 5, 90, 4, 2, 64, torch.bfloat16, DEVICE)
    check_attention("cpu", q, k, v, alibi_slopes=torch.tensor([-0.3, 0.2, -0.05, 0.0]), softcap=20.0, causal=True,
                    seed=9)


def _one_key_softcap_dv(monkeypatch, shift):
    """dV of rows that each see one key (Nk = 1: P = 1 exactly, dV = the sum of dO) under softcap 30
    at scale 1, bf16 products, against the criterion (dQ / dK are 0 there: PyTorch's error too, the
    known one-key limit, README)."""
    monkeypatch.setattr(config, "BF16_PRODUCTS", "bf16")
    monkeypatch.setattr(config, "BWD_BF16_SHIFT", shift)
    torch.manual_seed(7)
    q, k, v = rand_qkv(1, 64, 1, 4, 2, 40, torch.bfloat16, DEVICE)
    dout = torch.randn_like(q)
    dq, dk, dv = _grads(q, k, v, dout, softcap=30.0, softmax_scale=1.0)
    truth, lowp = reference_pair(q, k, v, dout, softmax_scale=1.0, softcap=30.0)
    assert_close("dv", dv, truth["dv"], lowp["dv"], 3, torch.bfloat16)


def test_regression_bf16_softcap_shift(small_tiles, monkeypatch):
    """Regression (session 66): with softcap the bf16 backward had no per-row shift (tanh needs s
    itself), so S^T was rounded to bf16 at |q_scale s| (~30 log2 units at softcap 30, scale 1):
    a single key's P = 1 came out off by ~3%, dV 2.8-3.0x the criterion's bound. The shift now
    inverts the tanh (u = atanh((lse2 - log2 keys) / (softcap log2 e)) / q_scale) and the float32
    pass adds q_scale u back before the tanh."""
    _one_key_softcap_dv(monkeypatch, True)


def test_bf16_softcap_fails_without_the_shift(small_tiles, monkeypatch):
    """The A/B of test_regression_bf16_softcap_shift: the same draw without the shift fails."""
    with pytest.raises(AssertionError, match="dv: error"):
        _one_key_softcap_dv(monkeypatch, False)


def test_float32_gradients_accumulate_in_place(small_tiles):
    """The float32 backward accumulates dK / dV straight into dk / dv's strided rows (beta = 0 for
    a key tile's first query block): the poisoned (NaN) gradient buffers (conftest) must be fully
    overwritten, keys that no query sees (before every query's window) get exact zeros, and the
    result meets the criterion."""
    q, k, v = rand_qkv(1, 50, 130, 4, 4, 48, torch.float32, DEVICE)
    res = check_attention("cpu", q, k, v, window_size=(10, 0))
    dk, dv = res["dk"], res["dv"]
    assert not (dk.isnan().any() or dv.isnan().any())
    assert dk[0, :60].abs().max() == 0 and dv[0, :60].abs().max() == 0   # keys 0..69 precede every window
