"""The compiled forward's AMX kernel (flashtriton/cpu/native_prefill.py, tile_amx: bf16 on
Intel AMX tiles, the default for bf16 where the CPU has AMX, config.FWD_AMX = "auto").

On a machine with AMX: against the float64 reference with the suite's criterion on
awkward shapes (head dims 8 / 40 / 64 / 80 / 96 / 128 / 192 / 256, lengths 1 / 17 / 113 /
1023, Nq != Nk, GQA / MQA, causal, windows, varlen, rows that see no key), against the
AVX-512 kernel, strided inputs, large logits, NaN containment, bitwise repeatability
across runs and thread counts, bounded scratch, and that "auto" really selects it
(forward.LAST_PATH "compiled-amx", not a silent fallback). Those skip elsewhere, naming
the reason. The selection logic runs everywhere: "on" raises without AMX, "auto" falls
back (silently on a CPU without AMX, with a warning when an AMX CPU fails the build or
the permission), "off" never uses it, and the plain build refuses an AMX call.
"""
import errno
import types

import pytest
import torch

from flashtriton import backends, reference

from conftest import DEVICE
from helpers import check_attention, cpu_forward, prefill_kernel_available, rand_qkv, rand_varlen

pytestmark = pytest.mark.skipif(not backends.cpu_available() or DEVICE != "cpu", reason="CPU backend tests")

if backends.cpu_available():
    from flashtriton.cpu import config, forward, native_prefill


def _amx_unavailable() -> str | None:
    """Why the AMX kernel cannot run here (no AMX in /proc/cpuinfo, a compile error, the
    permission refused), or None."""
    if not backends.cpu_available():
        return "no CPU backend"
    try:
        native_prefill.load_amx()
        return None
    except native_prefill.NativeUnavailable as e:
        return str(e)


AMX_REASON = _amx_unavailable()
needs_amx = pytest.mark.skipif(AMX_REASON is not None, reason=f"AMX forward unavailable: {AMX_REASON}")
needs_kernel = pytest.mark.skipif(backends.cpu_available() and not prefill_kernel_available(),
                                  reason="the compiled forward does not build / run on this machine")


@pytest.fixture
def calls(monkeypatch):
    """The library of every sequence that ran through the compiled forward."""
    seen = []
    real = native_prefill.forward_sequence
    monkeypatch.setattr(native_prefill, "forward_sequence", lambda *a: seen.append(a[0]) or real(*a))
    return seen


@pytest.fixture
def amx(monkeypatch):
    monkeypatch.setattr(config, "FWD_PATH", "compiled")
    monkeypatch.setattr(config, "FWD_AMX", "on")


def _all_amx(calls):
    return calls and all(lib.amx for lib in calls) and forward.LAST_PATH == "compiled-amx"


@needs_amx
def test_auto_selects_amx_for_bf16(monkeypatch, calls):
    """The default ("auto") runs bf16 on the AMX kernel here, float32 on the AVX-512 one;
    "off" runs bf16 on AVX-512."""
    monkeypatch.setattr(config, "FWD_PATH", "auto")
    monkeypatch.setattr(config, "FWD_AMX", "auto")
    q, k, v = rand_qkv(1, 300, 300, 4, 2, 64, torch.bfloat16, DEVICE)
    check_attention("cpu", q, k, v, causal=True, grads=False)
    assert _all_amx(calls)
    calls.clear()
    check_attention("cpu", q.float(), k.float(), v.float(), causal=True, grads=False)
    assert calls and not any(lib.amx for lib in calls) and forward.LAST_PATH == "compiled"
    calls.clear()
    monkeypatch.setattr(config, "FWD_AMX", "off")
    check_attention("cpu", q, k, v, causal=True, grads=False)
    assert calls and not any(lib.amx for lib in calls) and forward.LAST_PATH == "compiled"


