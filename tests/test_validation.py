"""Bad input: a clear TypeError / ValueError naming the argument and the rule, raised
before anything is launched; unimplemented features raise NotImplementedError; NaN
inputs do not crash and stay in the rows they touch.

Every error test runs with the backends' fwd / bwd replaced by a tripwire, so an
error raised from inside a launch (rather than by validation) fails the test.
"""
import pytest
import torch

import flashtriton
from flashtriton import (backends, flash_attn_func, flash_attn_kvpacked_func, flash_attn_qkvpacked_func,
                         flash_attn_varlen_func, flash_attn_varlen_kvpacked_func, flash_attn_varlen_qkvpacked_func)

from conftest import DEVICE, kernel_backends
from helpers import cu_seqlens, rand_qkv, rand_varlen

ALL_BACKENDS = kernel_backends() + ["reference"]


@pytest.fixture
def no_launch(monkeypatch):
    """Replaces every backend's entry points: reaching one fails the test."""
    def tripwire(*args, **kwargs):
        raise AssertionError("a backend was called: validation did not stop the bad input")
    for name in ALL_BACKENDS:
        mod = backends.get(name)
        for fn in ("fwd", "bwd", "dropout_mask", "fwd_paged"):
            monkeypatch.setattr(mod, fn, tripwire, raising=False)


def qkv(dtype=torch.float16, b=2, nq=9, nk=11, h=4, hk=2, d=32):
    return rand_qkv(b, nq, nk, h, hk, d, dtype, DEVICE)


def raises(exc, match, fn, *args, **kwargs):
    """fn(*args, **kwargs) raises `exc` whose message matches `match` (a regex that
    starts with the argument's name)."""
    with pytest.raises(exc, match=match):
        fn(*args, **kwargs)


# --- tensors: type, dtype, device, ndim, shapes, strides ---------------------------------

@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_not_a_tensor(backend, no_launch):
    q, k, v = qkv()
    with flashtriton.use_backend(backend):
        raises(TypeError, r"^q: expected a torch.Tensor, got list", flash_attn_func, [1.0], k, v)
        raises(TypeError, r"^k: expected a torch.Tensor, got NoneType", flash_attn_func, q, None, v)
        raises(TypeError, r"^v: expected a torch.Tensor, got ndarray", flash_attn_func, q, k, v.cpu().numpy())


@pytest.mark.parametrize("backend", kernel_backends())
@pytest.mark.parametrize("dtype", [torch.float64, torch.int32, torch.float8_e4m3fn, torch.complex64])
def test_unsupported_dtype(backend, dtype, no_launch):
    q, k, v = (t.to(dtype) for t in qkv(torch.float32))
    with flashtriton.use_backend(backend):
        raises(TypeError, rf"^q: dtype {dtype} is not supported by the {backend} backend \(supported: "
               r"float16, bfloat16, float32\)", flash_attn_func, q, k, v)


def test_reference_backend_accepts_float64():
    q, k, v = qkv(torch.float64)
    with flashtriton.use_backend("reference"):
        out = flash_attn_func(q, k, v)
    assert out.dtype == torch.float64 and torch.isfinite(out).all()
    with flashtriton.use_backend("reference"):
        raises(TypeError, r"^q: dtype torch.int64 is not supported by the reference backend",
               flash_attn_func, q.long(), k.long(), v.long())


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_dtype_mismatch(backend, no_launch):
    q, k, v = qkv()
    with flashtriton.use_backend(backend):
        raises(TypeError, r"^k: dtype torch.bfloat16 differs from q's torch.float16; q, k and v must share one dtype",
               flash_attn_func, q, k.bfloat16(), v)
        raises(TypeError, r"^v: dtype torch.float32 differs from q's torch.float16", flash_attn_func, q, k, v.float())


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_different_devices(backend, no_launch):
    """Without a GPU, a device="meta" tensor stands in for the other device."""
    q, k, v = qkv()
    with flashtriton.use_backend(backend):
        raises(ValueError, r"^k: on meta but q is on .*; all tensors must be on one device",
               flash_attn_func, q, k.to("meta"), v)
        raises(ValueError, r"^v: on meta but q is on", flash_attn_func, q, k, v.to("meta"))
        raises(ValueError, r"^alibi_slopes: on meta but q is on", flash_attn_func, q, k, v,
               alibi_slopes=torch.ones(4, device="meta"))
    (qv, kv, vv), (cu_q, cu_k, mq, mk) = rand_varlen([3, 4], [5, 6], 4, 2, 32, torch.float16, DEVICE)
    with flashtriton.use_backend(backend):
        raises(ValueError, r"^cu_seqlens_q: on meta but q is on", flash_attn_varlen_func, qv, kv, vv,
               cu_q.to("meta"), cu_k, mq, mk)
        raises(ValueError, r"^cu_seqlens_k: on meta but q is on", flash_attn_varlen_func, qv, kv, vv,
               cu_q, cu_k.to("meta"), mq, mk)


