"""Inputs and the error criterion shared by the tests.

Criterion (flash-attn's): the error of the kernel against a float64 reference is at
most `factor` times the error of the same computation done by plain PyTorch in the
input dtype, plus a tiny absolute floor. factor = 2 for outputs, 3 for gradients.
"""
import torch

from flashtriton import reference

ATOL_FLOOR = {torch.float16: 2e-5, torch.bfloat16: 1e-4, torch.float32: 1e-6}


def rand_qkv(batch, seqlen_q, seqlen_k, nheads, nheads_k, head_dim, dtype, device, requires_grad=False):
    """Fresh random normal inputs (never zeros)."""
    q = torch.randn(batch, seqlen_q, nheads, head_dim, dtype=dtype, device=device)
    k = torch.randn(batch, seqlen_k, nheads_k, head_dim, dtype=dtype, device=device)
    v = torch.randn(batch, seqlen_k, nheads_k, head_dim, dtype=dtype, device=device)
    return [t.requires_grad_(requires_grad) for t in (q, k, v)]


def max_err(a, b):
    a, b = a.double(), b.double()
    finite = torch.isfinite(b)
    if not torch.equal(torch.isfinite(a), finite):
        return float("inf")  # NaN or inf where the reference is finite (or the reverse)
    if not finite.any():
        return 0.0
    return (a[finite] - b[finite]).abs().max().item()


def assert_close(name, ours, ref64, ref_lowp, factor, dtype):
    err = max_err(ours, ref64)
    base = max_err(ref_lowp, ref64)
    assert err <= factor * base + ATOL_FLOOR[dtype], (
        f"{name}: error {err:.3e} exceeds {factor} x PyTorch's same-dtype error {base:.3e} (+{ATOL_FLOOR[dtype]:.0e})")


def reference_pair(q, k, v, dout=None, varlen=None, **kw):
    """(float64 truth, same-dtype PyTorch math): each a dict with out, lse and, when
    dout is given, dq, dk, dv."""
    res = []
    for cast in (torch.float64, q.dtype):
        args = [t.detach().to(cast) for t in (q, k, v)]
        if varlen is None:
            out, lse = reference.attention(*args, **kw)
        else:
            out, lse = reference.attention_varlen(*args, *varlen, **kw)
        r = dict(out=out, lse=lse)
        if dout is not None:
            r["dq"], r["dk"], r["dv"] = reference.attention_grad(dout.to(cast), *args, varlen_args=varlen, **kw)
        res.append(r)
    return res


def bound_ratios(ours, q, k, v, dout, **kw):
    """{"out", "dq", "dk", "dv"}: each of ours = (out, dq, dk, dv)'s error against float64 over the
    criterion's bound (2x / 3x the same-dtype PyTorch math's error + the floor; 1 = the bound), for the
    accuracy probes in bench/ (q, k, v, dout on the CPU; kw as reference.attention takes them)."""
    truth, lowp = reference_pair(q, k, v, dout, **kw)
    return {nm: max_err(x.detach().cpu(), truth[nm])
            / ((2 if nm == "out" else 3) * max_err(lowp[nm], truth[nm]) + ATOL_FLOOR[q.dtype])
            for nm, x in zip(("out", "dq", "dk", "dv"), ours)}

# ---------------------------------------------------------------------------
# Feature tests (varlen, masks, dropout, fp32): shared inputs and checks.
# ---------------------------------------------------------------------------
import math  # noqa: E402

RNG_HIGH = 2 ** 62  # the API draws its dropout rng state as randint(0, RNG_HIGH, (2,))


def cu_seqlens(lens, device):
    """int32 cumulative offsets (B + 1,) from a list of sequence lengths."""
    offs = [0]
    for n in lens:
        offs.append(offs[-1] + n)
    return torch.tensor(offs, dtype=torch.int32, device=device)


