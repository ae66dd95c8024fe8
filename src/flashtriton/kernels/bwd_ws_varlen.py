"""FlashAttention-2 varlen dK/dV and dQ, warp-specialized for Hopper (Triton 3.6 on sm_90).

kernels/bwd_ws.py's two kernels for packed variable-length batches, for the calls that
kernels/fwd_ws_varlen.py computes: not causal, no window, ALiBi, softcap or dropout.
As there, each kernel has one loop with no branch in it and nothing indexed by query
row (launchers/policy.warp_spec_varlen picks them):
  - a program's (sequence, first row) comes from a slot table built by the launcher
    (spare slots start at row 2**30: no tile, and TMA drops their stores);
  - q, dO, k, v and the gradients come through descriptors whose shape ends at the
    sequence's end (rows past it read as 0, are never written); q and dO of the dK/dV
    kernel through (rows, H * D) descriptors with the head a column offset, as bwd_ws.py;
  - lse and delta through 1-D descriptors over copies padded per sequence to whole
    128-row blocks (the layout of fwd_ws_varlen.py's lse buffer): a padding row has
    lse = +inf, so its p is 0 and it adds nothing to dK and dV. No mask is needed in
    dK/dV (a key row past the end only feeds its own, unwritten, gradient row); dQ
    masks p by key index, since exp2(0 - lse) of a zero-filled key may overflow.
"""
import triton
import triton.language as tl

from .common import LOG2E, seq_rows_desc, varlen_slot


@triton.jit
def attn_bwd_dkdv_ws_varlen_kernel(
    Q, K, V, DO, LSE, DELTA, DK, DV,   # q, do (total_q, H, D); k, v, dk, dv (total_k, Hk, D); lse, delta padded, fp32
    CU_Q, CU_K, CU_QBLOCKS,            # (B + 1,) int32: offsets, and cumulative 128-row query blocks (the padding)
    SLOTS,                             # (n_slots, 2) int32: (sequence, first key) of each program
    stride_qn, stride_kn, stride_kh, stride_vn, stride_vh, stride_don, stride_dkn, stride_dkh, stride_dvn, stride_dvh,
    n_slots, nheads, group, lse_rows, lse_stride, softmax_scale, qk_scale,
    HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    PAD_BLOCK: tl.constexpr,
):
    hk = tl.program_id(0) // n_slots
    slot = tl.program_id(0) % n_slots
    b, start_n, q_start, k_start, seqlen_q, seqlen_k = varlen_slot(SLOTS, CU_Q, CU_K, slot)
    pad_start = tl.load(CU_QBLOCKS + b) * PAD_BLOCK                     # this sequence's first row in lse / delta

    k_desc = seq_rows_desc(K, k_start, hk * stride_kh, stride_kn, seqlen_k, HEAD_DIM, BLOCK_N, BLOCK_D)
    v_desc = seq_rows_desc(V, k_start, hk * stride_vh, stride_vn, seqlen_k, HEAD_DIM, BLOCK_N, BLOCK_D)
    q_desc = tl.make_tensor_descriptor(Q + q_start.to(tl.int64) * stride_qn, shape=[tl.maximum(seqlen_q, 1),
                                       nheads * HEAD_DIM], strides=[stride_qn, 1], block_shape=[BLOCK_M, BLOCK_D])
    do_desc = tl.make_tensor_descriptor(DO + q_start.to(tl.int64) * stride_don, shape=[tl.maximum(seqlen_q, 1),
                                        nheads * HEAD_DIM], strides=[stride_don, 1], block_shape=[BLOCK_M, BLOCK_D])
    lse_desc = tl.make_tensor_descriptor(LSE, shape=[lse_rows], strides=[1], block_shape=[BLOCK_M])
    delta_desc = tl.make_tensor_descriptor(DELTA, shape=[lse_rows], strides=[1], block_shape=[BLOCK_M])

    k = k_desc.load([start_n, 0])                                       # (BLOCK_N, BLOCK_D)
    v = v_desc.load([start_n, 0])
    dk = tl.zeros([BLOCK_N, BLOCK_D], dtype=tl.float32)
    dv = tl.zeros([BLOCK_N, BLOCK_D], dtype=tl.float32)
    # every query tile of every head of the GQA group, in one loop; a spare slot runs none
    m_tiles = tl.where(start_n < seqlen_k, tl.cdiv(seqlen_q, BLOCK_M), 0)
    for t in tl.range(0, group * m_tiles, warp_specialize=True):
        h = hk * group + t // m_tiles
        start_m = (t % m_tiles) * BLOCK_M
        q = q_desc.load([start_m, h * HEAD_DIM])                        # (BLOCK_M, BLOCK_D)
        do = do_desc.load([start_m, h * HEAD_DIM])
        row = h * lse_stride + pad_start + start_m
        lse2 = lse_desc.load([row]) * LOG2E                             # (BLOCK_M,), +inf past the end
        delta = delta_desc.load([row])
        pT = tl.exp2(tl.dot(k, tl.trans(q)) * qk_scale - lse2[None, :])  # (BLOCK_N, BLOCK_M)
        dv = tl.dot(pT.to(do.dtype), do, dv)
        dpT = tl.dot(v, tl.trans(do))                                   # (BLOCK_N, BLOCK_M)
        dsT = pT * (dpT - delta[None, :])
        dk = tl.dot(dsT.to(q.dtype), q, dk)

    dk_desc = seq_rows_desc(DK, k_start, hk * stride_dkh, stride_dkn, seqlen_k, HEAD_DIM, BLOCK_N, BLOCK_D)
    dv_desc = seq_rows_desc(DV, k_start, hk * stride_dvh, stride_dvn, seqlen_k, HEAD_DIM, BLOCK_N, BLOCK_D)
    dk_desc.store([start_n, 0], (dk * softmax_scale).to(DK.dtype.element_ty))
    dv_desc.store([start_n, 0], dv.to(DV.dtype.element_ty))


