"""FlashAttention-2 dK/dV and dQ kernels, warp-specialized for Hopper (Triton 3.6 on sm_90).

The same math as kernels/bwd.py's attn_bwd_dkdv_kernel, for the calls that
kernels/fwd_ws.py computes whole: no mask at all (not causal, no window, Nq and Nk
multiples of the tiles), no ALiBi, softcap or varlen; dropout takes its row and column
keys from the call's table (kernels/dropout_keys.py) through 1-D descriptors, and hashes
the group multiplier of its key tile from the table's last entry. One program owns BLOCK_N
keys of one (batch, KV head) and loops over the query blocks of every query head of its
GQA group in ONE flattened loop (`warp_specialize=True` needs the loop alone in the
kernel, with no branch in it; kernels/fwd_ws.py lists what Triton 3.6 accepts). The two
consumer warpgroups split the BLOCK_N keys (the rows of dK and dV); nothing is indexed
by tl.arange: q, dO, lse and delta all arrive through 1-D and 2-D descriptors (a
tl.arange-indexed op went wrong in the second consumer of the forward, and a reshaped
3-D descriptor load here, H200, 2026-11-29).

attn_bwd_dq_ws_kernel is the dQ kernel the same way: one program owns BLOCK_M query rows
of one (batch, head), one loop over the key tiles, the consumers split the rows, and
its lse and delta rows come through a 1-D descriptor.

Per query tile of dK/dV (transposed layout: keys x queries, as bwd.py):
    P^T = exp2(K Q^T * scale * log2e - lse * log2e),   dV += P^T dO,
    dP^T = V dO^T,   dS^T = P^T * (dP^T - delta),      dK += dS^T Q   (times scale at the end)
"""
import triton
import triton.language as tl

from .common import (DROPOUT_GROUP, LOG2E, NO_SPECIALIZE, bulk_key_tiles, bulk_query_tiles, dropout_group_mult,
                     dropout_keep_scale, dropout_threshold)


