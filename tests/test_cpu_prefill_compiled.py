"""The CPU backend's compiled forward (flashtriton/cpu/native_prefill.py, the default
prefill path where it builds, config.FWD_PATH = "auto"): against the float64
reference with the suite's criterion on awkward shapes (head dims 40 / 80 / 96 / 192,
sequence lengths 1 / 17 / 113 / 1023, Nq != Nk, GQA / MQA, causal and windows, rows
that see no key), against the torch-ops loop, strided inputs, bitwise repeatability
across runs and thread counts, the bound on its scratch memory, and path selection:
features it does not take go to the torch-ops loop, "ops" never compiles, a machine
without a C compiler falls back with a warning under "auto" and raises under
"compiled", and a CPU without AVX512-BF16 runs bf16 on the torch-ops loop.
"""
import pytest
import torch

from flashtriton import backends, reference

from conftest import DEVICE
from helpers import check_attention, cpu_forward, prefill_kernel_available, rand_qkv, rand_varlen

pytestmark = pytest.mark.skipif(not backends.cpu_available() or DEVICE != "cpu", reason="CPU backend tests")

if backends.cpu_available():
    from flashtriton.cpu import config, native, native_prefill


needs_kernel = pytest.mark.skipif(backends.cpu_available() and not prefill_kernel_available(),
                                  reason="the compiled forward does not build / run on this machine")


@pytest.fixture
def calls(monkeypatch):
    """Counts the sequences that ran through the compiled forward."""
    seen = []
    real = native_prefill.forward_sequence
    monkeypatch.setattr(native_prefill, "forward_sequence", lambda *a: seen.append(a[1].index) or real(*a))
    return seen


@pytest.fixture
def compiled(monkeypatch):
    """The AVX-512 kernel (the AMX one, bf16 on AMX CPUs, has tests/test_cpu_prefill_amx.py)."""
    monkeypatch.setattr(config, "FWD_PATH", "compiled")
    monkeypatch.setattr(config, "FWD_AMX", "off")


@needs_kernel
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("d", [40, 80, 96, 192])
@pytest.mark.parametrize("n", [1, 17, 113, 1023])
def test_awkward_shapes(compiled, calls, dtype, d, n, monkeypatch):
    """Head dims that are not multiples of the 32-column blocks, lengths around the
    8-row / 32-key / 64-row / 512-key blocks; causal over Nq != Nk (rows that see no
    key when Nq > Nk), GQA. (One-row calls take the decode kernel since session 60,
    cpu/config.ONE_ROW_DECODE; this test keeps them on the compiled forward, which
    one-row calls with dropout still take.)"""
    from flashtriton.cpu import config
    monkeypatch.setattr(config, "ONE_ROW_DECODE", False)
    nk = {1: 5, 17: 17, 113: 300, 1023: 700}[n]
    q, k, v = rand_qkv(1, n, nk, 6, 2, d, dtype, DEVICE)
    check_attention("cpu", q, k, v, causal=True, grads=False)
    check_attention("cpu", q, k, v, grads=False)
    assert len(calls) == 2


@needs_kernel
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("d, heads", [(8, (4, 2)), (256, (4, 2)), (64, (32, 2)), (128, (16, 1))])
def test_head_dim_limits_and_large_groups(compiled, calls, dtype, d, heads):
    """The smallest and largest head dims the API takes; groups of 16 (a 512-row item
    holds 32 query positions) and MQA."""
    q, k, v = rand_qkv(2, 150, 290, *heads, d, dtype, DEVICE)
    check_attention("cpu", q, k, v, causal=True, grads=False)
    check_attention("cpu", q, k, v, window_size=(40, 7), grads=False)
    assert len(calls) == 4


@needs_kernel
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("window", [(5, 3), (0, 0), (20, -1), (-1, 7), (300, 0), (3, 200)])
def test_windows_and_gqa(compiled, calls, dtype, window):
    for heads in [(4, 4), (6, 2), (4, 1)]:
        q, k, v = rand_qkv(2, 333, 270, *heads, 64, dtype, DEVICE)
        check_attention("cpu", q, k, v, window_size=window, grads=False)
    assert len(calls) == 6


