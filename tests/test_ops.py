"""The torch.library ops: opcheck, fake (meta) shapes, torch.compile with fullgraph
forward and backward, and the choice of backend (backends.select, use_backend).
"""
import contextlib
import math

import pytest
import torch
import torch._dynamo.testing
from torch._subclasses.fake_tensor import FakeTensorMode

import flashtriton
from flashtriton import backends, flash_attn_func, flash_attn_varlen_func, ops, reference_backend

from conftest import DEVICE, kernel_backends
from helpers import assert_close, dropout_rng, rand_qkv, rand_varlen, reference_pair

ALL_BACKENDS = kernel_backends() + ["reference"]


def fwd_args(q, k, v, backend, varlen=None, *, scale=None, window=(-1, -1), softcap=0.0, alibi=None,
             dropout_p=0.0, seed=0):
    """Positional arguments of ops.attn_fwd."""
    cu_q, cu_k, max_q, max_k = varlen if varlen is not None else (None, None, 0, 0)
    rng = dropout_rng(seed, q.device) if dropout_p > 0 else None
    scale = scale if scale is not None else 1 / math.sqrt(q.shape[-1])
    return (q, k, v, cu_q, cu_k, max_q, max_k, scale, window[0], window[1], softcap, alibi, dropout_p, rng, backend)


# --- opcheck ------------------------------------------------------------------------

OPCHECK_CASES = [
    ("triton", False, dict()),
    ("triton", False, dict(window=(7, 0), softcap=3.0, alibi=True, dropout_p=0.2)),
    ("triton", True, dict(window=(-1, 0), alibi=True)),
    ("reference", False, dict(window=(5, 2), softcap=2.0, dropout_p=0.3)),
    ("reference", True, dict(window=(-1, 0))),
]


@pytest.mark.parametrize("backend,varlen,opts", [c for c in OPCHECK_CASES if c[0] in ALL_BACKENDS] +
                         [("cpu", v, o) for b, v, o in OPCHECK_CASES if b == "triton" and "cpu" in ALL_BACKENDS])
def test_opcheck_attn_fwd(backend, varlen, opts):
    """Schema, autograd registration, fake tensors and AOT dispatch (dynamic shapes)."""
    opts = dict(opts)
    alibi = (torch.rand(4) * 0.2).to(DEVICE) if opts.pop("alibi", False) else None
    if varlen:
        (q, k, v), vl = rand_varlen([9, 0, 20], [20, 3, 9], 4, 2, 40, torch.float16, DEVICE, requires_grad=True)
    else:
        q, k, v = rand_qkv(2, 20, 28, 4, 2, 40, torch.bfloat16, DEVICE, requires_grad=True)
        vl = None
    torch.library.opcheck(ops.attn_fwd, fwd_args(q, k, v, backend, vl, alibi=alibi, **opts))


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_opcheck_attn_bwd(backend):
    q, k, v = rand_qkv(1, 20, 28, 4, 2, 40, torch.float16, DEVICE)
    args = fwd_args(q, k, v, backend, window=(-1, 0), softcap=2.0)
    out, lse = ops.attn_fwd(*args)
    torch.library.opcheck(ops.attn_bwd, (torch.randn_like(out), q, k, v, out, lse) + args[3:])


# --- fake / meta shapes -----------------------------------------------------------------

def _like(a, b):
    return a.shape == b.shape and a.dtype == b.dtype and a.stride() == b.stride()