@triton.jit(do_not_specialize=NO_SPECIALIZE)
def attn_bwd_dkdv_ws_kernel(
    Q, K, V, DO, LSE, DELTA, DK, DV,   # q, do (B, Nq, H, D); k, v, dk, dv (B, Nk, Hk, D); lse, delta (B, H, Nq) fp32
    KEYS,                              # HAS_DROPOUT: the call's key table (kernels/dropout_keys.py), int32
    stride_qb, stride_qn, stride_qh,
    stride_kb, stride_kn, stride_kh,
    stride_vb, stride_vn, stride_vh,
    stride_dob, stride_don, stride_doh,
    stride_dkb, stride_dkn, stride_dkh,
    stride_dvb, stride_dvn, stride_dvh,
    lse_rows, lse_stride,              # lse and delta: flat buffers of B * H heads of lse_stride rows
    nheads, nheads_k, group, seqlen_q, seqlen_k, softmax_scale, qk_scale, dropout_p, keys_total, rng_rows,
    window_left, window_right,
    HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    HAS_DROPOUT: tl.constexpr = False, PARTIAL: tl.constexpr = False, HAS_RIGHT: tl.constexpr = False,
    HAS_LEFT: tl.constexpr = False,
):
    # one linear grid, the key blocks of each (batch, KV head) consecutive
    n_blocks = tl.cdiv(seqlen_k, BLOCK_N)
    pid_bh = tl.program_id(0) // n_blocks
    b = pid_bh // nheads_k
    hk = pid_bh % nheads_k
    start_n = (tl.program_id(0) % n_blocks) * BLOCK_N

    k_desc = tl.make_tensor_descriptor(K + b.to(tl.int64) * stride_kb + hk * stride_kh, shape=[seqlen_k, HEAD_DIM],
                                       strides=[stride_kn, 1], block_shape=[BLOCK_N, BLOCK_D])
    v_desc = tl.make_tensor_descriptor(V + b.to(tl.int64) * stride_vb + hk * stride_vh, shape=[seqlen_k, HEAD_DIM],
                                       strides=[stride_vn, 1], block_shape=[BLOCK_N, BLOCK_D])
    # q and dO of batch b as (Nq, H * D): a tile is the box [BLOCK_M, BLOCK_D] at column
    # h * D (the launcher guarantees stride_qh == stride_doh == HEAD_DIM == BLOCK_D). A 3-D
    # (Nq, H, D) descriptor with a [BLOCK_M, 1, BLOCK_D] box and a reshape gave wrong dK and
    # dV on the H200 under warp_specialize (right without it; Triton 3.6, 2026-11-29,
    # bench/gpu/s7_dk_probe.py).
    q_desc = tl.make_tensor_descriptor(Q + b.to(tl.int64) * stride_qb, shape=[seqlen_q, nheads * HEAD_DIM],
                                       strides=[stride_qn, 1], block_shape=[BLOCK_M, BLOCK_D])
    do_desc = tl.make_tensor_descriptor(DO + b.to(tl.int64) * stride_dob, shape=[seqlen_q, nheads * HEAD_DIM],
                                        strides=[stride_don, 1], block_shape=[BLOCK_M, BLOCK_D])
    lse_desc = tl.make_tensor_descriptor(LSE, shape=[lse_rows], strides=[1], block_shape=[BLOCK_M])
    delta_desc = tl.make_tensor_descriptor(DELTA, shape=[lse_rows], strides=[1], block_shape=[BLOCK_M])

    k = k_desc.load([start_n, 0])                                       # (BLOCK_N, BLOCK_D)
    v = v_desc.load([start_n, 0])
    if HAS_DROPOUT:
        # table: [ck of seqlen_k columns | rk of (head, b * seqlen_q + row), head-major]
        keys_desc_n = tl.make_tensor_descriptor(KEYS, shape=[keys_total], strides=[1], block_shape=[BLOCK_N])
        keys_desc_m = tl.make_tensor_descriptor(KEYS, shape=[keys_total], strides=[1], block_shape=[BLOCK_M])
        ck = keys_desc_n.load([start_n]).to(tl.uint32, bitcast=True)   # this program's keys (BLOCK_N,)
        # and their group's multiplier (the keys lie in one column group); the table's
        # last entry is the multipliers' seed word
        tl.static_assert(BLOCK_N <= DROPOUT_GROUP, "dropout: a key block must lie in one column group")
        mk = dropout_group_mult(tl.load(KEYS + keys_total).to(tl.uint32, bitcast=True), start_n)
        threshold = dropout_threshold(dropout_p)
        keep_frac = 1.0 - dropout_p
    dk = tl.zeros([BLOCK_N, BLOCK_D], dtype=tl.float32)
    dv = tl.zeros([BLOCK_N, BLOCK_D], dtype=tl.float32)

    # the query tiles [m_lo, m_hi): all of them, or (PARTIAL) those that see every key of
    # this block and lie wholly inside the sequence (bulk_query_tiles); bwd.py's RESUME
    # does the rest
    m_lo = 0
    m_hi = seqlen_q
    if PARTIAL:
        m_lo, m_hi = bulk_query_tiles(start_n, seqlen_q, seqlen_k, window_left, window_right, BLOCK_M, BLOCK_N,
                                      HAS_LEFT, HAS_RIGHT)
    m_tiles = (m_hi - m_lo) // BLOCK_M
    # every such query tile of every head of the GQA group, in one loop: t -> (head, tile)
    for t in tl.range(0, group * m_tiles, warp_specialize=True):
        h = hk * group + t // m_tiles
        start_m = m_lo + (t % m_tiles) * BLOCK_M
        q = q_desc.load([start_m, h * HEAD_DIM])                        # (BLOCK_M, BLOCK_D)
        do = do_desc.load([start_m, h * HEAD_DIM])
        row = (b * nheads + h) * lse_stride + start_m                   # flat (B, H, rows) index
        lse2 = lse_desc.load([row]) * LOG2E                             # (BLOCK_M,)
        delta = delta_desc.load([row])
        qkT = tl.dot(k, tl.trans(q))                                    # (BLOCK_N, BLOCK_M)
        pT = tl.exp2(qkT * qk_scale - lse2[None, :])                    # normalised probabilities
        if HAS_DROPOUT:
            # 1 / (1 - p) = s leaves the loop: dV = s * sum(keep * P) dO, and with dP' = keep *
            # dP, dS = P (s dP' - delta) = s * (P_kept dP - P (1 - p) delta); dK and dV scale
            # once. The mask is a float (kernels.common.dropout_keep_scale) with one use.
            rk = keys_desc_m.load([seqlen_k + h * rng_rows + b * seqlen_q + start_m]).to(tl.uint32, bitcast=True)
            pT_kept = pT * dropout_keep_scale(rk[None, :], ck[:, None], mk, threshold)
            dv = tl.dot(pT_kept.to(do.dtype), do, dv)
            dpT = tl.dot(v, tl.trans(do))                               # (BLOCK_N, BLOCK_M)
            dsT = pT_kept * dpT - pT * (delta * keep_frac)[None, :]
        else:
            dv = tl.dot(pT.to(do.dtype), do, dv)
            dpT = tl.dot(v, tl.trans(do))                               # (BLOCK_N, BLOCK_M)
            dsT = pT * (dpT - delta[None, :])
        dk = tl.dot(dsT.to(q.dtype), q, dk)

    dk_desc = tl.make_tensor_descriptor(DK + b.to(tl.int64) * stride_dkb + hk * stride_dkh,
                                        shape=[seqlen_k, HEAD_DIM], strides=[stride_dkn, 1],
                                        block_shape=[BLOCK_N, BLOCK_D])
    dv_desc = tl.make_tensor_descriptor(DV + b.to(tl.int64) * stride_dvb + hk * stride_dvh,
                                        shape=[seqlen_k, HEAD_DIM], strides=[stride_dvn, 1],
                                        block_shape=[BLOCK_N, BLOCK_D])
    if HAS_DROPOUT:
        dk = dk / keep_frac                                             # the loop's 1 / (1 - p), once
        dv = dv / keep_frac
    if PARTIAL:
        dk_desc.store([start_n, 0], dk.to(DK.dtype.element_ty))         # unscaled: RESUME scales once
    else:
        dk_desc.store([start_n, 0], (dk * softmax_scale).to(DK.dtype.element_ty))
    dv_desc.store([start_n, 0], dv.to(DV.dtype.element_ty))