@needs_amx
@pytest.mark.parametrize("d", [40, 64, 80, 96, 128, 192, 256])
@pytest.mark.parametrize("n", [1, 17, 113, 1023])
def test_awkward_shapes(amx, calls, d, n):
    """Head dims that are not multiples of 32 (the K blocks are zero padded to whole
    32-column groups), lengths around the 32-row / 32-key / 256-key / 512-key blocks;
    causal over Nq != Nk (rows that see no key when Nq > Nk), GQA."""
    nk = {1: 5, 17: 17, 113: 300, 1023: 700}[n]
    q, k, v = rand_qkv(1, n, nk, 6, 2, d, torch.bfloat16, DEVICE)
    check_attention("cpu", q, k, v, causal=True, grads=False)
    check_attention("cpu", q, k, v, grads=False)
    assert len(calls) == 2 and _all_amx(calls)


@needs_amx
@pytest.mark.parametrize("d, heads", [(8, (4, 2)), (256, (4, 2)), (64, (32, 2)), (128, (16, 1))])
def test_head_dim_limits_and_large_groups(amx, calls, d, heads):
    """The smallest and largest head dims the API takes; groups of 16 (a 1024-row item
    holds 64 query positions) and MQA."""
    q, k, v = rand_qkv(2, 150, 290, *heads, d, torch.bfloat16, DEVICE)
    check_attention("cpu", q, k, v, causal=True, grads=False)
    check_attention("cpu", q, k, v, window_size=(40, 7), grads=False)
    assert len(calls) == 4 and _all_amx(calls)


@needs_amx
@pytest.mark.parametrize("window", [(5, 3), (0, 0), (20, -1), (-1, 7), (300, 0), (3, 200)])
def test_windows_and_gqa(amx, calls, window):
    for heads in [(4, 4), (6, 2), (4, 1)]:
        q, k, v = rand_qkv(2, 333, 270, *heads, 64, torch.bfloat16, DEVICE)
        check_attention("cpu", q, k, v, window_size=window, grads=False)
    assert len(calls) == 6 and _all_amx(calls)


@needs_amx
def test_long_causal_window_and_nq_ne_nk(amx, calls):
    """Several 512-key chunks and 256-key steps, the diagonal straddling 32-key blocks at
    every offset: Nq < Nk and Nq > Nk, causal and a window."""
    q, k, v = rand_qkv(1, 1300, 2100, 4, 2, 128, torch.bfloat16, DEVICE)
    check_attention("cpu", q, k, v, causal=True, grads=False)
    check_attention("cpu", q, k, v, window_size=(700, 33), grads=False)
    q, k, v = rand_qkv(1, 2100, 1300, 4, 2, 96, torch.bfloat16, DEVICE)
    check_attention("cpu", q, k, v, causal=True, grads=False)
    assert _all_amx(calls)


@needs_amx
def test_rows_without_keys_and_varlen(amx, calls):
    """Rows that see no key give out 0, lse +inf (never NaN); empty sequences (varlen)
    give nothing."""
    q, k, v = rand_qkv(1, 90, 40, 2, 1, 32, torch.bfloat16, DEVICE)
    res = check_attention("cpu", q, k, v, window_size=(3, 0), grads=False)
    assert torch.all(res["out"][:, :47] == 0) and torch.all(torch.isinf(res["lse"][:, :, :47]))
    assert torch.all(res["lse"][:, :, :47] > 0)
    (q, k, v), varlen = rand_varlen([33, 0, 700, 1], [40, 12, 650, 0], 4, 2, 64, torch.bfloat16, DEVICE)
    check_attention("cpu", q, k, v, varlen=varlen, causal=True, grads=False)
    check_attention("cpu", q, k, v, varlen=varlen, grads=False)
    assert _all_amx(calls)