@pytest.mark.gpu
def test_different_devices_gpu(no_launch):
    q, k, v = rand_qkv(1, 9, 9, 2, 2, 32, torch.float16, "cuda")
    raises(ValueError, r"^k: on cpu but q is on cuda", flash_attn_func, q, k.cpu(), v)


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_wrong_ndim(backend, no_launch):
    q, k, v = qkv()
    with flashtriton.use_backend(backend):
        raises(ValueError, r"^q: expected 4 dims \(batch, seqlen, nheads, headdim\), got shape \(9, 4, 32\)",
               flash_attn_func, q[0], k, v)
        raises(ValueError, r"^v: expected 4 dims", flash_attn_func, q, k, v[None])
        raises(ValueError, r"^k: expected 3 dims \(total, nheads, headdim\), got shape \(2, 11, 2, 32\)",
               flash_attn_varlen_func, q[0], k, v[0], cu_seqlens([9], DEVICE), cu_seqlens([11], DEVICE), 9, 11)
        raises(ValueError, r"^qkv: expected 5 dims \(batch, seqlen, 3, nheads, headdim\)",
               flash_attn_qkvpacked_func, torch.stack([q, q, q], 2)[0])
        raises(ValueError, r"^qkv: dim 2 must have size 3", flash_attn_qkvpacked_func, torch.stack([q, q], 2))
        raises(ValueError, r"^kv: expected 5 dims", flash_attn_kvpacked_func, q, k)
        raises(ValueError, r"^kv: dim 2 must have size 2", flash_attn_kvpacked_func, q, torch.stack([k, k, k], 2))
        raises(ValueError, r"^qkv: expected 4 dims \(total, 3, nheads, headdim\)", flash_attn_varlen_qkvpacked_func,
               torch.stack([q, q, q], 2), cu_seqlens([9, 9], DEVICE), 9)
        raises(ValueError, r"^kv: expected 4 dims \(total, 2, nheads_k, headdim\)", flash_attn_varlen_kvpacked_func,
               q[0], k[0], cu_seqlens([9], DEVICE), cu_seqlens([11], DEVICE), 9, 11)


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_head_dims(backend, no_launch):
    q, k, v = qkv()
    with flashtriton.use_backend(backend):
        raises(ValueError, r"^k: head dim 40 differs from q's 32; q, k and v must share the head dim",
               flash_attn_func, q, k[..., :8].repeat(1, 1, 1, 5), v[..., :8].repeat(1, 1, 1, 5))
        raises(ValueError, r"^v: shape \(2, 11, 2, 40\) must equal k's \(2, 11, 2, 32\)",
               flash_attn_func, q, k, torch.cat([v, v[..., :8]], -1))
        for d in (264, 512):
            q2, k2, v2 = qkv(d=d)
            raises(ValueError, rf"^q: head dim {d} must be a multiple of 8 between 8 and 256",
                   flash_attn_func, q2, k2, v2)
        for d in (4, 12, 36, 250):
            q2, k2, v2 = (t[..., :d] for t in qkv(d=256))
            q2, k2, v2 = (t.contiguous() for t in (q2, k2, v2))
            raises(ValueError, rf"^q: head dim {d} must be a multiple of 8", flash_attn_func, q2, k2, v2)


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_nheads(backend, no_launch):
    with flashtriton.use_backend(backend):
        raises(ValueError, r"^k: nheads_k = 3 must divide nheads_q = 4 \(MQA/GQA\)", flash_attn_func, *qkv(hk=3))
        raises(ValueError, r"^k: nheads_k = 8 must divide nheads_q = 4", flash_attn_func, *qkv(hk=8))
        raises(ValueError, r"^k: nheads_k = 0 must divide", flash_attn_func, *qkv(hk=0))
        raises(ValueError, r"^q: nheads must be >= 1, got 0", flash_attn_func, *qkv(h=0, hk=1))


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_shapes_of_batch_and_seqlen(backend, no_launch):
    q, k, v = qkv()
    with flashtriton.use_backend(backend):
        raises(ValueError, r"^k: batch 1 differs from q's batch 2", flash_attn_func, q, k[:1], v[:1])
        raises(ValueError, r"^v: shape \(2, 10, 2, 32\) must equal k's \(2, 11, 2, 32\)",
               flash_attn_func, q, k, v[:, :10])
        raises(ValueError, r"^q: batch size must be >= 1, got 0", flash_attn_func, q[:0], k[:0], v[:0])
        raises(ValueError, r"^q: seqlen must be >= 1, got 0", flash_attn_func, q[:, :0], k, v)
        raises(ValueError, r"^k: seqlen must be >= 1, got 0", flash_attn_func, q, k[:, :0], v[:, :0])


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_inner_stride(backend, no_launch):
    q, k, v = qkv()
    with flashtriton.use_backend(backend):
        strided = torch.randn(2, 9, 4, 64, dtype=torch.float16, device=DEVICE)[..., ::2]
        raises(ValueError, r"^q: the last \(headdim\) dimension must have stride 1, got stride 2",
               flash_attn_func, strided, k, v)
        kt = k.transpose(-1, -2).contiguous().transpose(-1, -2)
        raises(ValueError, r"^k: the last \(headdim\) dimension must have stride 1, got stride 2",
               flash_attn_func, q, kt, v)
        raises(ValueError, r"^v: the last \(headdim\) dimension must have stride 1",
               flash_attn_func, q, k, torch.randn(2, 11, 2, 96, dtype=torch.float16, device=DEVICE)[..., ::3])