@needs_kernel
def test_rows_without_keys_and_empty_sequences(compiled, calls):
    """Rows that see no key give out 0, lse +inf; empty sequences (varlen) give nothing."""
    q, k, v = rand_qkv(1, 90, 40, 2, 1, 32, torch.bfloat16, DEVICE)
    res = check_attention("cpu", q, k, v, window_size=(3, 0), grads=False)
    assert torch.all(res["out"][:, :47] == 0) and torch.all(torch.isinf(res["lse"][:, :, :47]))
    (q, k, v), varlen = rand_varlen([33, 0, 700, 1], [40, 12, 650, 0], 4, 2, 32, torch.float32, DEVICE)
    check_attention("cpu", q, k, v, varlen=varlen, causal=True, grads=False)
    assert calls


@needs_kernel
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_matches_torch_ops_path(monkeypatch, dtype):
    """The two forward paths agree to within their rounding (bf16: P rounded to bf16 in
    both; the ops path also rounds each tile's P @ V to bf16)."""
    q, k, v = rand_qkv(2, 1100, 1100, 8, 2, 128, dtype, DEVICE)
    monkeypatch.setattr(config, "FWD_AMX", "off")
    res = {}
    for path in ("compiled", "ops"):
        monkeypatch.setattr(config, "FWD_PATH", path)
        res[path] = cpu_forward(q, k, v, causal=True)
    tol = 2e-2 if dtype == torch.bfloat16 else 2e-5
    assert (res["compiled"][0].float() - res["ops"][0].float()).abs().max().item() < tol
    assert (res["compiled"][1] - res["ops"][1]).abs().max().item() < 1e-4


@needs_kernel
def test_large_logits_and_late_maxima(compiled):
    """Keys in a late tile score far above earlier ones (and the reverse): the kernel's
    online softmax rescales (no lazy step to fall back from)."""
    q, k, v = rand_qkv(1, 700, 900, 2, 2, 32, torch.float32, DEVICE)
    k[:, 600:] *= 60.0
    check_attention("cpu", q * 4.0, k, v, grads=False)
    k2 = k.clone()
    k2[:, :16] *= 60.0
    k2[:, 600:] /= 60.0
    check_attention("cpu", q * 4.0, k2, v, causal=True, grads=False)


@needs_kernel
def test_nan_only_where_visible(compiled):
    """A NaN key that only the last query sees stays out of every other row."""
    q, k, v = rand_qkv(1, 600, 600, 2, 2, 32, torch.float32, DEVICE)
    k[:, -1] = float("nan")
    out, _ = cpu_forward(q, k, v, causal=True)
    ref = reference.attention(q.double(), k.double(), v.double(), softmax_scale=32 ** -0.5, window_right=0)[0]
    assert torch.isnan(out[:, -1]).all()
    assert torch.isfinite(out[:, :-1]).all()
    assert (out[:, :-1].double() - ref[:, :-1]).abs().max().item() <= 1e-5


@needs_kernel
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_strided_inputs(compiled, calls, dtype):
    """(B, H, N, D) tensors transposed to (B, N, H, D) views are read in place."""
    q, k, v = (torch.randn(2, 4, 300, 64, dtype=dtype).transpose(1, 2) for _ in range(3))
    assert not q.is_contiguous()
    out, lse = cpu_forward(q, k, v, causal=True)
    out2, lse2 = cpu_forward(q.contiguous(), k.contiguous(), v.contiguous(), causal=True)
    assert torch.equal(out, out2) and torch.equal(lse, lse2)
    assert len(calls) == 4


@needs_kernel
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_bitwise_repeatable_across_threads(compiled, dtype):
    """Each row's result depends only on its data and the fixed tile order."""
    q, k, v = rand_qkv(1, 1500, 1500, 4, 2, 64, dtype, DEVICE)
    a = cpu_forward(q, k, v, causal=True)
    b = cpu_forward(q, k, v, causal=True)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        c = cpu_forward(q, k, v, causal=True)
        torch.set_num_threads(3)
        d = cpu_forward(q, k, v, causal=True)
    finally:
        torch.set_num_threads(threads)
    for x in (b, c, d):
        assert torch.equal(a[0], x[0]) and torch.equal(a[1], x[1])


