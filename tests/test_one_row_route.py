"""Session 60: dense one-row forwards (flash_attn_func at Nq = 1, the generation-loop call) run the split-KV decode
kernel (launchers/policy.one_row_decode, launchers/forward._fwd_one_row) - the same semantics as the prefill
kernels (masks and ALiBi aligned bottom-right), the prefill backward after it."""
import pytest
import torch

import flashtriton
from flashtriton.launchers import forward, policy

from conftest import DEVICE
from helpers import check_attention, rand_qkv

OPTIONS = [
    dict(),
    dict(causal=True),
    dict(window_size=(7, 0)),
    dict(window_size=(40, 3)),
    dict(alibi=True, softcap=5.0, causal=True),
    dict(softmax_scale=-0.3),
]


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


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("nk,heads,d,opt", SHAPES)
def test_one_row_on_the_decode_kernel(monkeypatch, dtype, nk, heads, d, opt):
    opts = dict(OPTIONS[opt])
    if opts.pop("alibi", False):
        opts["alibi_slopes"] = (torch.rand(heads[0]) * 0.3).to(DEVICE)
    calls = _launched(monkeypatch)
    q, k, v = rand_qkv(2, 1, nk, *heads, d, dtype, DEVICE)
    # (fp32 gradients of a row that sees one key: README Limitations, either route; the forward is checked)
    check_attention("triton", q, k, v, grads=not (dtype == torch.float32 and nk == 1), **opts)
    assert calls, "the one-row forward did not take the decode kernel"


def test_one_row_route_rule(monkeypatch):
    """Dropout, varlen and Nq > 1 keep the prefill kernels; so does everything with ONE_ROW_DECODE off (and the
    result is the same within the criterion: check_attention above against the prefill route here)."""
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