# --- scalar options -------------------------------------------------------------------

@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_options(backend, no_launch):
    q, k, v = qkv()
    with flashtriton.use_backend(backend):
        for bad in (float("nan"), float("inf"), "0.1"):
            raises(ValueError, r"^softmax_scale: must be a finite float or None", flash_attn_func, q, k, v,
                   softmax_scale=bad)
        for bad in ((-2, 0), (1,), (1, 2, 3), 5, (0.5, 1), None, (1, "a")):
            raises(ValueError, r"^window_size: must be a pair \(left, right\) of ints >= -1", flash_attn_func,
                   q, k, v, window_size=bad)
        for bad in (-1.0, float("inf"), float("nan"), None):
            raises(ValueError, r"^softcap: must be a finite float >= 0", flash_attn_func, q, k, v, softcap=bad)
        for bad in (1.0, 1.5, -0.1, float("nan"), None):
            raises(ValueError, r"^dropout_p: must be in \[0, 1\)", flash_attn_func, q, k, v, dropout_p=bad)
        raises(TypeError, r"^causal: must be a bool, got int", flash_attn_func, q, k, v, causal=1)
        raises(TypeError, r"^deterministic: must be a bool, got str", flash_attn_func, q, k, v, deterministic="y")


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_alibi_slopes(backend, no_launch):
    q, k, v = qkv()
    with flashtriton.use_backend(backend):
        raises(TypeError, r"^alibi_slopes: expected a torch.Tensor, got list", flash_attn_func, q, k, v,
               alibi_slopes=[0.1] * 4)
        raises(TypeError, r"^alibi_slopes: dtype must be float32, got torch.float16", flash_attn_func, q, k, v,
               alibi_slopes=torch.ones(4, dtype=torch.float16, device=DEVICE))
        for shape in ((3,), (2, 3), (3, 4), (1, 2, 4), ()):
            raises(ValueError, r"^alibi_slopes: shape must be \(nheads,\) = \(4,\) or \(batch, nheads\) = \(2, 4\)",
                   flash_attn_func, q, k, v, alibi_slopes=torch.ones(shape, device=DEVICE))
        raises(ValueError, r"^alibi_slopes: the last dimension must have stride 1", flash_attn_func, q, k, v,
               alibi_slopes=torch.ones(4, 2, device=DEVICE).t())
    # varlen: batch is the number of sequences
    (qv, kv, vv), varlen = rand_varlen([3, 4, 5], [5, 6, 7], 4, 2, 32, torch.float16, DEVICE)
    with flashtriton.use_backend(backend):
        raises(ValueError, r"^alibi_slopes: shape must be .* \(batch, nheads\) = \(3, 4\)", flash_attn_varlen_func,
               qv, kv, vv, *varlen, alibi_slopes=torch.ones(2, 4, device=DEVICE))