@needs_amx
def test_matches_avx512_kernel(monkeypatch, calls):
    """The two compiled kernels agree to within their rounding (both round P to bf16;
    the sums inside a TDPBF16PS run in another order than vdpbf16ps')."""
    q, k, v = rand_qkv(2, 1100, 1100, 8, 2, 128, torch.bfloat16, DEVICE)
    monkeypatch.setattr(config, "FWD_PATH", "compiled")
    res = {}
    for mode in ("on", "off"):
        monkeypatch.setattr(config, "FWD_AMX", mode)
        res[mode] = cpu_forward(q, k, v, causal=True)
    assert (res["on"][0].float() - res["off"][0].float()).abs().max().item() < 2e-2
    assert (res["on"][1] - res["off"][1]).abs().max().item() < 1e-4
    assert calls[0].amx and not calls[-1].amx


@needs_amx
def test_large_logits_and_late_maxima(amx):
    """Keys in a late step score far above earlier ones (and the reverse): the online
    softmax rescales O in memory between the tile products."""
    q, k, v = rand_qkv(1, 700, 900, 2, 2, 32, torch.bfloat16, DEVICE)
    k[:, 600:] *= 60.0
    check_attention("cpu", q * 4.0, k, v, grads=False)
    k2 = k.clone()
    k2[:, :16] *= 60.0
    k2[:, 600:] /= 60.0
    check_attention("cpu", q * 4.0, k2, v, causal=True, grads=False)


@needs_amx
def test_nan_only_where_visible(amx):
    """A NaN key that only the last query sees stays out of every other row (its score
    lanes are masked, never read)."""
    q, k, v = rand_qkv(1, 600, 600, 2, 2, 32, torch.bfloat16, DEVICE)
    k[:, -1] = float("nan")
    out, _ = cpu_forward(q, k, v, causal=True)
    ref, ref_lp = (reference.attention(q.to(t), k.to(t), v.to(t), softmax_scale=32 ** -0.5, window_right=0)[0]
                   for t in (torch.float64, torch.bfloat16))
    assert torch.isnan(out[:, -1]).all()
    assert torch.isfinite(out[:, :-1]).all()
    base = (ref_lp[:, :-1].double() - ref[:, :-1]).abs().max().item()
    assert (out[:, :-1].double() - ref[:, :-1]).abs().max().item() <= 2 * base + 1e-4


@needs_amx
def test_strided_inputs(amx, calls):
    """(B, H, N, D) tensors transposed to (B, N, H, D) views are read in place."""
    q, k, v = (torch.randn(2, 4, 300, 64, dtype=torch.bfloat16).transpose(1, 2) for _ in range(3))
    assert not q.is_contiguous()
    out, lse = cpu_forward(q, k, v, causal=True)
    out2, lse2 = cpu_forward(q.contiguous(), k.contiguous(), v.contiguous(), causal=True)
    assert torch.equal(out, out2) and torch.equal(lse, lse2)
    assert len(calls) == 4 and _all_amx(calls)


@needs_amx
@pytest.mark.parametrize("kw", [dict(causal=True), dict(window_size=(300, 40)), dict()])
def test_bitwise_repeatable_across_threads(amx, calls, kw):
    """Each row's result depends only on its data and the fixed tiling (items, 64-row
    tiles, 512-key chunks, 256-key steps), not on the thread that computes it."""
    q, k, v = rand_qkv(1, 1500, 1500, 4, 2, 64, torch.bfloat16, DEVICE)
    a = cpu_forward(q, k, v, **kw)
    b = cpu_forward(q, k, v, **kw)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        c = cpu_forward(q, k, v, **kw)
        torch.set_num_threads(3)
        d = cpu_forward(q, k, v, **kw)
    finally:
        torch.set_num_threads(threads)
    for x in (b, c, d):
        assert torch.equal(a[0], x[0]) and torch.equal(a[1], x[1])
    assert _all_amx(calls)


@needs_amx
def test_scratch_does_not_grow_with_n(amx):
    """Extra memory is per-thread scratch for one item: the same for N = 256 and 8192."""
    lib = native_prefill.load_amx()
    assert lib.ft_prefill_scratch(128, 1024) < 8 * 2 ** 20
    sizes = []
    for n in (256, 8192):
        native_prefill._local.buf = None
        q, k, v = rand_qkv(1, n, n, 1, 1, 128, torch.bfloat16, DEVICE)
        cpu_forward(q, k, v, causal=True)
        sizes.append(native_prefill._local.buf.numel())
    assert sizes[0] == sizes[1]


