"""The append step as kernels of its own: rotary on the new keys and the queries, and
the in-place write of the new tokens into the cache.

The default decode path fuses all of this into decode_split_kernel (kernels/decode.py);
these kernels are the "separate" path (FLASHTRITON_DECODE_APPEND=separate), kept so
that the two can be timed against each other on the GPU and checked against each
other in the tests. The rotation is the same function (rotated_rows) in both paths.
"""
import triton
import triton.language as tl

from .decode import rotated_rows


@triton.jit(do_not_specialize=["seqlen_new", "n_ro", "rot_half"])
def append_kv_kernel(K_NEW, V_NEW, K_CACHE, V_CACHE, COS, SIN, SEQLENS, BATCH_IDX, BLOCK_TABLE,
                     stride_knb, stride_kns, stride_knh,
                     stride_vnb, stride_vns, stride_vnh,
                     stride_kb, stride_kn, stride_kh,
                     stride_vb, stride_vn, stride_vh,
                     stride_btb, stride_cos, stride_sin,
                     nheads_k, seqlen_new, n_ro, rot_half,
                     HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_N: tl.constexpr,
                     PAGE_SIZE: tl.constexpr, HAS_BATCH_IDX: tl.constexpr, HAS_ROTARY: tl.constexpr,
                     INTERLEAVED: tl.constexpr):
    """Program (b * Hk + hk, row block): new tokens i in the block go to cache position
    SEQLENS[b] + i of KV head hk, keys rotated at that position."""
    pid_bh = tl.program_id(0)
    b = pid_bh // nheads_k
    hk = pid_bh % nheads_k
    offs_i = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    i_ok = offs_i < seqlen_new
    mask = i_ok[:, None] & (offs_d[None, :] < HEAD_DIM)
    pos = tl.load(SEQLENS + b) + offs_i                              # absolute cache positions
    if PAGE_SIZE == 0:
        if HAS_BATCH_IDX:
            blk = tl.load(BATCH_IDX + b).to(tl.int64)
        else:
            blk = b.to(tl.int64)
        slot = pos.to(tl.int64)
    else:
        blk = tl.load(BLOCK_TABLE + b.to(tl.int64) * stride_btb + pos // PAGE_SIZE, mask=i_ok, other=0).to(tl.int64)
        slot = (pos % PAGE_SIZE).to(tl.int64)
    knew_rows = K_NEW + b.to(tl.int64) * stride_knb + hk * stride_knh + offs_i[:, None].to(tl.int64) * stride_kns
    vnew_rows = V_NEW + b.to(tl.int64) * stride_vnb + hk * stride_vnh + offs_i[:, None].to(tl.int64) * stride_vns
    if HAS_ROTARY:
        k = rotated_rows(knew_rows, i_ok[:, None], pos, COS, SIN, stride_cos, stride_sin, rot_half, n_ro, offs_d,
                         HEAD_DIM, INTERLEAVED).to(K_CACHE.dtype.element_ty)
    else:
        k = tl.load(knew_rows + offs_d[None, :], mask=mask, other=0.0)
    v = tl.load(vnew_rows + offs_d[None, :], mask=mask, other=0.0)
    k_dst = K_CACHE + hk.to(tl.int64) * stride_kh + (blk * stride_kb + slot * stride_kn)[:, None] + offs_d[None, :]
    v_dst = V_CACHE + hk.to(tl.int64) * stride_vh + (blk * stride_vb + slot * stride_vn)[:, None] + offs_d[None, :]
    tl.store(k_dst, k, mask=mask)
    tl.store(v_dst, v, mask=mask)


@triton.jit(do_not_specialize=["seqlen_q", "n_ro", "rot_half"])
def rotary_q_kernel(Q, Q_OUT, COS, SIN, SEQLENS,
                    stride_qb, stride_qs, stride_qh,
                    stride_rb, stride_rs, stride_rh,
                    stride_cos, stride_sin,
                    nheads, seqlen_q, n_ro, rot_half,
                    HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_H: tl.constexpr,
                    PER_ROW: tl.constexpr, INTERLEAVED: tl.constexpr):
    """Program (b, i, head block): q[b, i] rotated at SEQLENS[b] + i (PER_ROW: causal or
    windowed) or at SEQLENS[b], into Q_OUT in q's dtype."""
    b = tl.program_id(0)
    i = tl.program_id(1)
    offs_h = tl.program_id(2) * BLOCK_H + tl.arange(0, BLOCK_H)
    offs_d = tl.arange(0, BLOCK_D)
    h_ok = offs_h < nheads
    pos = tl.load(SEQLENS + b) + offs_h * 0
    if PER_ROW:
        pos = pos + i
    rows = Q + b.to(tl.int64) * stride_qb + i.to(tl.int64) * stride_qs + offs_h[:, None] * stride_qh
    x = rotated_rows(rows, h_ok[:, None], pos, COS, SIN, stride_cos, stride_sin, rot_half, n_ro, offs_d,
                     HEAD_DIM, INTERLEAVED)
    dst = (Q_OUT + b.to(tl.int64) * stride_rb + i.to(tl.int64) * stride_rs + offs_h[:, None] * stride_rh
           + offs_d[None, :])
    tl.store(dst, x.to(Q_OUT.dtype.element_ty), mask=h_ok[:, None] & (offs_d[None, :] < HEAD_DIM))
