"""Small Triton kernels that let tests call a kernel-side helper directly. Imported inside
the tests that use them, after conftest has set up the Triton interpreter on CPU machines."""
import triton
import triton.language as tl

from flashtriton.kernels.common import exp2_fma


@triton.jit
def exp2_fma_kernel(X, Y, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(Y + offs, exp2_fma(tl.load(X + offs)))