@triton.jit
def attn_bwd_dq_ws_varlen_kernel(
    Q, K, V, DO, LSE, DELTA, DQ,       # q, do, dq (total_q, H, D); k, v (total_k, Hk, D); lse, delta padded, fp32
    CU_Q, CU_K,                        # (B + 1,) int32 offsets
    SLOTS,                             # (n_slots, 2) int32: (sequence, first row); BLOCK_M rows = the padding block
    stride_qn, stride_qh, stride_kn, stride_kh, stride_vn, stride_vh, stride_don, stride_doh, stride_dqn, stride_dqh,
    n_slots, group, lse_rows, lse_stride, softmax_scale, qk_scale,
    HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):
    h = tl.program_id(0) // n_slots
    slot = tl.program_id(0) % n_slots
    b, start_m, q_start, k_start, seqlen_q, seqlen_k = varlen_slot(SLOTS, CU_Q, CU_K, slot)
    hk = h // group

    q_desc = seq_rows_desc(Q, q_start, h * stride_qh, stride_qn, seqlen_q, HEAD_DIM, BLOCK_M, BLOCK_D)
    do_desc = seq_rows_desc(DO, q_start, h * stride_doh, stride_don, seqlen_q, HEAD_DIM, BLOCK_M, BLOCK_D)
    k_desc = seq_rows_desc(K, k_start, hk * stride_kh, stride_kn, seqlen_k, HEAD_DIM, BLOCK_N, BLOCK_D)
    v_desc = seq_rows_desc(V, k_start, hk * stride_vh, stride_vn, seqlen_k, HEAD_DIM, BLOCK_N, BLOCK_D)
    lse_desc = tl.make_tensor_descriptor(LSE, shape=[lse_rows], strides=[1], block_shape=[BLOCK_M])
    delta_desc = tl.make_tensor_descriptor(DELTA, shape=[lse_rows], strides=[1], block_shape=[BLOCK_M])

    q = q_desc.load([start_m, 0])                                       # (BLOCK_M, BLOCK_D)
    do = do_desc.load([start_m, 0])
    # slot s of a sequence whose padded rows start at block CU_QBLOCKS[b] is block s itself
    lse2 = lse_desc.load([h * lse_stride + slot * BLOCK_M]) * LOG2E      # (BLOCK_M,)
    delta = delta_desc.load([h * lse_stride + slot * BLOCK_M])
    dq = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)
    offs_n = tl.arange(0, BLOCK_N)
    n_hi = tl.where(start_m < seqlen_q, seqlen_k, 0)                    # a spare slot runs no tile
    for start_n in tl.range(0, n_hi, BLOCK_N, warp_specialize=True):
        k = k_desc.load([start_n, 0])                                   # (BLOCK_N, BLOCK_D)
        v = v_desc.load([start_n, 0])
        p = tl.exp2(tl.dot(q, tl.trans(k)) * qk_scale - lse2[:, None])  # (BLOCK_M, BLOCK_N)
        p = tl.where((offs_n < seqlen_k - start_n)[None, :], p, 0.0)    # keys past the end (key index only)
        dp = tl.dot(do, tl.trans(v))
        ds = p * (dp - delta[:, None])
        dq = tl.dot(ds.to(k.dtype), k, dq)

    dq_desc = seq_rows_desc(DQ, q_start, h * stride_dqh, stride_dqn, seqlen_q, HEAD_DIM, BLOCK_M, BLOCK_D)
    dq_desc.store([start_m, 0], (dq * softmax_scale).to(DQ.dtype.element_ty))
