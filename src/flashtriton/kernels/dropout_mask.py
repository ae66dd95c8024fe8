"""Writes the dropout keep-mask that the prefill kernels draw, for return_attn_probs.

The prefill kernels never store their mask: they regenerate it from counter-based hashes.
This kernel draws the very same hashes (kernels.common.dropout_keep) into a
(B, H, Nq, Nk) int8 tensor, so tests can check outputs and gradients exactly.
"""
import triton
import triton.language as tl

from .common import dropout_keep


@triton.jit
def dropout_mask_kernel(MASK, CU_Q, RNG, stride_mb, stride_mh, stride_mm,
                        nheads, seqlen_q, seqlen_k, rng_rows, rng_stride, dropout_p,
                        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, IS_VARLEN: tl.constexpr):
    """Grid: (B * H, cdiv(Nq, BLOCK_M), cdiv(Nk, BLOCK_N)); Nq, Nk are the max lengths."""
    pid_bh = tl.program_id(0)
    b = pid_bh // nheads
    h = pid_bh % nheads
    offs_m = tl.program_id(1) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.program_id(2) * BLOCK_N + tl.arange(0, BLOCK_N)
    if IS_VARLEN:
        row_global = tl.load(CU_Q + b) + offs_m
    else:
        row_global = b * seqlen_q + offs_m
    rng_offset = tl.load(RNG + 1) + h.to(tl.int64) * rng_rows * rng_stride
    keep = dropout_keep(tl.load(RNG), rng_offset, row_global[:, None], offs_n[None, :], rng_stride, dropout_p)
    ptrs = MASK + b * stride_mb + h * stride_mh + offs_m[:, None] * stride_mm + offs_n[None, :]
    tl.store(ptrs, keep.to(tl.int8), mask=(offs_m[:, None] < seqlen_q) & (offs_n[None, :] < seqlen_k))