# --- varlen: cu_seqlens and max_seqlen ---------------------------------------------------

@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_cu_seqlens(backend, no_launch):
    (q, k, v), (cu_q, cu_k, mq, mk) = rand_varlen([3, 4], [5, 6], 4, 2, 32, torch.float16, DEVICE)
    f = flash_attn_varlen_func
    with flashtriton.use_backend(backend):
        raises(TypeError, r"^cu_seqlens_q: expected a torch.Tensor, got list", f, q, k, v, [0, 3, 7], cu_k, mq, mk)
        raises(TypeError, r"^cu_seqlens_q: dtype must be int32, got torch.int64", f, q, k, v, cu_q.long(), cu_k,
               mq, mk)
        raises(TypeError, r"^cu_seqlens_k: dtype must be int32, got torch.float32", f, q, k, v, cu_q, cu_k.float(),
               mq, mk)
        raises(ValueError, r"^cu_seqlens_q: must be 1-D with batch \+ 1 >= 2 entries, got shape \(1, 3\)",
               f, q, k, v, cu_q[None], cu_k, mq, mk)
        raises(ValueError, r"^cu_seqlens_q: must be 1-D with batch \+ 1 >= 2 entries, got shape \(1,\)",
               f, q, k, v, cu_q[:1], cu_k, mq, mk)
        raises(ValueError, r"^cu_seqlens_k: length must be batch \+ 1 = 3 \(as cu_seqlens_q\), got 4",
               f, q, k, v, cu_q, cu_seqlens([5, 3, 3], DEVICE), mq, mk)
        raises(ValueError, r"^cu_seqlens_q: must start at 0, got 1", f, q, k, v,
               torch.tensor([1, 3, 7], dtype=torch.int32, device=DEVICE), cu_k, mq, mk)
        raises(ValueError, r"^cu_seqlens_k: must be non-decreasing, but entry 2 \(4\) < entry 1 \(11\)",
               f, q, k, v, cu_q, torch.tensor([0, 11, 4], dtype=torch.int32, device=DEVICE), mq, mk)
        raises(ValueError, r"^cu_seqlens_q: last entry must equal the total number of tokens 7, got 6",
               f, q, k, v, torch.tensor([0, 3, 6], dtype=torch.int32, device=DEVICE), cu_k, mq, mk)
        raises(ValueError, r"^cu_seqlens_k: last entry must equal the total number of tokens 11, got 12",
               f, q, k, v, cu_q, torch.tensor([0, 6, 12], dtype=torch.int32, device=DEVICE), mq, mk)


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_max_seqlen(backend, no_launch):
    (q, k, v), (cu_q, cu_k, mq, mk) = rand_varlen([3, 4], [5, 6], 4, 2, 32, torch.float16, DEVICE)
    f = flash_attn_varlen_func
    with flashtriton.use_backend(backend):
        raises(ValueError, r"^max_seqlen_q: must be an int >= 0, got -1", f, q, k, v, cu_q, cu_k, -1, mk)
        raises(ValueError, r"^max_seqlen_k: must be an int >= 0, got 6.0", f, q, k, v, cu_q, cu_k, mq, 6.0)
        raises(ValueError, r"^max_seqlen_q: 3 is less than the longest sequence in cu_seqlens_q \(4\)",
               f, q, k, v, cu_q, cu_k, 3, mk)
        raises(ValueError, r"^max_seqlen_k: 5 is less than the longest sequence in cu_seqlens_k \(6\)",
               f, q, k, v, cu_q, cu_k, mq, 5)


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_regression_max_seqlen_error_names_argument(backend, no_launch):
    """A max_seqlen below the longest sequence was reported as "max_seqlen: ...", which
    names no argument of flash_attn_varlen_func; it now says max_seqlen_q / max_seqlen_k."""
    (q, k, v), (cu_q, cu_k, mq, mk) = rand_varlen([3, 4], [5, 6], 4, 2, 32, torch.float16, DEVICE)
    with flashtriton.use_backend(backend):
        raises(ValueError, r"^max_seqlen_k: ", flash_attn_varlen_func, q, k, v, cu_q, cu_k, mq, 2)


# --- backend choice and unimplemented features ---------------------------------------