@pytest.mark.parametrize("backend", ALL_BACKENDS)
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
def test_fake_matches_real(backend, dtype):
    """The fake implementations give the shapes, dtypes and strides of the real outputs,
    dense and varlen, for non-contiguous (packed) inputs too."""
    qkv = torch.randn(2, 17, 3, 4, 40, dtype=dtype, device=DEVICE)
    q, k, v = qkv.unbind(2)
    (qv, kv, vv), vl = rand_varlen([5, 12], [7, 1], 4, 2, 40, dtype, DEVICE)
    for args in (fwd_args(q, k, v, backend, window=(-1, 0)), fwd_args(qv, kv, vv, backend, vl)):
        out, lse = ops.attn_fwd(*args)
        grads = ops.attn_bwd(torch.randn_like(out), *args[:3], out, lse, *args[3:])
        with FakeTensorMode(allow_non_fake_inputs=False) as mode:
            fargs = tuple(mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in args)
            f_out, f_lse = ops.attn_fwd(*fargs)
            f_grads = ops.attn_bwd(torch.empty_like(f_out), *fargs[:3], f_out, f_lse, *fargs[3:])
        assert _like(f_out, out) and _like(f_lse, lse)
        assert all(_like(f, r) for f, r in zip(f_grads, grads))


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_regression_gradient_layout_matches_fake(backend):
    """The reference backend returned dq, dk, dv in the layout its einsums left them
    (e.g. strides (800, 40, 800, 1) for (1, 20, 4, 40)), while the fake implementation
    declares contiguous gradients: opcheck failed, and compiled graphs would assume a
    wrong layout. Every backend now returns them contiguous."""
    q, k, v = rand_qkv(1, 20, 28, 4, 2, 40, torch.float16, DEVICE)
    args = fwd_args(q, k, v, backend, window=(-1, 0))
    out, lse = ops.attn_fwd(*args)
    for g in ops.attn_bwd(torch.randn_like(out), q, k, v, out, lse, *args[3:]):
        assert g.is_contiguous() and g.stride() == torch.empty(g.shape).stride()


def test_meta_tensors_through_the_api():
    """Shape inference on the meta device through the public API (it picks the
    reference backend there, whose op dispatches to the fake implementation)."""
    q = torch.empty(2, 30, 8, 96, dtype=torch.bfloat16, device="meta", requires_grad=True)
    k = torch.empty(2, 45, 2, 96, dtype=torch.bfloat16, device="meta", requires_grad=True)
    v = torch.empty(2, 45, 2, 96, dtype=torch.bfloat16, device="meta", requires_grad=True)
    out, lse, s = flash_attn_func(q, k, v, causal=True, return_attn_probs=True)
    assert out.device.type == "meta" and out.shape == q.shape and out.dtype == q.dtype
    assert lse.shape == (2, 8, 30) and lse.dtype == torch.float32 and s.shape == (2, 8, 30, 45)
    dq, dk, dv = torch.autograd.grad(out.sum(), (q, k, v))
    assert dq.shape == q.shape and dk.shape == k.shape and dv.shape == v.shape


# --- torch.compile -------------------------------------------------------------------

def _compiled(fn, backend="aot_eager", **kw):
    torch._dynamo.reset()
    counter = torch._dynamo.testing.CompileCounterWithBackend(backend)
    return torch.compile(fn, fullgraph=True, backend=counter, **kw), counter


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_compile_fullgraph_forward_backward(backend):
    """torch.compile(fullgraph=True) of a function calling flash_attn_func: one graph,
    no break, forward and backward equal to eager (bitwise: aot_eager runs the same
    op), and the op sits in the graph."""
    q, k, v = rand_qkv(2, 40, 56, 4, 2, 40, torch.float16, DEVICE, requires_grad=True)
    alibi = (torch.rand(4) * 0.2).to(DEVICE)

    def loss_fn(q, k, v, alibi):
        out = flash_attn_func(q * 1.5, k, v, causal=True, alibi_slopes=alibi, softcap=5.0, window_size=(20, -1))
        return (out.float() ** 2).sum()

    fn, counter = _compiled(loss_fn)
    with flashtriton.use_backend(backend):
        loss = fn(q, k, v, alibi)
        grads = torch.autograd.grad(loss, (q, k, v))
        loss_e = loss_fn(q, k, v, alibi)
        grads_e = torch.autograd.grad(loss_e, (q, k, v))
    assert counter.frame_count == 1
    assert "flashtriton.attn_fwd" in counter.graphs[0].code
    assert torch.equal(loss, loss_e)
    assert all(torch.equal(a, b) for a, b in zip(grads, grads_e))


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_compile_fullgraph_varlen_dropout(backend):
    """Varlen with dropout in one graph: the same seed gives the same result compiled
    and eager (aot_eager draws the rng state from torch's generator as eager does)."""
    (q, k, v), (cu_q, cu_k, max_q, max_k) = rand_varlen([17, 0, 30], [20, 9, 30], 4, 2, 32, torch.bfloat16,
                                                         DEVICE, requires_grad=True)

    def loss_fn(q, k, v, cu_q, cu_k):
        out = flash_attn_varlen_func(q, k, v, cu_q, cu_k, max_q, max_k, dropout_p=0.25, causal=True)
        return out.float().sin().sum()

    fn, counter = _compiled(loss_fn)
    with flashtriton.use_backend(backend):
        torch.manual_seed(7)
        loss = fn(q, k, v, cu_q, cu_k)
        grads = torch.autograd.grad(loss, (q, k, v))
        torch.manual_seed(7)
        loss_e = loss_fn(q, k, v, cu_q, cu_k)
        grads_e = torch.autograd.grad(loss_e, (q, k, v))
    assert counter.frame_count == 1
    assert torch.equal(loss, loss_e)
    assert all(torch.equal(a, b) for a, b in zip(grads, grads_e))