def rand_varlen(lens_q, lens_k, nheads, nheads_k, head_dim, dtype, device, requires_grad=False):
    """Packed random (total, H, D) q, k, v and their cu_seqlens / max_seqlen."""
    q = torch.randn(sum(lens_q), nheads, head_dim, dtype=dtype, device=device)
    k = torch.randn(sum(lens_k), nheads_k, head_dim, dtype=dtype, device=device)
    v = torch.randn(sum(lens_k), nheads_k, head_dim, dtype=dtype, device=device)
    varlen = (cu_seqlens(lens_q, device), cu_seqlens(lens_k, device), max(lens_q), max(lens_k))
    return [t.requires_grad_(requires_grad) for t in (q, k, v)], varlen


def dropout_rng(seed, device):
    """The rng state the API draws for dropout right after torch.manual_seed(seed).
    check_attention verifies it against the sign of S_dmask, so a change in how the
    API draws it fails loudly instead of silently comparing against the wrong mask."""
    torch.manual_seed(seed)
    return torch.randint(0, RNG_HIGH, (2,), dtype=torch.int64, device=device)


def reference_probs(q, k, varlen=None, **kw):
    """float64 softmax probabilities (B, H, Nq, Nk), zero-padded to (B, H, max_q, max_k)
    for varlen = (cu_q, cu_k, max_q, max_k); like S_dmask without the dropout sign."""
    q, k = q.detach().double(), k.detach().double()
    kw = {n: x for n, x in kw.items() if n not in ("dropout_p", "dropout_mask")}
    if varlen is None:
        return reference.attention(q, k, k, return_probs=True, **kw)[2]
    cu_q, cu_k, max_q, max_k = varlen
    cq, ck = cu_q.tolist(), cu_k.tolist()
    p = q.new_zeros(len(cq) - 1, q.shape[1], max_q, max_k)
    for i in range(len(cq) - 1):
        kwi = dict(kw)
        if kwi.get("alibi_slopes") is not None and kwi["alibi_slopes"].dim() == 2:
            kwi["alibi_slopes"] = kwi["alibi_slopes"][i]
        qi, ki = q[cq[i]:cq[i + 1]][None], k[ck[i]:ck[i + 1]][None]
        p[i, :, :qi.shape[1], :ki.shape[1]] = reference.attention(qi, ki, ki, return_probs=True, **kwi)[2][0]
    return p