def test_unimplemented_features(no_launch):
    (q, k, v), varlen = rand_varlen([3, 4], [5, 6], 4, 2, 32, torch.float16, DEVICE)
    block_table = torch.zeros(2, 1, dtype=torch.int32, device=DEVICE)
    # (block_table is implemented since session 49: unpaged 3-D k / v with a table are bad input)
    raises(ValueError, r"^k: with block_table, expected 4 dims", flash_attn_varlen_func, q, k, v, *varlen,
           block_table=block_table)


def test_cpu_backend_missing_package(no_launch, monkeypatch):
    """An installation without flashtriton.cpu (cpu_available() False): the default for CPU tensors is the
    reference backend, and asking for the CPU backend names the missing package (session 57: the message still
    said "not implemented yet", and the branch of test_unimplemented_features that checked it never ran)."""
    monkeypatch.setattr(backends, "cpu_available", lambda: False)
    assert backends._default_for_type("cpu") == "reference"
    if DEVICE == "cpu":
        with flashtriton.use_backend("cpu"):
            raises(RuntimeError, r"^backend 'cpu': the package flashtriton.cpu is missing from this installation",
                   flash_attn_func, *qkv())


def test_bad_backend_names(no_launch, monkeypatch):
    with pytest.raises(ValueError, match=r"^backend: must be one of \('triton', 'cpu', 'reference'\), got 'cuda'"):
        with flashtriton.use_backend("cuda"):
            pass
    monkeypatch.setenv("FLASHTRITON_BACKEND", "fast")
    raises(ValueError, r"^FLASHTRITON_BACKEND: must be one of", flash_attn_func, *qkv())


def test_triton_backend_needs_cuda_or_the_interpreter(no_launch, monkeypatch):
    monkeypatch.setattr(backends, "_interpreting", lambda: False)
    with flashtriton.use_backend("triton"):
        raises(ValueError, r"^backend 'triton': needs CUDA tensors \(or CPU tensors with TRITON_INTERPRET=1\), "
               r"got tensors on cpu", flash_attn_func, *(t.cpu() for t in qkv()))
    q, k, v = (torch.empty(1, 4, 2, 32, dtype=torch.float16, device="meta") for _ in range(3))
    with flashtriton.use_backend("triton"):
        raises(ValueError, r"^backend 'triton': needs CUDA tensors", flash_attn_func, q, k, v)


# --- NaN inputs ---------------------------------------------------------------------

@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_nan_in_keys_stays_in_the_rows_that_see_them(backend):
    """Causal: a NaN in key j reaches the query rows that see key j, and no other row.
    (Backward, dQ = dS K spreads it further through 0 * NaN, in the reference too.)"""
    q, k, v = rand_qkv(1, 40, 40, 2, 1, 32, torch.float16, DEVICE, requires_grad=True)
    with torch.no_grad():
        k[0, 25, 0, 4] = float("nan")
    with flashtriton.use_backend(backend):
        out = flash_attn_func(q, k, v, causal=True)
        torch.autograd.grad(out, (q, k, v), torch.randn_like(out))  # does not crash
    assert torch.isfinite(out[0, :25]).all() and torch.isnan(out[0, 25:]).all()


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_nan_in_a_query_row_stays_in_its_row(backend):
    """Forward (test_prefill) and backward: dQ of every other row stays finite."""
    q, k, v = rand_qkv(1, 40, 50, 2, 1, 32, torch.float16, DEVICE, requires_grad=True)
    with torch.no_grad():
        q[0, 13, 1, 7] = float("nan")
    with flashtriton.use_backend(backend):
        out = flash_attn_func(q, k, v, causal=True)
        dq, dk, dv = torch.autograd.grad(out, (q, k, v), torch.randn_like(out))
    assert torch.isnan(out[0, 13, 1]).all() and torch.isnan(dq[0, 13, 1]).all()
    finite = torch.ones_like(dq, dtype=torch.bool)
    finite[0, 13, 1] = False
    assert torch.isfinite(out[finite]).all() and torch.isfinite(dq[finite]).all()


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_nan_in_values_stays_in_its_column(backend):
    q, k, v = rand_qkv(1, 30, 40, 2, 2, 32, torch.bfloat16, DEVICE)
    v[0, 17, 1, 9] = float("nan")
    with flashtriton.use_backend(backend):
        out = flash_attn_func(q, k, v)
    assert torch.isnan(out[0, :, 1, 9]).all()
    mask = torch.ones_like(out, dtype=torch.bool)
    mask[0, :, 1, 9] = False
    assert torch.isfinite(out[mask]).all()


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_nan_in_a_varlen_sequence_stays_in_it(backend):
    (q, k, v), varlen = rand_varlen([20, 17, 9], [20, 30, 9], 2, 2, 32, torch.float16, DEVICE, requires_grad=True)
    with torch.no_grad():
        q[25, 0, 3] = float("nan")   # second sequence, row 5
        k[30, 1, 0] = float("nan")   # second sequence, key 10
    with flashtriton.use_backend(backend):
        out = flash_attn_varlen_func(q, k, v, *varlen)
        dq, dk, dv = torch.autograd.grad(out, (q, k, v), torch.randn_like(out))
    for g in (out, dq):
        assert torch.isfinite(g[:20]).all() and torch.isfinite(g[37:]).all()
    for g in (dk, dv):
        assert torch.isfinite(g[:20]).all() and torch.isfinite(g[50:]).all()
    assert torch.isnan(out[25, 0]).all() and torch.isnan(out[20:37, 1]).all()