# ---------------------------------------------------------------------------
# Selection: runs with or without AMX.
# ---------------------------------------------------------------------------

@pytest.fixture
def fresh_amx(monkeypatch):
    """An AMX library not loaded yet in this process, no warning given yet."""
    monkeypatch.setattr(native_prefill._amx_library, "lib", None)
    monkeypatch.setattr(native_prefill._amx_library, "error", None)
    monkeypatch.setattr(native_prefill, "_amx_warned", False)


@needs_kernel
def test_cpu_without_amx(monkeypatch, fresh_amx, calls):
    """A CPU without AMX: "auto" runs bf16 on the AVX-512 kernel without a warning (by
    feature); "on" raises NativeUnavailable naming the cause."""
    monkeypatch.setattr(native_prefill, "cpu_has_amx", lambda: False)
    monkeypatch.setattr(config, "FWD_PATH", "auto")
    monkeypatch.setattr(config, "FWD_AMX", "auto")
    q, k, v = rand_qkv(1, 200, 200, 4, 2, 64, torch.bfloat16, DEVICE)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_attention("cpu", q, k, v, causal=True, grads=False)
    assert calls and not any(lib.amx for lib in calls) and forward.LAST_PATH == "compiled"
    monkeypatch.setattr(config, "FWD_AMX", "on")
    with pytest.raises(native_prefill.NativeUnavailable, match="no AMX"):
        cpu_forward(q, k, v, causal=True)


@needs_kernel
def test_amx_build_failure_warns_and_falls_back(monkeypatch, fresh_amx, calls):
    """An AMX CPU whose AMX build fails: one RuntimeWarning naming the cause, then the
    AVX-512 kernel with correct results; "on" raises."""
    monkeypatch.setattr(native_prefill, "cpu_has_amx", lambda: True)
    monkeypatch.setattr(native_prefill._amx_library, "error", "compiling the prefill_amx kernel failed (test)")
    monkeypatch.setattr(config, "FWD_PATH", "auto")
    monkeypatch.setattr(config, "FWD_AMX", "auto")
    q, k, v = rand_qkv(1, 300, 300, 4, 2, 64, torch.bfloat16, DEVICE)
    with pytest.warns(RuntimeWarning, match="AMX forward kernel is unavailable.*failed \\(test\\)"):
        check_attention("cpu", q, k, v, causal=True, grads=False)
    check_attention("cpu", q, k, v, grads=False)          # no second warning needed
    assert calls and not any(lib.amx for lib in calls) and forward.LAST_PATH == "compiled"
    monkeypatch.setattr(config, "FWD_AMX", "on")
    with pytest.raises(native_prefill.NativeUnavailable, match="failed \\(test\\)"):
        cpu_forward(q, k, v)


def test_permission_refused_is_reported(monkeypatch):
    """ft_amx_init's codes become NativeUnavailable messages: the permission refused
    (EPERM), a kernel without AMX (EINVAL), a CPU without it."""
    for rc, pattern in [(100 + errno.EPERM, "ARCH_REQ_XCOMP_PERM.*errno 1"), (100 + errno.EINVAL, "5.16"),
                        (2, "CPUID"), (3, "XCOMP_PERM")]:
        fake = types.SimpleNamespace(ft_amx_init=lambda rc=rc: rc, ft_prefill_caps=lambda: 7, amx=True)
        monkeypatch.setattr(native_prefill, "_open", lambda path, amx=False, fake=fake: fake)
        with pytest.raises(native_prefill.NativeUnavailable, match=pattern):
            native_prefill._open_amx("unused")


