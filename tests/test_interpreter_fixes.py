"""The Triton interpreter workarounds (flashtriton/kernels/interpreter_fixes.py), which CI's
kernel tests depend on: run only under the interpreter (CPU tensors); the GPU never sees them."""
import pytest
import torch
import triton
import triton.language as tl

import flashtriton
from flashtriton.launchers import common   # noqa: F401  (importing it applies the workarounds when interpreting)

from conftest import DEVICE
from test_kvcache import _clone_caches, _ref, make_inputs, params_for

pytestmark = pytest.mark.skipif(DEVICE != "cpu", reason="interpreter workarounds: CPU tensors only")


@triton.jit
def _to_bf16_kernel(X, Y, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(Y + offs, tl.load(X + offs).to(tl.bfloat16))


def test_regression_fp32_to_bf16_rounds_to_nearest_even():
    """Session 62: the interpreter truncated fp32 -> bf16 (half of random values 1 ulp off torch's and the GPU's
    round-to-nearest-even). Random values, exact ties both ways, a carry into the exponent, the largest finite
    float32 (rounds to inf), subnormals, zeros and infinities against torch's conversion, bit for bit; NaN stays NaN."""
    x = torch.randn(4096) * 10
    special = torch.tensor([1.0 + 2 ** -8, 1.0 + 3 * 2 ** -8, 1.9999999, -1.9999999, 3.4028235e38, 1e-40, -1e-40,
                            0.0, -0.0, float("inf"), -float("inf")])
    x[:len(special)] = special
    y = torch.empty(4096, dtype=torch.bfloat16)
    _to_bf16_kernel[(1,)](x, y, N=4096)
    assert torch.equal(y.view(torch.int16), x.to(torch.bfloat16).view(torch.int16))
    x[0] = float("nan")
    _to_bf16_kernel[(1,)](x, y, N=4096)
    assert torch.isnan(y[0])


def test_regression_rotary_append_matches_reference_bf16():
    """Session 62's fuzz draw shape (bf16, D = 128, 3 appended tokens rotated NeoX-style into a page): the
    kernel's rotated keys are the reference's bit for bit, and so its lse meets the bound (2-6x PyTorch's bf16
    error under the truncating cast)."""
    torch.manual_seed(0)
    inp = make_inputs(1, 1, 4, 4, 128, torch.bfloat16, 128, [100], snew=3, page_size=128, rotary_dim=128)
    params = params_for(inp, causal=True, softmax_scale=0.3)
    truth = _ref(inp, params, False, None, torch.float64)
    lowp = _ref(inp, params, False, None, torch.bfloat16)
    ours = _clone_caches(inp)
    call = {k: v for k, v in ours.items() if k != "q"}
    with flashtriton.use_backend("triton"):
        _, lse = flashtriton.flash_attn_with_kvcache(ours["q"], causal=True, softmax_scale=0.3,
                                                     rotary_interleaved=False, return_softmax_lse=True, **call)
    assert torch.equal(ours["k_cache"].view(torch.int16), truth[2].view(torch.int16))
    assert (lse.double() - truth[1]).abs().max() <= 2 * (lowp[1].double() - truth[1]).abs().max() + 1e-4