def check_attention(backend, q, k, v, *, varlen=None, grads=True, causal=False, window_size=(-1, -1),
                    softcap=0.0, alibi_slopes=None, dropout_p=0.0, softmax_scale=None, seed=0,
                    check_probs=True, deterministic=False):
    """Runs flash_attn_func (or flash_attn_varlen_func when varlen = (cu_q, cu_k, max_q,
    max_k)) on `backend` with return_attn_probs=True and checks out, lse, dq, dk, dv and
    the probabilities of S_dmask against the float64 reference under the criterion.
    With dropout the reference uses the backend's own keep mask for this seed.
    Returns the results."""
    import flashtriton
    from flashtriton import backends
    from flashtriton.launchers.prefill import AttnParams, Varlen

    dtype = q.dtype
    scale = softmax_scale if softmax_scale is not None else 1.0 / math.sqrt(q.shape[-1])
    q, k, v = (t.detach().requires_grad_(grads) for t in (q, k, v))
    api_kw = dict(dropout_p=dropout_p, softmax_scale=softmax_scale, causal=causal, window_size=window_size,
                  softcap=softcap, alibi_slopes=alibi_slopes, deterministic=deterministic, return_attn_probs=True)
    torch.manual_seed(seed)
    with flashtriton.use_backend(backend):
        if varlen is None:
            out, lse, s_dmask = flashtriton.flash_attn_func(q, k, v, **api_kw)
        else:
            out, lse, s_dmask = flashtriton.flash_attn_varlen_func(q, k, v, *varlen, **api_kw)
        dout = torch.randn_like(out) if grads else None
        if grads:
            dq, dk, dv = torch.autograd.grad(out, (q, k, v), dout)
    window_left, window_right = window_size[0], 0 if causal else window_size[1]
    ref_kw = dict(softmax_scale=scale, window_left=window_left, window_right=window_right, softcap=softcap,
                  alibi_slopes=alibi_slopes)
    keep = None
    if dropout_p > 0:
        params = AttnParams(scale, window_left, window_right, softcap, dropout_p)
        keep = backends.get(backend).dropout_mask(q.detach(), k.detach(), params, dropout_rng(seed, q.device),
                                                  None if varlen is None else Varlen(*varlen))
        nonzero = s_dmask != 0
        assert torch.equal((s_dmask > 0)[nonzero], keep[nonzero]), "S_dmask's sign disagrees with the keep mask"
        ref_kw.update(dropout_p=dropout_p, dropout_mask=keep)
    truth, lowp = reference_pair(q, k, v, dout, varlen=None if varlen is None else varlen[:2], **ref_kw)

    if varlen is None:
        b, nq, h, _ = q.shape
        lse_shape, probs_shape = (b, h, nq), (b, h, nq, k.shape[1])
    else:
        lse_shape = (q.shape[1], q.shape[0])
        probs_shape = (varlen[0].numel() - 1, q.shape[1], varlen[2], varlen[3])
    assert out.shape == q.shape and out.dtype == dtype
    assert lse.shape == lse_shape and lse.dtype == torch.float32
    assert s_dmask.shape == probs_shape and s_dmask.dtype == dtype
    assert_close("out", out, truth["out"], lowp["out"], 2, dtype)
    assert_close("lse", lse, truth["lse"], lowp["lse"], 2, dtype)
    res = dict(out=out, lse=lse, s_dmask=s_dmask, keep=keep, dout=dout)
    if grads:
        for name, g, t in (("dq", dq, q), ("dk", dk, k), ("dv", dv, v)):
            assert g.shape == t.shape and g.dtype == dtype
            assert_close(name, g, truth[name], lowp[name], 3, dtype)
        res.update(dq=dq, dk=dk, dv=dv)
    if check_probs:
        p64 = reference_probs(q, k, varlen, **ref_kw)
        p_lowp = reference_probs(q.to(dtype), k.to(dtype), varlen, **ref_kw).to(dtype)
        # |S_dmask| are the probabilities, recomputed in fp32 as exp(s - lse) from the
        # kernel's lse and rounded to dtype: the floor allows a few fp32 ulps of the
        # exponent (which scale with |lse|) plus that rounding
        err = max_err(s_dmask.abs(), p64)
        assert err <= 2 * max_err(p_lowp, p64) + probs_floor(lse, dtype), f"S_dmask: error {err:.3e}"
    return res


def probs_floor(lse, dtype):
    """The absolute floor of an S_dmask check: the probabilities are exp(s - lse) from the kernel's fp32 lse,
    rounded to dtype, so a few fp32 ulps of the exponent (which scale with |lse|) plus that rounding."""
    finite_lse = lse[torch.isfinite(lse)]
    lse_max = finite_lse.abs().max().item() if finite_lse.numel() else 0.0
    return 8 * torch.finfo(torch.float32).eps * (1 + lse_max) + 2 * torch.finfo(dtype).eps


def naive_attention(q, k, v, *, softmax_scale, window_left=-1, window_right=-1, softcap=0.0, alibi_slopes=None,
                    dropout_p=0.0, dropout_mask=None):
    """Element-by-element float64 attention straight from the written semantics: an
    independent check of flashtriton.reference on tiny shapes. Returns (out, lse)."""
    b_, nq, h_, d = q.shape
    nk, hk_ = k.shape[1], k.shape[2]
    group = h_ // hk_
    out = torch.zeros(b_, nq, h_, d, dtype=torch.float64)
    lse = torch.full((b_, h_, nq), math.inf, dtype=torch.float64)
    q, k, v = q.double(), k.double(), v.double()
    for b in range(b_):
        for h in range(h_):
            hk = h // group
            for i in range(nq):
                scores = {}
                for j in range(nk):
                    if window_left >= 0 and j < i + nk - nq - window_left:
                        continue
                    if window_right >= 0 and j > i + nk - nq + window_right:
                        continue
                    s = float(q[b, i, h] @ k[b, j, hk]) * softmax_scale
                    if softcap > 0:
                        s = softcap * math.tanh(s / softcap)
                    if alibi_slopes is not None:
                        slope = float(alibi_slopes[h] if alibi_slopes.dim() == 1 else alibi_slopes[b, h])
                        s -= slope * abs(i + nk - nq - j)
                    scores[j] = s
                if not scores:
                    continue
                m = max(scores.values())
                z = sum(math.exp(s - m) for s in scores.values())
                lse[b, h, i] = m + math.log(z)
                for j, s in scores.items():
                    w = math.exp(s - m) / z
                    if dropout_p > 0:
                        w = w / (1 - dropout_p) if dropout_mask[b, h, i, j] else 0.0
                    out[b, i, h] += w * v[b, j, hk]
    return out, lse


