"""Session 60: dense one-row forwards of 16-bit inputs (fp32 too since session 61) (flash_attn_func at Nq = 1, the generation-loop call) with at
least policy.ONE_ROW_DECODE_MIN_NK keys run the split-KV decode kernel (launchers/policy.one_row_decode,
launchers/forward._fwd_one_row) - the same semantics as the prefill kernels (masks and ALiBi aligned bottom-right),
the prefill backward after it. The semantic tests lower the threshold to 1 (the interpreter's time)."""
import pytest
import torch

import flashtriton
from flashtriton.launchers import forward, policy

from conftest import DEVICE, kernel_backends
from helpers import check_attention, rand_qkv, rand_varlen

OPTIONS = [
    dict(),
    dict(causal=True),
    dict(window_size=(7, 0)),
    dict(window_size=(40, 3)),
    dict(alibi=True, softcap=5.0, causal=True),
    dict(softmax_scale=-0.3),
]


def _threshold_one(monkeypatch):
    """The route from one key (the interpreter's time), every dtype."""
    monkeypatch.setattr(policy, "ONE_ROW_DECODE_MIN_NK", 1)
    monkeypatch.setattr(policy, "ONE_ROW_DECODE_MIN_NK_FP32", 1)


def _launched(monkeypatch):
    """The decode launcher's calls (a spy on launchers/forward's use of it)."""
    calls = []
    real = forward.decode.kvcache_fwd

    def spy(*a, **kw):
        calls.append(a[0].shape)
        return real(*a, **kw)
    monkeypatch.setattr(forward.decode, "kvcache_fwd", spy)
    return calls


# (nk, heads, d, OPTIONS index): every option once, the core tests' awkward shapes
SHAPES = [(1, (4, 2), 40, 0), (17, (4, 4), 80, 1), (113, (8, 2), 96, 2), (1023, (2, 1), 192, 3),
          (300, (4, 1), 128, 4), (64, (6, 3), 256, 5)]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("nk,heads,d,opt", SHAPES)
def test_one_row_on_the_decode_kernel(request, monkeypatch, dtype, nk, heads, d, opt):
    if dtype == torch.float32 and nk == 1 and DEVICE == "cpu":
        # the backward's one-key fp32 gradients under the interpreter, routed or not (test_fp32.ONE_KEY_LIMITS)
        request.applymarker(pytest.mark.xfail(strict=True, reason="one-key fp32 gradients (test_fp32.ONE_KEY_LIMITS)"))
    opts = dict(OPTIONS[opt])
    if opts.pop("alibi", False):
        opts["alibi_slopes"] = (torch.rand(heads[0]) * 0.3).to(DEVICE)
    _threshold_one(monkeypatch)
    calls = _launched(monkeypatch)
    q, k, v = rand_qkv(2, 1, nk, *heads, d, dtype, DEVICE)
    check_attention("triton", q, k, v, **opts)
    assert calls, "the one-row forward did not take the decode kernel"


VARLEN = [([300, 0, 17, 1], (4, 2), 64, dict(causal=True)), ([5, 40, 129], (6, 3), 96, dict(window_size=(9, 0))),
          ([64, 1, 100], (4, 1), 128, dict(alibi=True, softcap=3.0)), ([33, 20], (2, 2), 40, dict())]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("lens_k,heads,d,opts", VARLEN)
def test_one_row_varlen_on_the_decode_kernel(monkeypatch, dtype, lens_k, heads, d, opts):
    """flash_attn_varlen_func with one query a sequence (Hugging Face's padded generation step): the packed keys as
    one shared cache, each sequence's range as left pad / end; an empty sequence outputs 0 (lse +inf)."""
    opts = dict(opts)
    if opts.pop("alibi", False):
        opts["alibi_slopes"] = (torch.rand(len(lens_k), heads[0]) * 0.3).to(DEVICE)     # (B, H)
    _threshold_one(monkeypatch)
    calls = _launched(monkeypatch)
    (q, k, v), varlen = rand_varlen([1] * len(lens_k), lens_k, *heads, d, dtype, DEVICE)
    check_attention("triton", q, k, v, varlen=varlen, **opts)
    assert calls, "the one-row varlen forward did not take the decode kernel"