def test_compile_inductor():
    """The default compiler (inductor) around the op: same values as eager."""
    backend = kernel_backends()[0]
    q, k, v = rand_qkv(1, 33, 33, 2, 1, 32, torch.float16, DEVICE, requires_grad=True)

    def loss_fn(q, k, v):
        return flash_attn_func(q, k, v, causal=True).float().square().sum()

    fn, counter = _compiled(loss_fn, backend="inductor")
    with flashtriton.use_backend(backend):
        loss = fn(q, k, v)
        grads = torch.autograd.grad(loss, (q, k, v))
        loss_e = loss_fn(q, k, v)
        grads_e = torch.autograd.grad(loss_e, (q, k, v))
    assert counter.frame_count == 1
    torch.testing.assert_close(loss, loss_e, rtol=1e-5, atol=0)
    for a, b in zip(grads, grads_e):
        torch.testing.assert_close(a, b, rtol=1e-3, atol=1e-3)  # dout may round differently


@pytest.mark.parametrize("backend", ALL_BACKENDS)
@pytest.mark.parametrize("dynamic", [None, True])
def test_compile_dynamic_shapes(backend, dynamic):
    """New sequence lengths: with automatic dynamic shapes (dynamic=None) one
    recompilation makes the graph dynamic, and then no more; with dynamic=True the
    first graph serves them all."""
    fn, counter = _compiled(lambda q, k, v: flash_attn_func(q, k, v, causal=True), dynamic=dynamic)
    frames = []
    with flashtriton.use_backend(backend):
        for n in (24, 37, 50):
            q, k, v = rand_qkv(1, n, n + 5, 2, 2, 32, torch.float16, DEVICE)
            out = fn(q, k, v)
            frames.append(counter.frame_count)
            truth, lowp = reference_pair(q, k, v, softmax_scale=32 ** -0.5, window_right=0)
            assert_close("out", out, truth["out"], lowp["out"], 2, torch.float16)
    assert frames[2] == frames[1] and (dynamic or frames[1] == frames[0] + 1), frames


def test_regression_compile_dynamic_float_options():
    """Under torch.compile(dynamic=True) python floats are symbolic, and validation's
    math.isfinite(softcap) was a graph break ("torch.* op returned non-Tensor"), so
    fullgraph compilation failed. Validation now uses comparisons."""
    q, k, v = rand_qkv(1, 20, 20, 2, 2, 32, torch.float16, DEVICE)
    fn, _ = _compiled(lambda q, k, v: flash_attn_func(q, k, v), dynamic=True)
    with flashtriton.use_backend("reference"):
        out = fn(q, k, v)
    truth, lowp = reference_pair(q, k, v, softmax_scale=32 ** -0.5)
    assert_close("out", out, truth["out"], lowp["out"], 2, torch.float16)


def test_regression_compile_fullgraph_backend_select():
    """Dynamo refuses to trace flashtriton/backends.py: its skip rule "triton/backends"
    matches that path. backends.select was called there, so torch.compile(fullgraph=True)
    of any flash_attn_func call failed with "Attempted to call function marked as
    skipped". The API now evaluates the choice at trace time and guards on what it
    reads: switching use_backend or FLASHTRITON_BACKEND recompiles for the new backend."""
    q, k, v = rand_qkv(1, 20, 20, 2, 2, 32, torch.float16, DEVICE)
    fn, counter = _compiled(lambda q, k, v: flash_attn_func(q, k, v))
    kernel = kernel_backends()[0]
    with flashtriton.use_backend(kernel):
        fn(q, k, v)
        fn(q, k, v)
    assert counter.frame_count == 1 and f"'{kernel}'" in counter.graphs[-1].code
    with flashtriton.use_backend("reference"):
        fn(q, k, v)
    assert counter.frame_count == 2 and "'reference'" in counter.graphs[-1].code


