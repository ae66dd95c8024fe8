"""Bitwise reproducibility: the backward pass with deterministic=True (and without it
wherever the fused Gluon backward does not run), repeated 20 times; the forward pass;
dropout under the same seed. deterministic=False at the fused backward's lengths (Hopper):
dk / dv bitwise, dq within fp32 summation order."""
import pytest
import torch

import flashtriton
from flashtriton import flash_attn_func, flash_attn_varlen_func

from conftest import DEVICE, kernel_backends
from helpers import rand_qkv, rand_varlen, spy

BACKENDS = kernel_backends() + ["reference"]
REPEATS = 20


def _bits(t):
    """The raw bits, so that NaN == NaN and -0.0 != 0.0."""
    return t.detach().contiguous().view(torch.int16 if t.element_size() == 2 else torch.int32)


def _same_bits(a, b):
    return all(torch.equal(_bits(x), _bits(y)) for x, y in zip(a, b))


@pytest.mark.parametrize("backend", BACKENDS)
def test_backward_is_bitwise_reproducible(backend):
    """GQA (the dK/dV of a kv head sum over its query heads), ALiBi, softcap, a window
    and dropout: 20 backward passes with deterministic=True give identical bits, and
    deterministic=False the same bits again (the fused Gluon backward, the one
    non-deterministic path, takes none of these features)."""
    q, k, v = rand_qkv(1, 24, 40, 2, 1, 32, torch.bfloat16, DEVICE, requires_grad=True)
    alibi = (torch.rand(2) * 0.3).to(DEVICE)
    kw = dict(dropout_p=0.1, causal=True, window_size=(30, -1), softcap=5.0, alibi_slopes=alibi)
    with flashtriton.use_backend(backend):
        torch.manual_seed(3)
        out = flash_attn_func(q, k, v, deterministic=True, **kw)
        dout = torch.randn_like(out)
        first = torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)
        for _ in range(REPEATS - 1):
            again = torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)
            assert _same_bits(first, again)
        torch.manual_seed(3)
        out = flash_attn_func(q, k, v, deterministic=False, **kw)
        assert _same_bits(first, torch.autograd.grad(out, (q, k, v), dout))
    assert all(torch.isfinite(g).all() for g in first)


@pytest.mark.parametrize("backend", BACKENDS)
def test_varlen_backward_is_bitwise_reproducible(backend):
    (q, k, v), varlen = rand_varlen([17, 0, 9], [20, 9, 33], 2, 1, 32, torch.float16, DEVICE, requires_grad=True)
    with flashtriton.use_backend(backend):
        out = flash_attn_varlen_func(q, k, v, *varlen, causal=True, deterministic=True)
        dout = torch.randn_like(out)
        first = torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)
        for _ in range(REPEATS - 1):
            assert _same_bits(first, torch.autograd.grad(out, (q, k, v), dout, retain_graph=True))


@pytest.mark.parametrize("backend", BACKENDS)
def test_forward_is_bitwise_reproducible(backend):
    """The forward pass with every feature, dense and varlen; dropout with the same seed."""
    q, k, v = rand_qkv(2, 33, 40, 4, 2, 40, torch.float16, DEVICE)
    (qv, kv, vv), varlen = rand_varlen([17, 33], [40, 33], 4, 2, 40, torch.float16, DEVICE)
    kw = dict(causal=True, window_size=(30, -1), softcap=5.0, alibi_slopes=(torch.rand(2, 4) * 0.3).to(DEVICE))

    def run():
        torch.manual_seed(9)
        with flashtriton.use_backend(backend):
            return (flash_attn_func(q, k, v, dropout_p=0.2, return_attn_probs=True, **kw)
                    + flash_attn_varlen_func(qv, kv, vv, *varlen, dropout_p=0.2, return_attn_probs=True, **kw))

    first = run()
    for _ in range(2):
        assert _same_bits(first, run())


@pytest.mark.parametrize("flag,torch_flag", [(False, False), (True, False), (False, True)])
def test_deterministic_reaches_the_backend(monkeypatch, flag, torch_flag):
    """deterministic=True, or torch.use_deterministic_algorithms(True), reaches the
    backend's bwd as AttnParams.deterministic (flash-attn's flag: the Triton backend
    reads it to keep deterministic calls off the fused Gluon backward, session 25)."""
    from flashtriton import reference_backend
    seen = spy(monkeypatch, reference_backend, "bwd", lambda *a, **k: a[6].deterministic)
    q, k, v = rand_qkv(1, 8, 8, 2, 2, 16, torch.float32, DEVICE, requires_grad=True)
    previous = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(torch_flag)
    try:
        with flashtriton.use_backend("reference"):
            out = flash_attn_func(q, k, v, causal=True, deterministic=flag)
            torch.autograd.grad(out, (q, k, v), torch.randn_like(out))
    finally:
        torch.use_deterministic_algorithms(previous)
    assert seen == [flag or torch_flag]


@pytest.mark.gpu
def test_backward_is_bitwise_reproducible_gpu():
    """Many programs in flight at once: where atomics would show nondeterminism."""
    q, k, v = rand_qkv(4, 1024, 1024, 16, 2, 128, torch.bfloat16, "cuda", requires_grad=True)
    out = flash_attn_func(q, k, v, causal=True, deterministic=True)
    dout = torch.randn_like(out)
    first = torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)
    for _ in range(REPEATS - 1):
        assert _same_bits(first, torch.autograd.grad(out, (q, k, v), dout, retain_graph=True))


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [False, True])
def test_nondeterministic_backward_routes_fused_gpu(monkeypatch, causal):
    """deterministic=False at the fused Gluon backward's lengths (policy.GLUON_BWD_FUSED_MIN_N)
    takes it on Hopper; deterministic=True never does. Repeated: dk / dv bitwise, dq
    within fp32 summation order of the deterministic one, both within the f64 criterion."""
    from flashtriton.launchers import backward_gluon
    from helpers import assert_close, reference_pair

    if torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("the fused Gluon backward is Hopper-only")
    calls = spy(monkeypatch, backward_gluon, "fused_into")
    q, k, v = rand_qkv(2, 1024, 1024, 8, 2, 128, torch.bfloat16, "cuda", requires_grad=True)
    out = flash_attn_func(q, k, v, causal=causal, deterministic=True)
    dout = torch.randn_like(out)
    exact = torch.autograd.grad(out, (q, k, v), dout)
    assert not calls, "deterministic=True took the fused (non-deterministic) backward"
    out = flash_attn_func(q, k, v, causal=causal)
    first = torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)
    assert calls, "deterministic=False did not take the fused backward"
    for _ in range(4):
        again = torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)
        assert _same_bits(first[1:], again[1:])
        assert (again[0].float() - first[0].float()).abs().max() <= 1e-2 * first[0].float().abs().max()
    truth, lowp = reference_pair(q, k, v, dout, softmax_scale=128 ** -0.5, window_right=0 if causal else -1)
    for name, i in (("dq", 0), ("dk", 1), ("dv", 2)):
        assert_close(name, first[i], truth[name], lowp[name], 3, torch.bfloat16)
        assert_close(name, exact[i], truth[name], lowp[name], 3, torch.bfloat16)