@needs_kernel
def test_scratch_does_not_grow_with_n(compiled):
    """Extra memory is per-thread scratch for one item (a 512-row block, 512-key
    chunks): the same for N = 256 and N = 8192."""
    lib = native_prefill.load()
    assert lib.ft_prefill_scratch(128, 512) < 4 * 2 ** 20
    sizes = []
    for n in (256, 8192):
        native_prefill._local.buf = None
        q, k, v = rand_qkv(1, n, n, 1, 1, 128, torch.float32, DEVICE)
        cpu_forward(q, k, v, causal=True)
        sizes.append(native_prefill._local.buf.numel())
    assert sizes[0] == sizes[1]


@needs_kernel
def test_unsupported_features_take_ops_path(monkeypatch, calls):
    """Dropout and float32 / fp16 with softcap or ALiBi run the torch-ops loop (by feature, also
    under "compiled"); results stay exact. (bf16 softcap and ALiBi did until session 62:
    test_softcap_alibi; fp16 itself until session 64: test_fp16_inputs.)"""
    monkeypatch.setattr(config, "FWD_PATH", "compiled")
    q, k, v = rand_qkv(1, 200, 200, 4, 2, 32, torch.float16, DEVICE)
    check_attention("cpu", q, k, v, causal=True, softcap=5.0, grads=False)
    check_attention("cpu", q, k, v, alibi_slopes=torch.rand(4), grads=False)
    q, k, v = rand_qkv(1, 200, 200, 4, 2, 32, torch.bfloat16, DEVICE)
    check_attention("cpu", q, k, v, causal=True, dropout_p=0.2, seed=1, grads=False)
    q, k, v = rand_qkv(1, 200, 200, 4, 2, 32, torch.float32, DEVICE)
    check_attention("cpu", q, k, v, causal=True, softcap=5.0, grads=False)
    check_attention("cpu", q, k, v, alibi_slopes=torch.rand(4), grads=False)
    assert not calls


@needs_kernel
@pytest.mark.parametrize("d", [40, 128, 256])
def test_fp16_inputs(compiled, calls, d):
    """Session 64: fp16 q, k, v run the float32 kernel on values widened where they are read (exact: fp16 x fp16
    products are exact in float32), out rounded to fp16. Against the reference on causal Nq != Nk (rows without keys),
    windows, GQA, varlen; out and lse bitwise the float32 kernel's on the widened inputs (out rounded to fp16 after);
    strided (B, H, N, D) views read in place, bitwise the contiguous result."""
    if not native_prefill.load().ft_prefill_caps() & 8:
        pytest.skip("built without _Float16")
    torch.manual_seed(d)
    q, k, v = rand_qkv(2, 113, 90, 6, 2, d, torch.float16, DEVICE)
    check_attention("cpu", q, k, v, causal=True, grads=False)
    check_attention("cpu", q, k, v, window_size=(20, 5), grads=False)
    (qv, kv, vv), varlen = rand_varlen([33, 0, 300], [40, 12, 250], 4, 1, d, torch.float16, DEVICE)
    check_attention("cpu", qv, kv, vv, varlen=varlen, causal=True, grads=False)
    out, lse = cpu_forward(q, k, v, causal=True)
    out32, lse32 = cpu_forward(q.float(), k.float(), v.float(), causal=True)
    assert torch.equal(out, out32.half()) and torch.equal(lse, lse32)
    qs, ks, vs = (torch.randn(2, 4, 300, d, dtype=torch.float16).transpose(1, 2) for _ in range(3))
    a, b = cpu_forward(qs, ks, vs), cpu_forward(qs.contiguous(), ks.contiguous(), vs.contiguous())
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert len(calls) == 15      # sequences: 2 + 2 + 3 (varlen) + 2 + 2 (float32) + 2 + 2 (strided)


def test_regression_capability_bits_do_not_skip(monkeypatch):
    """Session 64: the three compiled-forward test files' skip checks (now helpers.prefill_kernel_available)
    compared ft_prefill_caps() with 3 exactly, so the fp16 bit (8) would have skipped every compiled-forward test;
    the check reads the float32 and bf16 bits alone."""
    class Lib:
        caps = 0

        def ft_prefill_caps(self):
            return self.caps

    lib = Lib()
    monkeypatch.setattr(native_prefill, "load", lambda: lib)
    for caps, want in ((3, True), (11, True), (15, True), (9, False), (10, False)):
        lib.caps = caps
        assert prefill_kernel_available() is want, caps