# --- the ops' autograd --------------------------------------------------------------

@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_regression_dout_inner_stride(backend):
    """An incoming gradient whose last dim is strided (here every other element of a
    larger tensor; the outer strides are 16-byte aligned, so no copy was triggered) was
    read as if contiguous: dq, dk, dv were garbage. The launchers now copy it."""
    q, k, v = rand_qkv(2, 40, 40, 2, 2, 32, torch.float16, DEVICE, requires_grad=True)
    with flashtriton.use_backend(backend):
        out = flash_attn_func(q, k, v)
        dout = torch.randn(*out.shape, 2, dtype=out.dtype, device=DEVICE)[..., 0]
        assert dout.stride(-1) == 2
        grads = torch.autograd.grad(out, (q, k, v), dout)
    truth, lowp = reference_pair(q, k, v, dout.contiguous(), softmax_scale=32 ** -0.5)
    for name, g in zip(("dq", "dk", "dv"), grads):
        assert_close(name, g, truth[name], lowp[name], 3, torch.float16)


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_regression_misaligned_contiguous_input(backend):
    """A contiguous q, k or v whose base is not 16-byte aligned (a view 2 bytes into a
    buffer) reached the TMA descriptors unchanged: the launchers' copy used contiguous(),
    which returns such a view itself ("base must be 16-byte aligned" under the
    interpreter). They clone it now. Found 2026-11-29 by tests/test_plans.py."""
    shape = (1, 40, 2, 64)
    bufs = [torch.randn(1 + 40 * 2 * 64, dtype=torch.float16, device=DEVICE) for _ in range(3)]
    q, k, v = (b[1:].view(shape).requires_grad_(True) for b in bufs)
    assert q.is_contiguous() and q.data_ptr() % 16 != 0
    dout = torch.randn(shape, dtype=torch.float16, device=DEVICE)
    with flashtriton.use_backend(backend):
        out = flash_attn_func(q, k, v)
        grads = torch.autograd.grad(out, (q, k, v), dout)
    truth, lowp = reference_pair(q, k, v, dout, softmax_scale=64 ** -0.5)
    assert_close("out", out, truth["out"], lowp["out"], 2, torch.float16)
    for name, g in zip(("dq", "dk", "dv"), grads):
        assert_close(name, g, truth[name], lowp[name], 3, torch.float16)


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_regression_lse_is_not_differentiable(backend):
    """The backward pass has no lse term, yet the returned lse required grad, so a loss
    using it got a silent zero contribution. lse is now marked non-differentiable."""
    q, k, v = rand_qkv(1, 20, 20, 2, 2, 32, torch.float16, DEVICE, requires_grad=True)
    with flashtriton.use_backend(backend):
        out, lse, _ = flash_attn_func(q, k, v, return_attn_probs=True)
    assert out.requires_grad and not lse.requires_grad
    with pytest.raises(RuntimeError):
        torch.autograd.grad(lse.sum(), q)


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_gradients_only_where_required(backend):
    """Inputs that do not require grad get none; the others are right."""
    q, k, v = rand_qkv(1, 20, 30, 4, 2, 32, torch.bfloat16, DEVICE)
    k.requires_grad_(True)
    with flashtriton.use_backend(backend):
        out = flash_attn_func(q, k, v, causal=True)
        dout = torch.randn_like(out)
        (dk,) = torch.autograd.grad(out, (k,), dout)
    truth, lowp = reference_pair(q, k, v, dout, softmax_scale=32 ** -0.5, window_right=0)
    assert_close("dk", dk, truth["dk"], lowp["dk"], 3, torch.bfloat16)


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_autograd_node_only_when_needed(backend):
    """An eager call builds an autograd node only when a gradient can flow (grad mode on
    and an input requiring grad: session 13 took the node off the others' host path); the
    output is the same either way, bitwise."""
    q, k, v = rand_qkv(1, 33, 47, 4, 2, 64, torch.bfloat16, DEVICE)
    with flashtriton.use_backend(backend):
        plain = flash_attn_func(q, k, v, causal=True)
        assert plain.grad_fn is None and not plain.requires_grad
        v.requires_grad_(True)
        tracked = flash_attn_func(q, k, v, causal=True)
        assert tracked.grad_fn is not None and tracked.requires_grad
        with torch.no_grad():
            untracked = flash_attn_func(q, k, v, causal=True)
        assert untracked.grad_fn is None and not untracked.requires_grad
        (dv,) = torch.autograd.grad(tracked, (v,), torch.randn_like(tracked))
    assert torch.equal(plain, tracked) and torch.equal(plain, untracked)
    assert torch.isfinite(dv).all() and dv.abs().sum() > 0


