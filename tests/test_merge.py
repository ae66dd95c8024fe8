"""merge_attention_states: partial attentions over disjoint key sets, merged by their
logsumexp, equal attention over the union (against the float64 reference)."""
import math

import pytest
import torch

import flashtriton
from flashtriton import backends, flash_attn_with_kvcache, merge_attention_states, reference

from conftest import DEVICE

BACKENDS = ["triton", "reference"] + (["cpu"] if backends.cpu_available() and DEVICE == "cpu" else [])


def _parts(b=2, sq=3, h=4, hk=2, d=32, cuts=(0, 10, 35, 50), dtype=torch.float32):
    """(outs, lses, full out, full lse): attention over key ranges cut at `cuts`, in float64."""
    q = torch.randn(b, sq, h, d, dtype=torch.float64, device=DEVICE)
    k = torch.randn(b, cuts[-1], hk, d, dtype=torch.float64, device=DEVICE)
    v = torch.randn(b, cuts[-1], hk, d, dtype=torch.float64, device=DEVICE)
    outs, lses = [], []
    for lo, hi in zip(cuts, cuts[1:]):
        o, l = reference.attention(q, k[:, lo:hi], v[:, lo:hi], softmax_scale=1 / math.sqrt(d))
        outs.append(o.to(dtype))
        lses.append(l.to(torch.float32))
    out, lse = reference.attention(q, k, v, softmax_scale=1 / math.sqrt(d))
    return outs, lses, out, lse


def _check(out, lse, ref_out, ref_lse, dtype):
    tol = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}[dtype]
    assert out.dtype == dtype and lse.dtype == torch.float32
    assert (out.double() - ref_out).abs().max().item() < tol
    assert (lse.double() - ref_lse).abs().max().item() < 1e-5


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("cuts", [(0, 50), (0, 20, 50), (0, 1, 13, 40, 50)])
def test_merge_equals_full(backend, dtype, cuts):
    outs, lses, ref_out, ref_lse = _parts(cuts=cuts, dtype=dtype)
    with flashtriton.use_backend(backend):
        out, lse = merge_attention_states(outs, lses)
    _check(out, lse, ref_out, ref_lse, dtype)


@pytest.mark.parametrize("backend", BACKENDS)
def test_layouts(backend):
    """A stacked tensor works like a list, and the varlen layout (T, H, D) with (H, T)
    works like the batched one; strided views need no copy."""
    outs, lses, ref_out, ref_lse = _parts()
    with flashtriton.use_backend(backend):
        a = merge_attention_states(torch.stack(outs), torch.stack(lses))
        b, sq, h, d = outs[0].shape
        v_outs = [o.reshape(b * sq, h, d) for o in outs]
        v_lses = [l.permute(1, 0, 2).reshape(h, b * sq) for l in lses]
        vo, vl = merge_attention_states(tuple(v_outs), tuple(v_lses))
        # a strided view: the parts as slices of one buffer along the head dim
        big = torch.stack(outs, 0).transpose(0, 3).contiguous().transpose(0, 3)
        s = merge_attention_states(big, torch.stack(lses))
    _check(*a, ref_out, ref_lse, torch.float32)
    _check(vo.reshape(b, sq, h, d), vl.reshape(h, b, sq).permute(1, 0, 2), ref_out, ref_lse, torch.float32)
    _check(*s, ref_out, ref_lse, torch.float32)


@pytest.mark.parametrize("backend", BACKENDS)
def test_empty_parts(backend):
    """A part that saw no key (lse +inf, the kernels' mark; or -inf) has weight 0, even
    with garbage in its output; rows empty in every part output 0 with lse +inf."""
    outs, lses, ref_out, ref_lse = _parts(cuts=(0, 20, 50))
    empty_out = torch.full_like(outs[0], float("nan"))
    empty_lse = torch.full_like(lses[0], float("inf"))
    minus = torch.full_like(lses[0], float("-inf"))
    with flashtriton.use_backend(backend):
        out, lse = merge_attention_states([outs[0], empty_out, outs[1]], [lses[0], empty_lse, lses[1]])
        out2, lse2 = merge_attention_states([empty_out, outs[0], outs[1]], [minus, lses[0], lses[1]])
        none_out, none_lse = merge_attention_states([empty_out, torch.zeros_like(outs[0])], [empty_lse, empty_lse])
    _check(out, lse, ref_out, ref_lse, torch.float32)
    _check(out2, lse2, ref_out, ref_lse, torch.float32)
    assert torch.all(none_out == 0) and torch.all(torch.isinf(none_lse) & (none_lse > 0))