@needs_kernel
def test_regression_fp32_softcap_alibi_grads_keep_ops_forward(monkeypatch):
    """Session 62: float32 softcap / ALiBi through the compiled forward and the torch-ops backward missed the gradient
    criterion at D = 256 (this draw: dv 5.4e-6, over the bound), where the torch-ops forward, whose scores that
    backward recomputes exactly, meets it; float32 with either stays on the torch-ops forward."""
    monkeypatch.setattr(config, "FWD_PATH", "compiled")
    monkeypatch.setattr(config, "ONE_ROW_DECODE", False)
    torch.manual_seed(1)
    q, k, v = rand_qkv(2, 113, 150, 6, 2, 256, torch.float32, DEVICE)
    check_attention("cpu", q, k, v, alibi_slopes=torch.rand(6) * 0.3)


@needs_kernel
@pytest.mark.parametrize("feature", ["softcap", "alibi", "both"])
@pytest.mark.parametrize("d", [40, 128, 256])
def test_softcap_alibi(compiled, calls, monkeypatch, d, feature):
    """bf16 softcap (its tanh in float32 since session 63) and ALiBi in the compiled forward's softmax step (session 62):
    lengths 17 / 113 / 1023 against other key counts (1023: causal only), causal, windows, non-causal rows whose keys
    lie right of their diagonal (ALiBi's |distance|), GQA, varlen with per-sequence (B, H) slopes and an empty
    sequence; gradients (the torch-ops backward on the compiled forward's lse) on one shape."""
    monkeypatch.setattr(config, "ONE_ROW_DECODE", False)
    torch.manual_seed(d)
    dtype = torch.bfloat16
    kw = dict(softcap=5.0 if feature != "alibi" else 0.0)
    for n, nk in ((17, 40), (113, 113)):
        q, k, v = rand_qkv(2, n, nk, 6, 2, d, dtype, DEVICE)
        slopes = torch.rand(2, 6) * 0.3 if feature != "softcap" else None
        check_attention("cpu", q, k, v, causal=True, alibi_slopes=slopes, grads=n == 113, **kw)
        check_attention("cpu", q, k, v, window_size=(30, 9), alibi_slopes=slopes, grads=False, **kw)
        check_attention("cpu", q, k, v, alibi_slopes=None if slopes is None else slopes[0], grads=False, **kw)
    q, k, v = rand_qkv(1, 1023, 700, 6, 2, d, dtype, DEVICE)
    check_attention("cpu", q, k, v, causal=True, alibi_slopes=None if feature == "softcap" else torch.rand(6) * 0.3,
                    grads=False, **kw)
    (q, k, v), varlen = rand_varlen([33, 0, 300, 1], [40, 12, 250, 7], 4, 2, d, dtype, DEVICE)
    slopes = torch.rand(4, 4) * 0.3 if feature != "softcap" else None
    check_attention("cpu", q, k, v, varlen=varlen, causal=True, alibi_slopes=slopes, grads=False, **kw)
    assert len(calls) == 6 * 2 + 1 + 4     # every sequence of every call through the compiled forward


@needs_kernel
def test_softcap_tanh_range(compiled, calls, monkeypatch):
    """The bf16 forward's float32 tanh (session 63) over its whole range, on the reference bound: arguments below
    2^-10 (its x branch), around the branch, the bulk, saturated (|x| > 30: t clamped); and against the
    double-precision step it replaced (the FT_SOFTCAP_F64 build): outputs within two bf16 roundings, lse within
    1e-5 relative (the float32 tanh's absolute error is ~2e-7 of the cap)."""
    monkeypatch.setattr(config, "ONE_ROW_DECODE", False)
    torch.manual_seed(63)
    q, k, v = rand_qkv(2, 113, 150, 4, 2, 64, torch.bfloat16, DEVICE)
    f32, f64 = native_prefill.load(), native_prefill.load_variant("FT_SOFTCAP_F64")
    for scale, softcap in ((1e-7, 1.0), (1e-4, 0.5), (0.125, 2.0), (0.125, 50.0), (40.0, 1.0)):
        res = check_attention("cpu", q, k, v, causal=True, softmax_scale=scale, softcap=softcap, grads=False)
        o, lse = res["out"], res["lse"]
        monkeypatch.setattr(native_prefill._library, "lib", f64)
        o64, lse64 = cpu_forward(q, k, v, causal=True, softmax_scale=scale, softcap=softcap)
        monkeypatch.setattr(native_prefill._library, "lib", f32)
        assert (o.float() - o64.float()).abs().max() <= 2 * 2.0 ** -8 * o64.float().abs().max()
        assert torch.allclose(lse.float(), lse64.float(), rtol=1e-5, atol=1e-5)
    assert len(calls) == 2 * 10      # two sequences a call, every call compiled


