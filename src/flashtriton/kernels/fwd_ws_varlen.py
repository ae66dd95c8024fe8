"""FlashAttention-2 varlen forward, warp-specialized for Hopper (Triton 3.6 on sm_90).

kernels/fwd_ws.py's loop for packed variable-length batches (q as (total_q, H, D)),
non-causal and unmasked otherwise: no window, ALiBi, softcap or dropout. The launcher
(launchers/policy.warp_spec_varlen) picks it; causal and windowed varlen calls stay on
fwd.py, whose masks are indexed by query row (wrong in the second consumer warpgroup
under the specialization, H200, 2026-11-29: see fwd_ws.py's list of constraints).

What the constraints (one loop, no branch inside it, nothing indexed by query row)
change against fwd.py's varlen path:
  - the program -> (sequence, start row) map is a table built on the device by the
    launcher (SLOTS), not fwd.py's binary search, which is a loop; a spare slot (the
    grid is an upper bound, cdiv(total_q, BLOCK_M) + B per head) has start row 2**30:
    its loop runs no tile and its stores fall outside the sequence, so TMA drops them;
  - a sequence's rows come through descriptors whose shape ends at the sequence's end:
    rows past it read as 0 and are never written;
  - the ragged last key tile is masked in every tile, by key index alone (that mask was
    right under the specialization, bench/gpu/s6_ws_mask_probe.py): the branch that
    would restrict it to the last tile would switch the specialization off;
  - the lse leaves through a 1-D descriptor, whose box must start on 16 bytes: into a
    buffer of BLOCK_M rows per slot (LSE_PAD), which the launcher gathers into the
    (H, total_q) lse.
"""
import triton
import triton.language as tl

from .common import LN2, seq_rows_desc, varlen_slot, ws_hidden_score, ws_softmax_step


@triton.jit
def attn_fwd_ws_varlen_kernel(
    Q, K, V, O, LSE_PAD,             # q, o (total_q, H, D); k, v (total_k, Hk, D); LSE_PAD (H * n_slots * BLOCK_M,) fp32
    CU_Q, CU_K,                      # (B + 1,) int32 offsets
    SLOTS,                           # (n_slots, 2) int32: (sequence, first row) of each slot
    stride_qn, stride_qh, stride_kn, stride_kh, stride_vn, stride_vh, stride_on, stride_oh,
    n_slots, lse_rows, group, qk_scale,
    HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    NEG_SCALE: tl.constexpr,
):
    # one linear grid, a head's slots consecutive (launchers/forward.FWD_ROWS_FIRST)
    h = tl.program_id(0) // n_slots
    slot = tl.program_id(0) % n_slots
    b, start_m, q_start, k_start, seqlen_q, seqlen_k = varlen_slot(SLOTS, CU_Q, CU_K, slot)
    hk = h // group

    # this sequence's rows of head h / hk (seq_rows_desc: rows past the end read as 0 and
    # are never written; a spare slot's stores fall outside)
    q_desc = seq_rows_desc(Q, q_start, h * stride_qh, stride_qn, seqlen_q, HEAD_DIM, BLOCK_M, BLOCK_D)
    k_desc = seq_rows_desc(K, k_start, hk * stride_kh, stride_kn, seqlen_k, HEAD_DIM, BLOCK_N, BLOCK_D)
    v_desc = seq_rows_desc(V, k_start, hk * stride_vh, stride_vn, seqlen_k, HEAD_DIM, BLOCK_N, BLOCK_D)
    o_desc = seq_rows_desc(O, q_start, h * stride_oh, stride_on, seqlen_q, HEAD_DIM, BLOCK_M, BLOCK_D)

    q = q_desc.load([start_m, 0])                                       # (BLOCK_M, BLOCK_D)
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)
    offs_n = tl.arange(0, BLOCK_N)
    hi = tl.where(start_m < seqlen_q, seqlen_k, 0)                      # a spare slot runs no tile
    for start_n in tl.range(0, hi, BLOCK_N, warp_specialize=True):
        k = k_desc.load([start_n, 0])                                   # (BLOCK_N, BLOCK_D)
        qk = tl.dot(q, tl.trans(k))                                     # (BLOCK_M, BLOCK_N)
        # keys past the end are hidden; every tile keeps >= 1 key per row
        qk = tl.where((offs_n < seqlen_k - start_n)[None, :], qk, ws_hidden_score(NEG_SCALE))
        p, alpha, m_new, l_i = ws_softmax_step(qk, m_i, l_i, qk_scale, NEG_SCALE)
        v = v_desc.load([start_n, 0])                                   # (BLOCK_N, BLOCK_D)
        acc = acc * alpha[:, None]
        acc = tl.dot(p.to(v.dtype), v, acc)
        m_i = m_new

    # the one normalisation; a row that saw no key (an empty key sequence) outputs 0
    # with lse = +inf, as fwd.py
    empty = l_i == 0.0
    l_safe = tl.where(empty, 1.0, l_i)
    o_desc.store([start_m, 0], (acc / l_safe[:, None]).to(O.dtype.element_ty))
    lse_desc = tl.make_tensor_descriptor(LSE_PAD, shape=[lse_rows], strides=[1], block_shape=[BLOCK_M])
    lse_desc.store([(h * n_slots + slot) * BLOCK_M], tl.where(empty, float("inf"), (m_i + tl.log2(l_safe)) * LN2))