@needs_kernel
def test_plain_build_refuses_amx_calls(monkeypatch):
    """The plain build has no AMX kernel: an AMX call is refused (code 1), never a tile
    instruction (SIGILL on a CPU without AMX)."""
    lib = native_prefill.load_variant()     # a separate ctypes handle on the plain build
    assert lib.ft_prefill_caps() & 4 == 0 and lib.ft_amx_init() == 1
    lib.amx = True
    monkeypatch.setattr(native_prefill, "load_amx", lambda: lib)
    monkeypatch.setattr(config, "FWD_PATH", "compiled")
    monkeypatch.setattr(config, "FWD_AMX", "on")
    q, k, v = rand_qkv(1, 60, 60, 2, 2, 64, torch.bfloat16, DEVICE)
    with pytest.raises(RuntimeError, match="code 1"):
        cpu_forward(q, k, v)


def test_bad_amx_mode(monkeypatch):
    monkeypatch.setattr(config, "FWD_AMX", "yes")
    q, k, v = rand_qkv(1, 8, 8, 2, 2, 32, torch.bfloat16, DEVICE)
    with pytest.raises(ValueError, match="FWD_AMX"):
        cpu_forward(q, k, v)


@needs_amx
def test_lean_softmax_against_session34_step(monkeypatch):
    """The session-35 softmax step (one FMA for s * scale - m, the degree-4 vexp2_bf16, the row
    max over raw scores) against session 34's (FT_SOFTMAX_OLD: the degree-7 polynomial): both meet
    the criterion against float64 and differ by at most a bf16 rounding of the output and 1e-5
    of the lse - large logits (many underflowing exponents), masked rows, a negative scale (the
    row max becomes scale * min s) and a zero scale included."""
    monkeypatch.setattr(config, "FWD_PATH", "compiled")
    monkeypatch.setattr(config, "FWD_AMX", "on")
    libs = (native_prefill.load_amx(), native_prefill.load_variant("FT_AMX", "FT_SOFTMAX_OLD"))
    for n, nk, d, kw, mul in [(1000, 1300, 64, dict(causal=True), 1.0), (700, 700, 128, dict(), 8.0),
                              (513, 900, 40, dict(window_size=(100, 3)), 20.0),
                              (300, 333, 64, dict(softmax_scale=-0.3, causal=True), 1.0),
                              (200, 260, 64, dict(softmax_scale=0.0, window_size=(5, 0)), 1.0)]:
        q, k, v = rand_qkv(2, n, nk, 4, 2, d, torch.bfloat16, DEVICE)
        res = []
        for lib in libs:
            monkeypatch.setattr(native_prefill._amx_library, "lib", lib)
            res.append(cpu_forward(q * mul, k, v, **kw))
            assert forward.LAST_PATH == "compiled-amx"
        (o_new, lse_new), (o_old, lse_old) = res
        assert not o_new.isnan().any() and torch.equal(lse_new.isinf(), lse_old.isinf())
        fin = lse_old.isfinite()
        assert (lse_new[fin] - lse_old[fin]).abs().max() <= 1e-5 * (1 + lse_old[fin].abs().max())
        assert (o_new.float() - o_old.float()).abs().max() <= 2 ** -7 * o_old.float().abs().max()
        monkeypatch.setattr(native_prefill._amx_library, "lib", libs[0])
        check_attention("cpu", q * mul, k, v, grads=False, **kw)


@needs_amx
def test_torch_amx_kernels_unaffected(amx):
    """Each thread loads its tile configuration before and releases it after the kernel:
    torch's own bf16 matmul / SDPA (oneDNN, AMX on this CPU) give the same bits before
    and after our forward ran on the same threads."""
    a, b = torch.randn(512, 512, dtype=torch.bfloat16), torch.randn(512, 512, dtype=torch.bfloat16)
    q, k, v = rand_qkv(1, 600, 600, 4, 4, 64, torch.bfloat16, DEVICE)
    qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
    before = (a @ b, torch.nn.functional.scaled_dot_product_attention(qt, kt, vt))
    cpu_forward(q, k, v)
    after = (a @ b, torch.nn.functional.scaled_dot_product_attention(qt, kt, vt))
    assert torch.equal(before[0], after[0]) and torch.equal(before[1], after[1])
    assert forward.LAST_PATH == "compiled-amx"