@pytest.mark.parametrize("backend", BACKENDS)
def test_nan_propagates(backend):
    outs, lses, _, _ = _parts(cuts=(0, 20, 50))
    outs[1][0, 1, 2, 3] = float("nan")
    with flashtriton.use_backend(backend):
        out, _ = merge_attention_states(outs, lses)
    assert torch.isnan(out[0, 1, 2, 3])
    finite = torch.ones_like(out, dtype=torch.bool)
    finite[0, 1, 2, 3] = False
    assert torch.isfinite(out[finite]).all()


@pytest.mark.parametrize("backend", ["triton"])
def test_cascade_decoding(backend):
    """Prefix sharing: attention over a shared prefix cache and over each sequence's own
    cache, merged, equals attention over the concatenation."""
    b, h, hk, d, n_prefix, n_own = 3, 4, 2, 32, 40, 25
    q = torch.randn(b, 1, h, d, dtype=torch.float16, device=DEVICE)
    prefix_k = torch.randn(1, n_prefix, hk, d, dtype=torch.float16, device=DEVICE)
    prefix_v = torch.randn(1, n_prefix, hk, d, dtype=torch.float16, device=DEVICE)
    own_k = torch.randn(b, n_own, hk, d, dtype=torch.float16, device=DEVICE)
    own_v = torch.randn(b, n_own, hk, d, dtype=torch.float16, device=DEVICE)
    lens = torch.tensor([25, 3, 0], dtype=torch.int32, device=DEVICE)
    zeros = torch.zeros(b, dtype=torch.int32, device=DEVICE)
    with flashtriton.use_backend(backend):
        o1, l1 = flash_attn_with_kvcache(q, prefix_k, prefix_v, cache_seqlens=n_prefix, cache_batch_idx=zeros,
                                         return_softmax_lse=True)
        o2, l2 = flash_attn_with_kvcache(q, own_k, own_v, cache_seqlens=lens, return_softmax_lse=True,
                                         num_splits=2)
        out, lse = merge_attention_states([o1, o2], [l1, l2])
    for i in range(b):
        n = int(lens[i])
        k = torch.cat([prefix_k[0], own_k[i, :n]])[None].double()
        v = torch.cat([prefix_v[0], own_v[i, :n]])[None].double()
        ref_out, ref_lse = reference.attention(q[i:i + 1].double(), k, v, softmax_scale=1 / math.sqrt(d))
        assert (out[i:i + 1].double() - ref_out).abs().max().item() < 2e-3
        assert (lse[i:i + 1].double() - ref_lse).abs().max().item() < 1e-4


@pytest.mark.parametrize("make,exc,msg", [
    (lambda o, l: ([], []), TypeError, "outs: expected a non-empty"),
    (lambda o, l: (o, l[:1]), ValueError, "lses: 1 parts"),
    (lambda o, l: (o, [x.half() for x in l]), TypeError, "lses: dtype"),
    (lambda o, l: ([o[0], o[1][:, :2]], l), ValueError, "outs[1]: shape"),
    (lambda o, l: (o, [x.transpose(1, 2) for x in l]), ValueError, "lses: each part must have shape"),
    (lambda o, l: ([x[0, 0] for x in o], [x[0, :, 0] for x in l]), ValueError, ">= 3 dims"),
    (lambda o, l: ([x.int() for x in o], l), TypeError, "outs: dtype"),
    (lambda o, l: (torch.stack(o), l[:1]), ValueError, "lses: 1 parts, but outs has 2"),
    (lambda o, l: ("x", l), TypeError, "outs: expected"),
])
def test_bad_input(make, exc, msg):
    outs, lses, _, _ = _parts(cuts=(0, 20, 50))
    with flashtriton.use_backend("triton"), pytest.raises(exc) as info:
        merge_attention_states(*make(outs, lses))
    assert msg in str(info.value), str(info.value)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_large_gpu(dtype):
    outs, lses, ref_out, ref_lse = _parts(b=4, sq=700, h=16, hk=4, d=128, cuts=(0, 1000, 1500, 4000), dtype=dtype)
    out, lse = merge_attention_states(outs, lses)
    _check(out, lse, ref_out, ref_lse, dtype)