def _full_checks_pass(q, k, v, varlen):
    """validate.attention_inputs without its fast path (validate._inputs_ok)."""
    from flashtriton import validate
    saved = validate._inputs_ok
    validate._inputs_ok = lambda *a: False
    try:
        validate.attention_inputs(q, k, v, varlen=varlen, backend="triton")
        return True
    except (TypeError, ValueError):
        return False
    finally:
        validate._inputs_ok = saved


def test_regression_fast_input_checks_imply_the_full_ones():
    """validate._inputs_ok (the one-pass check, session 25) may say False for good inputs,
    never True for inputs the full checks reject: over shapes, head counts, dtypes, strides
    and empty dims, every input it passes passes the full checks, and the common good
    inputs take it."""
    from flashtriton import validate
    g = torch.Generator().manual_seed(0)
    dtypes = (torch.bfloat16, torch.float16, torch.float32, torch.float64, torch.int32)
    taken = 0
    for _ in range(400):
        varlen = bool(torch.randint(0, 2, (1,), generator=g))
        pick = lambda xs: xs[int(torch.randint(0, len(xs), (1,), generator=g))]  # noqa: E731
        b, n, nk = pick((0, 1, 2)), pick((0, 1, 3)), pick((0, 1, 3))
        h, hk, hv = pick((0, 1, 2, 4)), pick((0, 1, 2)), pick((1, 2))
        d, dk = pick((4, 8, 16, 264)), pick((8, 16))
        dt, dtk = pick(dtypes), pick(dtypes)
        shp = (lambda bb, nn, hh, dd: (bb * nn + 1, hh, dd)) if varlen else (lambda bb, nn, hh, dd: (bb, nn, hh, dd))
        q = torch.zeros(shp(b, n, h, d), dtype=dt)
        k = torch.zeros(shp(pick((b, 1)), nk, hk, pick((d, dk))), dtype=pick((dt, dtk)))
        v = torch.zeros(k.shape if pick((True, True, False)) else shp(b, nk, hv, d), dtype=pick((k.dtype, dt)))
        if pick((False, False, True)) and v.dim() and v.shape[-1] > 1:
            v = torch.zeros(v.shape[:-1] + (v.shape[-1] * 2,), dtype=v.dtype)[..., ::2]   # inner stride 2
        if validate._inputs_ok(q, k, v, varlen):
            taken += 1
            assert _full_checks_pass(q, k, v, varlen), (q.shape, k.shape, v.shape, q.dtype, k.dtype, v.dtype)
    q, k, v = rand_qkv(2, 64, 64, 4, 2, 128, torch.bfloat16, "cpu")
    assert validate._inputs_ok(q, k, v, False) and taken > 0


def test_regression_fast_option_checks(no_launch):
    """validate.options' fast path (the defaults, session 25) takes only exact types: a
    bool softcap, an int dropout or a list window still run the full checks (and pass or
    raise as before)."""
    from flashtriton import validate
    q = torch.zeros(1, 4, 2, 16)
    base = dict(softmax_scale=None, window_size=(-1, -1), softcap=0.0, dropout_p=0.0, alibi_slopes=None, q=q, batch=1)
    validate.options(**base)
    validate.options(**{**base, "window_size": [-1, -1], "softcap": 0, "dropout_p": 0})
    for bad in (dict(window_size=(-1.0, -1)), dict(window_size=(-2, -1)), dict(softcap=float("nan")),
                dict(dropout_p=1.0), dict(window_size=(-1, -1, 0))):
        with pytest.raises(ValueError):
            validate.options(**{**base, **bad})
