"""The matmul engine of the CPU backend: `mm_nt(x, w) = x @ w^T` in float32.

Why not torch.mm? On this project's reference CPU (AMD EPYC, AVX-512 + AVX512-BF16)
torch's float32 matmul goes to MKL, which runs its AVX2 code on AMD parts: ~105
GFLOP/s per core. The same product through oneDNN (which torch also ships, for its
bf16 matmuls and for inductor) runs the AVX-512 kernels: ~230 GFLOP/s per core,
bitwise equal to MKL's result on the shapes we checked (both accumulate in fp32).
torch exposes oneDNN's float32 matmul to Python only through the inductor op
`torch.ops.mkldnn._linear_pointwise(x, w, bias, "none", [], "")`, which computes
x @ w^T for a 2-D (or batched-row) x and a 2-D weight w.

Surprises measured on that op (bench/NOTES.md, "CPU backend"):
- the weight must be contiguous: a strided weight view is ~100x slower (oneDNN
  reorders it element by element); a contiguous slice of a larger tensor is fine;
- ~11 us of fixed cost per call (the primitive lookup), against ~2 us for torch.mm:
  tiles must be large enough to hide it;
- the weight is re-read on every call (nothing is cached by address), so buffers
  may be reused and mutated freely - checked by the self-test below.

The op is internal to torch, so it is probed once at import: it must exist and give
the float32 product of a small random problem (compared with torch.mm, which is the
engine used when the probe fails). `NAME` records which engine is in use; the
benchmark prints it. Both engines compute the same float32 matmul; only speed differs.

The backward's float32 products go through mm() / addmm_() instead, which take any
strides: on Intel CPUs torch's own MKL GEMM runs its AVX-512 kernels, and measured
faster than the oneDNN op on the backward's shapes on the AMX machine of 2026-12-02
(2 cores; 512 x 1024 x 64: 367 against 344 GFLOP/s, 256 x 512 x 64: 356 / 274),
with transposed operands read in place (no transposing copies) and addmm_
accumulating in the GEMM (beta = 1, no temporary). Elsewhere (AMD: MKL's AVX2 code)
they run the oneDNN op on contiguous copies of the operands, as mm_nt does.
`BWD_NAME` records which one is in use.
"""
from __future__ import annotations

import torch


def _onednn_linear():
    op = getattr(getattr(torch.ops, "mkldnn", None), "_linear_pointwise", None)
    if op is None or not torch.backends.mkldnn.is_available():
        return None
    try:
        g = torch.Generator().manual_seed(1234)
        x = torch.randn(33, 40, generator=g)
        w = torch.randn(17, 40, generator=g)
        got = op(x, w, None, "none", [], "")
        w.mul_(2.0)  # a mutated weight must be seen (no caching by address)
        got2 = op(x, w, None, "none", [], "")
    except (RuntimeError, TypeError):
        return None
    ref = x.double() @ (w.double() / 2.0).t()
    tol = 1e-5 * ref.abs().max().item()
    if got.dtype != torch.float32 or got.shape != (33, 17) or (got.double() - ref).abs().max().item() > tol:
        return None
    if (got2.double() - 2 * ref).abs().max().item() > 2 * tol:
        return None
    return op


_LINEAR = _onednn_linear()
NAME = "onednn" if _LINEAR is not None else "torch.mm"


def _bf16_ok() -> bool:
    """Whether the oneDNN op also multiplies bf16 (bf16 out): compared with torch.mm."""
    if _LINEAR is None:
        return False
    try:
        g = torch.Generator().manual_seed(4321)
        x = torch.randn(64, 48, generator=g).bfloat16()
        w = torch.randn(9, 48, generator=g).bfloat16()
        got = _LINEAR(x, w, None, "none", [], "")
    except (RuntimeError, TypeError):
        return False
    ref = x.double() @ w.double().t()
    return got.dtype == torch.bfloat16 and got.shape == (64, 9) and \
        bool(((got.double() - ref).abs() <= 2 ** -7 * ref.abs() + 1e-3).all())


_LINEAR_BF16 = _bf16_ok()


def mm_nt(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """x (M, K) @ w (N, K)^T -> (M, N), float32 in and out; w must be contiguous."""
    if _LINEAR is not None:
        return _LINEAR(x, w, None, "none", [], "")
    return torch.mm(x, w.t())


def mm_nt_any(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """x (M, K) @ w (N, K)^T -> (M, N) in the inputs' dtype (float32 or bf16 with
    float32 accumulation); w must be contiguous. oneDNN when it takes the dtype."""
    if _LINEAR is not None and (x.dtype == torch.float32 or (x.dtype == torch.bfloat16 and _LINEAR_BF16)):
        return _LINEAR(x, w, None, "none", [], "")
    return torch.mm(x, w.t())


def _intel() -> bool:
    """Whether the CPU is an Intel one (MKL takes its AVX-512 kernels there)."""
    try:
        with open("/proc/cpuinfo") as f:
            return "GenuineIntel" in f.read(1 << 16)
    except OSError:
        return False


_MKL_FAST = _LINEAR is None or _intel()
BWD_NAME = "torch.mm" if _MKL_FAST else "onednn"


def mm(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """a (M, K) @ b (K, N) -> (M, N) float32; any strides. Written into `out` (contiguous
    (M, N)) and returned when given and the engine takes it (torch.mm), else a new tensor."""
    if _MKL_FAST:
        return torch.mm(a, b) if out is None else torch.mm(a, b, out=out)
    return _LINEAR(a.contiguous(), b.t().contiguous(), None, "none", [], "")


def addmm_(c: torch.Tensor, a: torch.Tensor, b: torch.Tensor, beta: float = 1.0, alpha: float = 1.0) -> None:
    """c = beta * c + alpha * (a @ b), float32, in place; any strides (c: a unit stride in one
    dimension). beta = 0.0 overwrites c without reading it (NaN / inf in c do not propagate)."""
    if _MKL_FAST:
        c.addmm_(a, b, beta=beta, alpha=alpha)
        return
    prod = mm(a, b)
    if alpha != 1.0:
        prod.mul_(alpha)
    if beta == 0.0:
        c.copy_(prod)
    else:
        c.mul_(beta).add_(prod) if beta != 1.0 else c.add_(prod)