def test_one_row_route_rule(monkeypatch):
    """Dropout, Nq > 1 and fewer keys than ONE_ROW_DECODE_MIN_NK keep the prefill kernels; so does everything with
    ONE_ROW_DECODE off (the result within the criterion either way). fp32 takes the route (session 61)."""
    from flashtriton.launchers.prefill import AttnParams
    p = AttnParams(0.1)
    one, many = torch.empty(1, 1, 4, 64), torch.empty(1, 2048, 2, 64)
    assert policy.one_row_decode(one.bfloat16(), many, p) and policy.one_row_decode(one.half(), many, p)
    assert policy.one_row_decode(one, many[:, :64], p)                               # fp32 (session 63) from 64
    assert not policy.one_row_decode(one, many[:, :63], p)
    assert not policy.one_row_decode(one.bfloat16(), many[:, :2047], p)              # < 2048 keys
    assert not policy.one_row_decode(one.bfloat16(), many, AttnParams(0.1, dropout_p=0.1))
    from flashtriton.launchers.prefill import Varlen
    cu = torch.tensor([0, 1, 2], dtype=torch.int32)
    packed = torch.empty(2, 4, 64, dtype=torch.bfloat16)
    assert policy.one_row_decode(packed, many, p, Varlen(cu, cu * 2048, 1, 2048))          # one query a sequence
    assert not policy.one_row_decode(packed[:1], many, p, Varlen(torch.tensor([0, 0, 1], dtype=torch.int32),
                                                                 cu * 2048, 1, 2048))     # a sequence without
    assert not policy.one_row_decode(packed, many, p, Varlen(cu, cu * 2047, 1, 2047))       # < 2048 keys
    monkeypatch.setattr(policy, "ONE_ROW_DECODE_MIN_NK", 1)
    calls = _launched(monkeypatch)
    q, k, v = rand_qkv(2, 1, 50, 4, 2, 64, torch.bfloat16, DEVICE)
    check_attention("triton", q, k, v, dropout_p=0.2, seed=3)
    q2, k2, v2 = rand_qkv(2, 2, 50, 4, 2, 64, torch.bfloat16, DEVICE)
    check_attention("triton", q2, k2, v2, causal=True)
    assert not calls
    monkeypatch.setattr(policy, "ONE_ROW_DECODE", False)
    check_attention("triton", q, k, v, causal=True)
    assert not calls
    monkeypatch.setattr(policy, "ONE_ROW_DECODE", True)
    with flashtriton.use_backend("triton"):
        out = flashtriton.flash_attn_func(q, k, v, causal=True)
        assert calls and torch.equal(out, flashtriton.flash_attn_func(q, k, v, causal=True))   # bitwise repeatable


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("at,causal", [("threshold", True), ("past", False)])
def test_one_row_on_the_decode_kernel_gpu(monkeypatch, dtype, at, causal):
    """The route at its real threshold (2048 keys in bf16, 64 in fp32) and past it on the GPU (GQA 32 / 8, D = 128)."""
    threshold = policy.ONE_ROW_DECODE_MIN_NK_FP32 if dtype == torch.float32 else policy.ONE_ROW_DECODE_MIN_NK
    nk = threshold if at == "threshold" else 8193
    calls = _launched(monkeypatch)
    q, k, v = rand_qkv(2, 1, nk, 32, 8, 128, dtype, "cuda")
    check_attention("triton", q, k, v, causal=causal)
    assert calls


@pytest.mark.skipif(DEVICE != "cpu" or "cpu" not in kernel_backends(), reason="the CPU backend")
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("lens_k,heads,d,opts", VARLEN[:2])
def test_one_row_on_the_cpu_decode(dtype, lens_k, heads, d, opts):
    """The CPU backend routes one-row calls to its decode kernel too (cpu/config.ONE_ROW_DECODE, every key count):
    dense and varlen, against the float64 reference with gradients; dropout keeps the prefill kernels. (fp16: the
    compiled decode kernel since session 63.)"""
    from flashtriton.cpu import forward as cpu_forward
    nk = max(lens_k)
    q, k, v = rand_qkv(len(lens_k), 1, nk, *heads, d, dtype, DEVICE)
    check_attention("cpu", q, k, v, **opts)
    assert cpu_forward.LAST_PATH == "decode"
    (q, k, v), varlen = rand_varlen([1] * len(lens_k), lens_k, *heads, d, dtype, DEVICE)
    check_attention("cpu", q, k, v, varlen=varlen, **opts)
    assert cpu_forward.LAST_PATH == "decode"
    check_attention("cpu", q, k, v, varlen=varlen, dropout_p=0.2, seed=2)
    assert cpu_forward.LAST_PATH != "decode"