# --- backend selection -------------------------------------------------------------------

def test_default_backend_by_device():
    assert backends.default_for(torch.device("cuda", 0)) == "triton"
    assert backends.default_for(torch.device("cpu")) == ("cpu" if backends.cpu_available() else "reference")
    assert backends.default_for(torch.device("meta")) == "reference"


def test_select_precedence(monkeypatch):
    """use_backend (innermost first) > FLASHTRITON_BACKEND > the device's default."""
    cpu = torch.device(DEVICE)  # the device the kernels run on here (the GPU when there is one)
    monkeypatch.delenv("FLASHTRITON_BACKEND", raising=False)
    assert backends.select(cpu) == backends.default_for(cpu)
    monkeypatch.setenv("FLASHTRITON_BACKEND", "reference")
    assert backends.select(cpu) == "reference"
    kernel = kernel_backends()[0]
    with flashtriton.use_backend(kernel):
        assert backends.select(cpu) == kernel
        with flashtriton.use_backend("reference"):
            assert backends.select(cpu) == "reference"
        assert backends.select(cpu) == kernel
    with pytest.raises(RuntimeError):
        with flashtriton.use_backend(kernel):
            raise RuntimeError("boom")
    assert backends.select(cpu) == "reference" and not backends._override  # restored after an exception
    assert flashtriton.use_backend is backends.use_backend


def test_select_device_kinds(monkeypatch):
    """select() tells the device kinds apart by comparing with torch.device("cpu") before it reads
    device.type (session 56: cheaper with cold caches): CPU devices in every spelling, CUDA and meta."""
    monkeypatch.delenv("FLASHTRITON_BACKEND", raising=False)
    for dev in (torch.device("cpu"), torch.empty(1).device, torch.device("cpu", 0)):
        assert backends.select(dev) == backends.default_for(torch.device("cpu"))
    assert backends.select(torch.device("meta")) == "reference"
    with flashtriton.use_backend("cpu" if backends.cpu_available() else "reference"):
        with pytest.raises(ValueError, match="needs CPU tensors") if backends.cpu_available() else \
                contextlib.nullcontext():
            backends.select(torch.device("cuda", 0))
    with flashtriton.use_backend("triton"):
        if not backends._interpreting():
            with pytest.raises(ValueError, match="needs CUDA tensors"):
                backends.select(torch.device("cpu"))


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_use_backend_routes_the_call(backend, monkeypatch):
    """Forward and backward run on the chosen backend (and only there)."""
    calls = []
    for name in ALL_BACKENDS:
        mod = backends.get(name)
        for fn in ("fwd", "bwd"):
            real = getattr(mod, fn)
            monkeypatch.setattr(mod, fn,
                                lambda *a, _n=name, _f=fn, _r=real, **kw: calls.append((_n, _f)) or _r(*a, **kw))
    q, k, v = rand_qkv(1, 20, 20, 2, 2, 32, torch.float16, DEVICE, requires_grad=True)
    with flashtriton.use_backend(backend):
        out = flash_attn_func(q, k, v)
        torch.autograd.grad(out.sum(), q)
    assert calls == [(backend, "fwd"), (backend, "bwd")]


def test_backend_modules_share_the_interface():
    for name in ALL_BACKENDS:
        mod = backends.get(name)
        assert all(callable(getattr(mod, fn, None)) for fn in ("fwd", "bwd", "dropout_mask")), name
    assert backends.get("reference") is reference_backend


