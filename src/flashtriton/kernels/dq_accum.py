"""The fused Gluon backward's fp32 dq accumulator (kernels/bwd_gluon_fused.py reduce-adds
scale * dS K into it by TMA): zeroed before the kernel, cast to q's dtype after it.

Triton kernels rather than torch's zero_ / copy_ so that a launch plan (launchers/plans.py)
records and replays them with the fused kernel: a plan replays only launches that go
through plans.launch, never torch ops between them. Both are memory-bound elementwise
passes over flat contiguous buffers (B * Nq * H * D elements, int64 offsets): at 16k
tokens, H = 16, D = 128 the zero writes 134 MB and the cast reads 134 and writes 67 MB,
~30 + ~45 us at the H200's ~4.5 TB/s, as torch's own kernels for the same work.
Session 28's H200 profile at that size: zero 30 us, cast 52 us (and the delta preprocess 38).

Session 29 (launchers/backward_gluon.py's switches, both off: measured level on the H200,
bench/gpu/s29_fused_dq_accum_ab.py): FUSED_DQ_ZERO_IN_PREPROCESS zeroes dq_accum inside
the delta preprocess (kernels/bwd.py's bwd_preprocess_kernel, DQ_ACCUM) instead of by
zero_f32_kernel, one launch less; FUSED_DQ_CAST_REVERSE launches cast_kernel with REVERSE."""
import triton
import triton.language as tl

BLOCK = 4096        # elements a program: 16 KB of fp32 (4 warps, 32 elements a thread)


@triton.jit
def zero_f32_kernel(X, n, BLOCK: tl.constexpr):
    """X[0:n] = 0 (fp32)."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    tl.store(X + offs, tl.zeros([BLOCK], tl.float32), mask=offs < n)


@triton.jit
def cast_kernel(SRC, DST, n, BLOCK: tl.constexpr, REVERSE: tl.constexpr = False):
    """DST[0:n] = SRC[0:n] in DST's dtype, rounded to nearest even as torch's copy_ (the
    interpreter's "rtne" rounds ties up and is not bitwise torch's: Triton 3.6.0,
    2026-12-01, tests/test_bwd_gluon.py::test_dq_accum_zero_and_cast).
    REVERSE (session 29, launchers/backward_gluon.FUSED_DQ_CAST_REVERSE): program i casts
    block (programs - 1 - i), so the first wave reads the buffer's END, the rows of the
    last (batch, KV head) CTAs of the fused kernel that ran just before: the lines still
    in L2 (dirty, just reduce-added) are read before this kernel's own stream evicts them.
    The same elements and the same arithmetic either way (the output is bitwise equal)."""
    pid = tl.program_id(0)
    if REVERSE:
        pid = tl.num_programs(0) - 1 - pid
    offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    val = tl.load(SRC + offs, mask=mask)
    tl.store(DST + offs, val.to(DST.dtype.element_ty, fp_downcast_rounding="rtne"), mask=mask)