def cpu_forward(q, k, v, **kw):
    """(out, lse) of flash_attn_func on the CPU backend (the compiled-kernel tests' call)."""
    import flashtriton
    with flashtriton.use_backend("cpu"):
        return flashtriton.flash_attn_func(q, k, v, return_attn_probs=True, **kw)[:2]


def spy(monkeypatch, module, name, record=lambda *a, **k: True):
    """Wrap module.name for the test: every call still runs the real function and
    appends record(*args, **kwargs) to the list returned (which path ran, with what)."""
    calls = []
    real = getattr(module, name)

    def wrapper(*args, **kwargs):
        calls.append(record(*args, **kwargs))
        return real(*args, **kwargs)
    monkeypatch.setattr(module, name, wrapper)
    return calls


def bwd_py_launches(monkeypatch, fields):
    """(kernel name "dkdv" / "dq", *fields(grid, kwargs)) of every kernels/bwd.py dK/dV and
    dQ launch made after the call (launchers go through plans.launch), in order."""
    from flashtriton.kernels import bwd as bwd_kernels
    from flashtriton.launchers import plans
    names = {bwd_kernels.attn_bwd_dkdv_kernel: "dkdv", bwd_kernels.attn_bwd_dq_kernel: "dq"}
    launched = []
    real = plans.launch

    def record(kernel, grid, *args, **kwargs):
        if kernel in names:
            launched.append((names[kernel], *fields(grid, kwargs)))
        return real(kernel, grid, *args, **kwargs)
    monkeypatch.setattr(plans, "launch", record)
    return launched


def triton_grads(q, k, v, dout, **kw):
    """dq, dk, dv of flash_attn_func(q, k, v, **kw) on the Triton backend, on fresh leaves
    (torch seed 7 first: with dropout the same mask every call)."""
    import flashtriton
    q, k, v = (t.detach().requires_grad_(True) for t in (q, k, v))
    torch.manual_seed(7)
    with flashtriton.use_backend("triton"):
        out = flashtriton.flash_attn_func(q, k, v, **kw)
    return torch.autograd.grad(out, (q, k, v), dout)


def graph_replay(fn, inputs, new_inputs):
    """fn(*inputs) captured in a CUDA graph (on a side stream, as torch requires), then new_inputs copied into
    inputs and the graph replayed: the captured call's output, now for new_inputs."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            out = fn(*inputs)
    torch.cuda.current_stream().wait_stream(s)
    for dst, src in zip(inputs, new_inputs):
        dst.copy_(src)
    g.replay()
    torch.cuda.synchronize()
    return out


def offline_compile(script: str, *args: str, timeout: int = 900):
    """Runs `script` (Python source; sys.argv[1] is the repo's bench folder, then args) in a subprocess with the
    Triton interpreter off and src on the path, for sm_90a compiles without a GPU (bench/gluon_fwd_compile.py and
    kin); returns the JSON that its last line of output prints. Fails the test with its stderr's tail otherwise."""
    import json
    import os
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    res = subprocess.run([sys.executable, "-c", script, os.path.join(root, "bench"), *args], capture_output=True,
                         text=True, env=dict(os.environ, TRITON_INTERPRET="0", PYTHONPATH=os.path.join(root, "src")),
                         timeout=timeout)
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout.strip().splitlines()[-1])


def prefill_kernel_available() -> bool:
    """Whether the CPU backend's compiled forward builds here with both its kernels (float32 and bf16: capability bits
    1 and 2; other bits, such as fp16's 8, do not matter - session 64's regression test)."""
    from flashtriton.cpu import native_prefill
    try:
        return native_prefill.load().ft_prefill_caps() & 3 == 3
    except native_prefill.NativeUnavailable:
        return False