@pytest.mark.gpu
def test_cuda_defaults_to_triton():
    q, k, v = rand_qkv(1, 64, 64, 2, 2, 64, torch.float16, "cuda")
    assert backends.select(q.device) == "triton"
    flash_attn_func(q, k, v)


# --- CUDA graphs ---------------------------------------------------------------------

def _capture(fn):
    """fn captured in a CUDA graph, warmed up first on a side stream (as torch.cuda.
    make_graphed_callables does); returns (graph, fn's outputs inside the capture)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        outs = fn()
    return graph, outs


@pytest.mark.gpu
@pytest.mark.parametrize("b,n,heads,d,causal", [
    (2, 300, (4, 2), 128, True),        # bwd.py, masked tiles, GQA
    (1, 2048, (4, 4), 64, False),       # the whole-call warp-specialized backward
    (1, 4096, (2, 1), 128, True),       # the Gluon causal forward; the split path (deterministic) / fused
    (1, 4096, (2, 1), 128, False),      # the Gluon forward (launchers/forward_gluon.py, session 23)
    (1, 8192, (2, 1), 128, True),       # its causal variant
    (2, 113, (2, 2), 256, False),
    (1, 1024, (4, 2), 256, False),      # the D = 256 Gluon forward and fused backward (session 32)
    (1, 2048, (4, 2), 256, True),       # their causal variants
])
def test_forward_backward_in_cuda_graph_gpu(b, n, heads, d, causal):
    """A training step's attention (forward and backward) captured in one CUDA graph, then
    replayed on new inputs copied into the captured ones, gives bitwise what eager calls
    give: nothing in either pass synchronises with the host or allocates outside the
    capture's pool. With deterministic=False the D = 128 rows from 1k take the fused Gluon
    backward (session 25), the D = 256 ones its D = 256 form (session 32; added to this test by
    the session-32 review), whose dq is summed in any order: dq within that order there
    (dk / dv and out bitwise), every gradient bitwise with deterministic=True."""
    q, k, v = rand_qkv(b, n, n, *heads, d, torch.bfloat16, "cuda", requires_grad=True)
    dout = torch.randn_like(q)
    for deterministic in (True, False):
        def step():
            out = flash_attn_func(q, k, v, causal=causal, deterministic=deterministic)
            return (out, *torch.autograd.grad(out, (q, k, v), dout))

        graph, static = _capture(step)
        for _ in range(2):
            with torch.no_grad():
                for t in (q, k, v, dout):
                    t.copy_(torch.randn_like(t))
            graph.replay()
            eager = step()
            for name, got, want in zip(("out", "dq", "dk", "dv"), static, eager):
                if name == "dq" and not deterministic:
                    assert (got.float() - want.float()).abs().max() <= 1e-2 * want.float().abs().max(), name
                else:
                    assert torch.equal(got, want), f"{name}: the replay differs from the eager call"


@pytest.mark.gpu
def test_dropout_in_cuda_graph_gpu():
    """Dropout inside a captured step: the seed is drawn from torch's graph-safe generator,
    so every replay draws a fresh mask (as torch's own dropout does in graphs), and a
    replay after torch.cuda.manual_seed(s) computes bitwise what an eager step after
    torch.cuda.manual_seed(s) computes (mask, output and gradients)."""
    q, k, v = rand_qkv(1, 256, 256, 4, 4, 128, torch.bfloat16, "cuda", requires_grad=True)
    dout = torch.randn_like(q)

    def step():
        out = flash_attn_func(q, k, v, dropout_p=0.25, causal=True)
        return (out, *torch.autograd.grad(out, (q, k, v), dout))

    graph, static = _capture(step)
    graph.replay()
    first = [t.clone() for t in static]
    graph.replay()
    assert not torch.equal(first[0], static[0]), "two replays drew the same dropout mask"
    for seed in (3, 4):
        torch.cuda.manual_seed(seed)
        graph.replay()
        torch.cuda.manual_seed(seed)
        eager = step()
        for name, got, want in zip(("out", "dq", "dk", "dv"), static, eager):
            assert torch.equal(got, want), f"{name}: the replay differs from the eager step (seed {seed})"