@triton.jit(do_not_specialize=NO_SPECIALIZE)
def attn_bwd_dq_ws_kernel(
    Q, K, V, DO, LSE, DELTA, DQ,       # q, do, dq (B, Nq, H, D); k, v (B, Nk, Hk, D); lse, delta (B, H, Nq) fp32
    KEYS,                              # HAS_DROPOUT: the call's key table (kernels/dropout_keys.py), int32
    stride_qb, stride_qn, stride_qh,
    stride_kb, stride_kn, stride_kh,
    stride_vb, stride_vn, stride_vh,
    stride_dob, stride_don, stride_doh,
    stride_dqb, stride_dqn, stride_dqh,
    lse_rows, lse_stride,              # lse and delta: flat buffers of B * H heads of lse_stride rows
    nheads, group, seqlen_q, seqlen_k, softmax_scale, qk_scale, dropout_p, keys_total, rng_rows,
    window_left, window_right,
    HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    HAS_DROPOUT: tl.constexpr = False, PARTIAL: tl.constexpr = False, HAS_RIGHT: tl.constexpr = False,
    HAS_LEFT: tl.constexpr = False, HEAVY_FIRST: tl.constexpr = False,
):
    # one linear grid, the query blocks of each (batch, head) consecutive
    n_blocks = tl.cdiv(seqlen_q, BLOCK_M)
    pid_bh = tl.program_id(0) // n_blocks
    b = pid_bh // nheads
    h = pid_bh % nheads
    hk = h // group
    block = tl.program_id(0) % n_blocks
    if HEAVY_FIRST:
        # causal-like masks: the last query blocks see the most key tiles; blocks are
        # dispatched in order, so the heaviest go first (launchers.backward.WS_HEAVY_FIRST)
        block = n_blocks - 1 - block
    start_m = block * BLOCK_M

    q_desc = tl.make_tensor_descriptor(Q + b.to(tl.int64) * stride_qb + h * stride_qh, shape=[seqlen_q, HEAD_DIM],
                                       strides=[stride_qn, 1], block_shape=[BLOCK_M, BLOCK_D])
    do_desc = tl.make_tensor_descriptor(DO + b.to(tl.int64) * stride_dob + h * stride_doh,
                                        shape=[seqlen_q, HEAD_DIM], strides=[stride_don, 1],
                                        block_shape=[BLOCK_M, BLOCK_D])
    k_desc = tl.make_tensor_descriptor(K + b.to(tl.int64) * stride_kb + hk * stride_kh, shape=[seqlen_k, HEAD_DIM],
                                       strides=[stride_kn, 1], block_shape=[BLOCK_N, BLOCK_D])
    v_desc = tl.make_tensor_descriptor(V + b.to(tl.int64) * stride_vb + hk * stride_vh, shape=[seqlen_k, HEAD_DIM],
                                       strides=[stride_vn, 1], block_shape=[BLOCK_N, BLOCK_D])
    lse_desc = tl.make_tensor_descriptor(LSE, shape=[lse_rows], strides=[1], block_shape=[BLOCK_M])
    delta_desc = tl.make_tensor_descriptor(DELTA, shape=[lse_rows], strides=[1], block_shape=[BLOCK_M])

    q = q_desc.load([start_m, 0])                                       # (BLOCK_M, BLOCK_D)
    do = do_desc.load([start_m, 0])
    lse2 = lse_desc.load([pid_bh * lse_stride + start_m]) * LOG2E       # (BLOCK_M,)
    delta = delta_desc.load([pid_bh * lse_stride + start_m])
    if HAS_DROPOUT:
        keys_desc_m = tl.make_tensor_descriptor(KEYS, shape=[keys_total], strides=[1], block_shape=[BLOCK_M])
        keys_desc_n = tl.make_tensor_descriptor(KEYS, shape=[keys_total], strides=[1], block_shape=[BLOCK_N])
        rk = keys_desc_m.load([seqlen_k + h * rng_rows + b * seqlen_q + start_m]).to(tl.uint32, bitcast=True)
        tl.static_assert(BLOCK_N <= DROPOUT_GROUP, "dropout: a key tile must lie in one column group")
        cs_mult = tl.load(KEYS + keys_total).to(tl.uint32, bitcast=True)   # the table's last entry
        threshold = dropout_threshold(dropout_p)
        # dS = P (dP keep / (1 - p) - delta) = P (dP keep - (1 - p) delta) / (1 - p): the
        # division leaves the loop (dQ scales once)
        keep_frac = 1.0 - dropout_p
        delta = delta * keep_frac
    dq = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)
    n_lo = 0
    n_hi = seqlen_k
    if PARTIAL:
        # the key tiles every row of the block sees (kernels.common.kv_tile_ranges' [b, c))
        n_lo, n_hi = bulk_key_tiles(start_m, seqlen_q, seqlen_k, window_left, window_right, BLOCK_M, BLOCK_N,
                                    HAS_LEFT, HAS_RIGHT)
    for start_n in tl.range(n_lo, n_hi, BLOCK_N, warp_specialize=True):
        k = k_desc.load([start_n, 0])                                   # (BLOCK_N, BLOCK_D)
        v = v_desc.load([start_n, 0])
        qk = tl.dot(q, tl.trans(k))                                     # (BLOCK_M, BLOCK_N)
        p = tl.exp2(qk * qk_scale - lse2[:, None])
        dp = tl.dot(do, tl.trans(v))                                    # (BLOCK_M, BLOCK_N)
        if HAS_DROPOUT:
            ck = keys_desc_n.load([start_n]).to(tl.uint32, bitcast=True)
            # dS = P (keep dP - (1 - p) delta), the mask a float (kernels.common.dropout_keep_scale)
            keep = dropout_keep_scale(rk[:, None], ck[None, :], dropout_group_mult(cs_mult, start_n), threshold)
            ds = p * (keep * dp - delta[:, None])
        else:
            ds = p * (dp - delta[:, None])
        dq = tl.dot(ds.to(k.dtype), k, dq)

    dq_desc = tl.make_tensor_descriptor(DQ + b.to(tl.int64) * stride_dqb + h * stride_dqh,
                                        shape=[seqlen_q, HEAD_DIM], strides=[stride_dqn, 1],
                                        block_shape=[BLOCK_M, BLOCK_D])
    if HAS_DROPOUT:
        dq = dq / keep_frac
    if PARTIAL:
        dq_desc.store([start_m, 0], dq.to(DQ.dtype.element_ty))         # unscaled: RESUME scales once
    else:
        dq_desc.store([start_m, 0], (dq * softmax_scale).to(DQ.dtype.element_ty))