def test_ops_path_never_compiles(monkeypatch, calls):
    monkeypatch.setattr(config, "FWD_PATH", "ops")
    q, k, v = rand_qkv(1, 600, 600, 4, 2, 64, torch.bfloat16, DEVICE)
    check_attention("cpu", q, k, v, causal=True, grads=False)
    assert not calls


def test_bad_path_name(monkeypatch):
    monkeypatch.setattr(config, "FWD_PATH", "fast")
    q, k, v = rand_qkv(1, 8, 8, 2, 2, 32, torch.float32, DEVICE)
    with pytest.raises(ValueError, match="FWD_PATH"):
        cpu_forward(q, k, v)


@pytest.fixture
def no_compiler(monkeypatch, tmp_path):
    """A machine without a C compiler (and an empty kernel cache)."""
    def missing():
        raise native.NativeUnavailable("no C compiler found (test)")
    monkeypatch.setattr(native, "_compiler", missing)
    monkeypatch.setenv("FLASHTRITON_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(native_prefill._library, "lib", None)
    monkeypatch.setattr(native_prefill._library, "error", None)
    monkeypatch.setattr(native_prefill, "_warned", False)
    monkeypatch.setattr(native_prefill._amx_library, "lib", None)
    monkeypatch.setattr(native_prefill._amx_library, "error", None)
    monkeypatch.setattr(native_prefill, "_amx_warned", False)


def test_no_compiler_auto_falls_back(monkeypatch, no_compiler, calls):
    """"auto" on a machine without a C compiler: one warning naming the cause, then the
    torch-ops loop, with correct results."""
    monkeypatch.setattr(config, "FWD_PATH", "auto")
    q, k, v = rand_qkv(1, 600, 600, 4, 2, 64, torch.bfloat16, DEVICE)
    with pytest.warns(RuntimeWarning, match="no C compiler"):
        check_attention("cpu", q, k, v, causal=True, grads=False)
    check_attention("cpu", q, k, v, grads=False)      # no second warning needed
    assert not calls


def test_no_compiler_compiled_raises(monkeypatch, no_compiler):
    monkeypatch.setattr(config, "FWD_PATH", "compiled")
    q, k, v = rand_qkv(1, 60, 60, 2, 2, 64, torch.float32, DEVICE)
    with pytest.raises(native.NativeUnavailable, match="no C compiler"):
        cpu_forward(q, k, v, causal=True)


@needs_kernel
def test_cpu_without_avx512_bf16(monkeypatch, calls):
    """A library built without the bf16 kernel (FT_NO_BF16, as on CPUs without
    AVX512-BF16) runs bf16 on the torch-ops loop and float32 compiled."""
    lib = native_prefill.load_variant("FT_NO_BF16")
    assert lib.ft_prefill_caps() & 3 == 1
    monkeypatch.setattr(native_prefill._library, "lib", lib)
    monkeypatch.setattr(config, "FWD_PATH", "compiled")
    monkeypatch.setattr(config, "FWD_AMX", "off")      # such CPUs have no AMX either
    q, k, v = rand_qkv(1, 600, 600, 4, 2, 64, torch.bfloat16, DEVICE)
    check_attention("cpu", q, k, v, causal=True, grads=False)
    assert not calls
    check_attention("cpu", q.float(), k.float(), v.float(), causal=True, grads=False)
    assert len(calls) == 1
