"""FlashAttention-2 backward kernels: delta preprocess, dK/dV, dQ.

Recomputation from the saved logsumexp: P = exp2(S * scale * log2e - LSE * log2e)
(one-row fp32 calls, QK_LEVELS > 0: LSE comes in log2 units and the exponent is one FMA).
  dV = P^T dO,  dP = dO V^T,  dS = P * (dP - delta),  dK = scale * dS^T Q,  dQ = scale * dS K,
with delta = rowsum(dO * O) from the preprocess kernel, or computed by the dQ kernel
itself (FUSED_DELTA, which then runs before dK/dV; dropout folds its mask and
1/(1-p) into P for dV and into dP). With softcap, dS picks up the factor 1 - tanh^2.

dK/dV: one program per key block of one (batch, kv head); it loops over the query
heads of its GQA group and their query blocks, so it owns its dK, dV rows and sums
the group without atomics. dQ: its own kernel with query blocks outermost, like the
forward pass. Neither uses atomics, so the backward pass is bitwise deterministic.

dK/dV tiles come in two layouts (KEY_ROWS): key rows x query columns (S^T = K Q^T: K and
V are the wgmma A operands, held in registers) or query rows x key columns (S = Q K^T:
K and V stay in shared memory as B operands; P^T and dS^T pass through shared memory).
launchers/backward.py (DKDV_QUERY_ROWS) picks.
"""
import triton
import triton.language as tl

from .common import (DROPOUT_GROUP, LOG2E, NO_SPECIALIZE, dense_program, bulk_key_tiles, bulk_query_tiles, dropout_group_mult,
                     dropout_keep_scale,
                     dropout_threshold, exp2_one_rounding, find_sequence,
                     kv_tile_ranges, head_rows_desc, q_tile_ranges, dot_apart, qk_dot, scores_log2, softcap_tanh,
                     tile_load, tile_store)


@triton.jit
def bwd_preprocess_kernel(O, DO, DELTA, CU_Q,
                          stride_ob, stride_on, stride_oh, stride_dob, stride_don, stride_doh,
                          stride_db, stride_dh, nheads, seqlen_q,
                          HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr,
                          IS_VARLEN: tl.constexpr, DQ_ACCUM=None):
    """delta = rowsum(dO * O), fp32, laid out like the lse. Grid: (B * H, cdiv(max Nq, BLOCK_M)).
    DQ_ACCUM (dense calls only; session 29, launchers/backward_gluon.FUSED_DQ_ZERO_IN_PREPROCESS):
    the fused Gluon backward's fp32 accumulator (B, Nq, H, D) contiguous, whose rows
    [this block] x head h x D this program also zeroes (the grid covers all of it), so
    that kernels/dq_accum.zero_f32_kernel's launch goes. None (every other launch, bound as a
    constexpr): no parameter, the kernel of before."""
    pid_bh = tl.program_id(0)
    b = pid_bh // nheads
    h = pid_bh % nheads
    q_start = 0
    if IS_VARLEN:
        q_start = tl.load(CU_Q + b)
        seqlen_q = tl.load(CU_Q + b + 1) - q_start
    offs_m = tl.program_id(1) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    mask = (offs_m[:, None] < seqlen_q) & (offs_d[None, :] < HEAD_DIM)
    if DQ_ACCUM is not None:
        # (the stores depend on nothing: issued before the loads)
        tl.static_assert(not IS_VARLEN, "DQ_ACCUM: dense calls only")
        acc_rows = (b * seqlen_q + offs_m).to(tl.int64)[:, None] * nheads + h
        tl.store(DQ_ACCUM + acc_rows * HEAD_DIM + offs_d[None, :], tl.zeros([BLOCK_M, BLOCK_D], tl.float32),
                 mask=mask)
    rows = (q_start + offs_m)[:, None]
    o = tl.load(O + b * stride_ob + h * stride_oh + rows * stride_on + offs_d[None, :], mask=mask, other=0.0)
    do = tl.load(DO + b * stride_dob + h * stride_doh + rows * stride_don + offs_d[None, :], mask=mask, other=0.0)
    delta = tl.sum(o.to(tl.float32) * do.to(tl.float32), 1)
    tl.store(DELTA + b * stride_db + h * stride_dh + q_start + offs_m, delta, mask=offs_m < seqlen_q)


@triton.jit
def _dkdv_tile(dk, dv, k, v, q_desc, do_desc, b, h, lse_ptr, delta_ptr, start_m, offs_n, seqlen_q, seqlen_k, diag,
               qk_scale, softcap_scale, softcap_out, slope_log2, window_left, window_right,
               ck, mk, rk_ptr, threshold, dropout_p,
               BLOCK_M: tl.constexpr, MASKED: tl.constexpr,
               HAS_LEFT: tl.constexpr, HAS_RIGHT: tl.constexpr, HAS_ALIBI: tl.constexpr,
               HAS_SOFTCAP: tl.constexpr, HAS_DROPOUT: tl.constexpr, DOT_PRECISION: tl.constexpr,
               BLOCK_D: tl.constexpr, HOST_DESC: tl.constexpr, KEY_ROWS: tl.constexpr, QK_LEVELS: tl.constexpr = 0):
    """One query tile of a dK/dV program: its loads, then the math in either layout."""
    offs_m = start_m + tl.arange(0, BLOCK_M)
    rk = 0
    if HAS_DROPOUT:  # row keys of this tile, issued first so that the load overlaps the dots
        rk = tl.load(rk_ptr + offs_m, mask=offs_m < seqlen_q, other=0).to(tl.uint32, bitcast=True)  # (BLOCK_M,)
    q = tile_load(q_desc, b, h, start_m, BLOCK_M, BLOCK_D, HOST_DESC)     # (BLOCK_M, BLOCK_D)
    do = tile_load(do_desc, b, h, start_m, BLOCK_M, BLOCK_D, HOST_DESC)   # (BLOCK_M, BLOCK_D)
    # rows past seqlen_q get lse = +inf, hence p = 0: they need no mask
    if QK_LEVELS > 0:
        # one-row fp32: LSE holds log2 units (launchers/backward.py recomputes it by the forward's LSE_LOG2 rather
        # than round-trip the natural lse through ln 2 and log2 e: two roundings at |lse| ~ 10; session 60)
        lse2 = tl.load(lse_ptr + offs_m, mask=offs_m < seqlen_q, other=float("inf"))
    else:
        lse2 = tl.load(lse_ptr + offs_m, mask=offs_m < seqlen_q, other=float("inf")) * LOG2E
    delta = tl.load(delta_ptr + offs_m, mask=offs_m < seqlen_q, other=0.0)
    if KEY_ROWS:
        dk, dv = _dkdv_math_key_rows(
            dk, dv, k, v, q, do, lse2, delta, rk, offs_m, offs_n, seqlen_k, diag, qk_scale, softcap_scale,
            softcap_out, slope_log2, window_left, window_right, ck, mk, threshold, dropout_p, MASKED, HAS_LEFT,
            HAS_RIGHT, HAS_ALIBI, HAS_SOFTCAP, HAS_DROPOUT, DOT_PRECISION, QK_LEVELS)
    else:
        dk, dv = _dkdv_math_query_rows(
            dk, dv, k, v, q, do, lse2, delta, rk, offs_m, offs_n, seqlen_k, diag, qk_scale, softcap_scale,
            softcap_out, slope_log2, window_left, window_right, ck, mk, threshold, dropout_p, MASKED, HAS_LEFT,
            HAS_RIGHT, HAS_ALIBI, HAS_SOFTCAP, HAS_DROPOUT, DOT_PRECISION, QK_LEVELS)
    return dk, dv


@triton.jit
def _dkdv_math_key_rows(dk, dv, k, v, q, do, lse2, delta, rk, offs_m, offs_n, seqlen_k, diag, qk_scale,
                        softcap_scale, softcap_out, slope_log2, window_left, window_right, ck, mk, threshold,
                        dropout_p, MASKED: tl.constexpr, HAS_LEFT: tl.constexpr, HAS_RIGHT: tl.constexpr,
                        HAS_ALIBI: tl.constexpr, HAS_SOFTCAP: tl.constexpr, HAS_DROPOUT: tl.constexpr,
                        DOT_PRECISION: tl.constexpr, QK_LEVELS: tl.constexpr = 0):
    # Transposed layout: key rows (BLOCK_N) x query columns (BLOCK_M), so that P^T and
    # dS^T feed dV and dK without a transpose in registers. K and V are then the dots'
    # A operands, which Triton keeps in registers (2 x BLOCK_N x BLOCK_D bf16).
    qkT = qk_dot(k, q, DOT_PRECISION, QK_LEVELS)                               # (BLOCK_N, BLOCK_M)
    sT = scores_log2(qkT, offs_m[None, :], offs_n[:, None], seqlen_k, diag, qk_scale,
                     softcap_scale, softcap_out, slope_log2, window_left, window_right,
                     MASKED, HAS_LEFT, HAS_RIGHT, HAS_ALIBI, HAS_SOFTCAP, DOT_PRECISION)
    if QK_LEVELS > 0 and not HAS_ALIBI and not HAS_SOFTCAP:   # one-row fp32: one rounding
        pT = exp2_one_rounding(qkT, sT, lse2[None, :], qk_scale)
    else:
        pT = tl.exp2(sT - lse2[None, :])                            # normalised probabilities
    dpT = qk_dot(v, do, DOT_PRECISION, QK_LEVELS)                   # (BLOCK_N, BLOCK_M)
    if HAS_DROPOUT:
        # the mask as 1 / (1 - p) or 0 (kernels.common.dropout_keep_scale: no booleans)
        keepT = dropout_keep_scale(rk[None, :], ck[:, None], mk, threshold) * (1.0 / (1.0 - dropout_p))
        dv += tl.dot((pT * keepT).to(do.dtype), do, input_precision=DOT_PRECISION)
        dpT = dpT * keepT
    else:
        dv += tl.dot(pT.to(do.dtype), do, input_precision=DOT_PRECISION)
    dsT = pT * (dpT - delta[None, :])
    if HAS_SOFTCAP:
        t = softcap_tanh(qkT, softcap_scale)
        dsT = dsT * (1.0 - t * t)
    dk += tl.dot(dsT.to(q.dtype), q, input_precision=DOT_PRECISION)
    return dk, dv


@triton.jit
def _dkdv_math_query_rows(dk, dv, k, v, q, do, lse2, delta, rk, offs_m, offs_n, seqlen_k, diag, qk_scale,
                          softcap_scale, softcap_out, slope_log2, window_left, window_right, ck, mk, threshold,
                          dropout_p, MASKED: tl.constexpr, HAS_LEFT: tl.constexpr, HAS_RIGHT: tl.constexpr,
                          HAS_ALIBI: tl.constexpr, HAS_SOFTCAP: tl.constexpr, HAS_DROPOUT: tl.constexpr,
                          DOT_PRECISION: tl.constexpr, QK_LEVELS: tl.constexpr = 0):
    # Forward layout: query rows (BLOCK_M) x key columns (BLOCK_N). K^T and V^T are the
    # B operands of S and dP, read from shared memory, so no register holds K or V (at
    # D = 256 those are 64 registers a thread, the difference between spilling 2 KB and
    # not); P^T and dS^T go through shared memory to become dV's and dK's A operands.
    qk = qk_dot(q, k, DOT_PRECISION, QK_LEVELS)                                # (BLOCK_M, BLOCK_N)
    s = scores_log2(qk, offs_m[:, None], offs_n[None, :], seqlen_k, diag, qk_scale,
                    softcap_scale, softcap_out, slope_log2, window_left, window_right,
                    MASKED, HAS_LEFT, HAS_RIGHT, HAS_ALIBI, HAS_SOFTCAP, DOT_PRECISION)
    if QK_LEVELS > 0 and not HAS_ALIBI and not HAS_SOFTCAP:   # one-row fp32: one rounding
        p = exp2_one_rounding(qk, s, lse2[:, None], qk_scale)
    else:
        p = tl.exp2(s - lse2[:, None])
    dp = qk_dot(do, v, DOT_PRECISION, QK_LEVELS)                        # (BLOCK_M, BLOCK_N)
    if HAS_DROPOUT:
        keep = dropout_keep_scale(rk[:, None], ck[None, :], mk, threshold) * (1.0 / (1.0 - dropout_p))
        dv += tl.dot(tl.trans((p * keep).to(do.dtype)), do, input_precision=DOT_PRECISION)
        dp = dp * keep
    else:
        dv += tl.dot(tl.trans(p.to(do.dtype)), do, input_precision=DOT_PRECISION)
    ds = p * (dp - delta[:, None])
    if HAS_SOFTCAP:
        t = softcap_tanh(qk, softcap_scale)
        ds = ds * (1.0 - t * t)
    dk += tl.dot(tl.trans(ds.to(q.dtype)), q, input_precision=DOT_PRECISION)
    return dk, dv


@triton.jit(do_not_specialize=NO_SPECIALIZE)
def attn_bwd_dkdv_kernel(
    Q, K, V, DO, LSE, DELTA, DK, DV,
    CU_Q, CU_K, CU_BLOCKS, ALIBI, KEYS,
    Q_DESC, K_DESC, V_DESC, DO_DESC, DK_DESC, DV_DESC,   # HOST_DESC: host-made, of the (B, N, H, D) tensors
    stride_qb, stride_qn, stride_qh,
    stride_kb, stride_kn, stride_kh,
    stride_vb, stride_vn, stride_vh,
    stride_dob, stride_don, stride_doh,
    stride_dkb, stride_dkn, stride_dkh,
    stride_dvb, stride_dvn, stride_dvh,
    stride_lb, stride_lh,
    stride_ab, stride_ah,
    nheads_k, group, batch, seqlen_q, seqlen_k,
    softmax_scale, qk_scale, softcap_scale, softcap_out, window_left, window_right, dropout_p,
    rng_rows, rng_stride, n_bucket,
    HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    IS_VARLEN: tl.constexpr, HAS_LEFT: tl.constexpr, HAS_RIGHT: tl.constexpr,
    HAS_ALIBI: tl.constexpr, HAS_SOFTCAP: tl.constexpr, HAS_DROPOUT: tl.constexpr,
    DOT_PRECISION: tl.constexpr, HOST_DESC: tl.constexpr = False, RESUME: tl.constexpr = False,
    KEY_ROWS: tl.constexpr = True, BULK_N: tl.constexpr = 0, ONE_LOOP: tl.constexpr = False,
    ROWS_FIRST: tl.constexpr = False, QK_LEVELS: tl.constexpr = 0,
):
    """Grid: (B * Hk, key blocks), or for varlen (Hk, key blocks of all sequences).
    KEY_ROWS: each tile computed as key rows x query columns (S^T, dP^T: K and V held in
    registers as the dots' A operands) or, False, as query rows x key columns (K and V
    read from shared memory; launchers.backward.DKDV_QUERY_ROWS says where).
    RESUME: kernels/bwd_ws.py (PARTIAL) already did the query tiles bulk_query_tiles
    gives, with the same BLOCK_M / BLOCK_N, and left its dK and dV in DK, DV (dK without
    softmax_scale; with dropout both already scaled by 1 / (1 - p), as this kernel's
    tiles are):
    start from them and do the other tiles. BULK_N (0: the bulk's key block is BLOCK_N):
    the bulk ran key blocks of BULK_N, a multiple of BLOCK_N; its query tiles see every key
    of its block, so they are fully visible to this program's keys too, which may also
    have fully visible tiles before them: this program does those as well. ONE_LOOP (with
    RESUME): those tiles in one loop, the mask applied to every one, instead of up to four
    loops of one or two iterations each (which the pipeliner cannot overlap). ONE_LOOP
    without RESUME: every query tile [lo, hi) in one loop, masked throughout, instead of the
    masked / fully visible / masked loops (a mask on a fully visible tile changes nothing;
    launchers/backward.BWD_MASKED_ONE_LOOP says where).
    ROWS_FIRST (dense only): a 1-D grid of B * Hk * key blocks whose consecutive programs
    are the key blocks of one (batch, kv head), so the programs in flight share a few
    heads' Q and dO in L2 (launchers/backward.BWD_ROWS_FIRST); each program computes what
    it would on the 2-D grid."""
    if IS_VARLEN:
        hk = tl.program_id(0)
        pid = tl.program_id(1)
        if pid >= tl.load(CU_BLOCKS + batch):
            return
        b = find_sequence(CU_BLOCKS, pid, batch)
        q_start = tl.load(CU_Q + b)
        k_start = tl.load(CU_K + b)
        seqlen_q = tl.load(CU_Q + b + 1) - q_start
        seqlen_k = tl.load(CU_K + b + 1) - k_start
        start_n = (pid - tl.load(CU_BLOCKS + b)) * BLOCK_N
    else:
        pid_bh, kblock, _ = dense_program(seqlen_k, BLOCK_N, ROWS_FIRST)
        b = pid_bh // nheads_k
        hk = pid_bh % nheads_k
        q_start = 0
        k_start = 0
        # Causal: key block 0 is seen by every query block, so it has the most work and
        # goes first, which the natural order already does (ROWS_FIRST: first of its head).
        start_n = kblock * BLOCK_N
    diag = seqlen_k - seqlen_q
    offs_n = start_n + tl.arange(0, BLOCK_N)

    k_desc = head_rows_desc(K_DESC, K, b, k_start, hk, stride_kb, stride_kn, stride_kh, seqlen_k,
                            HEAD_DIM, BLOCK_N, BLOCK_D, HOST_DESC)
    v_desc = head_rows_desc(V_DESC, V, b, k_start, hk, stride_vb, stride_vn, stride_vh, seqlen_k,
                            HEAD_DIM, BLOCK_N, BLOCK_D, HOST_DESC)
    k = tile_load(k_desc, b, hk, start_n, BLOCK_N, BLOCK_D, HOST_DESC)    # (BLOCK_N, BLOCK_D)
    v = tile_load(v_desc, b, hk, start_n, BLOCK_N, BLOCK_D, HOST_DESC)
    dk_desc = head_rows_desc(DK_DESC, DK, b, k_start, hk, stride_dkb, stride_dkn, stride_dkh, seqlen_k,
                             HEAD_DIM, BLOCK_N, BLOCK_D, HOST_DESC)
    dv_desc = head_rows_desc(DV_DESC, DV, b, k_start, hk, stride_dvb, stride_dvn, stride_dvh, seqlen_k,
                             HEAD_DIM, BLOCK_N, BLOCK_D, HOST_DESC)
    if RESUME:
        dk = tile_load(dk_desc, b, hk, start_n, BLOCK_N, BLOCK_D, HOST_DESC).to(tl.float32)
        dv = tile_load(dv_desc, b, hk, start_n, BLOCK_N, BLOCK_D, HOST_DESC).to(tl.float32)
    else:
        dk = tl.zeros([BLOCK_N, BLOCK_D], dtype=tl.float32)
        dv = tl.zeros([BLOCK_N, BLOCK_D], dtype=tl.float32)

    lo, full_lo, full_hi, hi = q_tile_ranges(start_n, seqlen_q, seqlen_k, diag, window_left, window_right,
                                             BLOCK_M, BLOCK_N, HAS_LEFT, HAS_RIGHT)
    un_lo = full_lo                     # the fully visible tiles this kernel still does
    skip_lo = full_lo                   # (BULK_N: and [full_lo, skip_lo) before the bulk's)
    if RESUME:
        if BULK_N == 0:
            m_lo, m_hi = bulk_query_tiles(start_n, seqlen_q, seqlen_k, window_left, window_right, BLOCK_M, BLOCK_N,
                                          HAS_LEFT, HAS_RIGHT)
            un_lo = tl.where(m_hi > m_lo, m_hi, full_lo)
        else:
            tl.static_assert(BULK_N % BLOCK_N == 0, "RESUME: the bulk's key block must be a multiple of BLOCK_N")
            m_lo, m_hi = bulk_query_tiles((start_n // BULK_N) * BULK_N, seqlen_q, seqlen_k, window_left,
                                          window_right, BLOCK_M, BULK_N, HAS_LEFT, HAS_RIGHT)
            skip_lo = tl.where(m_hi > m_lo, tl.minimum(tl.maximum(m_lo, full_lo), full_hi), full_hi)
            un_lo = tl.where(m_hi > m_lo, tl.minimum(tl.maximum(m_hi, skip_lo), full_hi), full_hi)
    ck = 0
    mk = 0
    threshold = 0
    row_base = 0
    if HAS_DROPOUT:
        # this program's column keys and group multiplier (its keys lie in one column
        # group), once; row keys are loaded per tile (like lse)
        tl.static_assert(BLOCK_N <= DROPOUT_GROUP, "dropout: a key block must lie in one column group")
        threshold = dropout_threshold(dropout_p)
        ck = tl.load(KEYS + offs_n, mask=offs_n < rng_stride, other=0).to(tl.uint32, bitcast=True)  # (BLOCK_N,)
        cs_mult = tl.load(KEYS + rng_stride + group * nheads_k * rng_rows).to(tl.uint32, bitcast=True)
        mk = dropout_group_mult(cs_mult, start_n)
        row_base = b * seqlen_q
        if IS_VARLEN:
            row_base = q_start
    for g in range(group):
        h = hk * group + g
        n_q = tl.maximum(seqlen_q, 1)  # a zero-length sequence loads nothing; its descriptor must be valid
        q_desc = head_rows_desc(Q_DESC, Q, b, q_start, h, stride_qb, stride_qn, stride_qh, n_q,
                                HEAD_DIM, BLOCK_M, BLOCK_D, HOST_DESC)
        do_desc = head_rows_desc(DO_DESC, DO, b, q_start, h, stride_dob, stride_don, stride_doh, n_q,
                                 HEAD_DIM, BLOCK_M, BLOCK_D, HOST_DESC)
        lse_ptr = LSE + b * stride_lb + h * stride_lh + q_start
        delta_ptr = DELTA + b * stride_lb + h * stride_lh + q_start
        slope_log2 = 0.0
        if HAS_ALIBI:
            slope_log2 = tl.load(ALIBI + b * stride_ab + h * stride_ah) * LOG2E
        rk_ptr = KEYS + rng_stride + h.to(tl.int64) * rng_rows + row_base  # row keys of head h
        if ONE_LOOP and not RESUME:     # (constexpr) every query tile that sees a key, masked
            for start_m in range(lo, hi, BLOCK_M):
                dk, dv = _dkdv_tile(dk, dv, k, v, q_desc, do_desc, b, h, lse_ptr, delta_ptr, start_m, offs_n,
                                    seqlen_q, seqlen_k, diag, qk_scale, softcap_scale, softcap_out, slope_log2,
                                    window_left, window_right, ck, mk, rk_ptr, threshold, dropout_p,
                                    BLOCK_M, True, HAS_LEFT, HAS_RIGHT, HAS_ALIBI, HAS_SOFTCAP, HAS_DROPOUT,
                                    DOT_PRECISION, BLOCK_D, HOST_DESC, KEY_ROWS, QK_LEVELS)
        elif RESUME and ONE_LOOP:     # (constexpr: the other kernels compile without this loop)
            # The tiles of the four loops below, in their order, as two runs: [lo, skip_lo)
            # (masked, then fully visible before the bulk's) and [b_lo, hi) (fully visible
            # after the bulk's, then masked; hi may end inside a tile). A mask on a fully
            # visible tile changes nothing, so the result is the four loops'.
            # (cdiv: a run's end is a tile boundary or, clamped, hi; then the other is empty)
            n_a = tl.cdiv(skip_lo - lo, BLOCK_M)
            b_lo = tl.minimum(un_lo, full_hi)    # (defensive: un_lo <= full_hi by construction)
            for t in range(0, n_a + tl.cdiv(hi - b_lo, BLOCK_M)):
                start_m = tl.where(t < n_a, lo + t * BLOCK_M, b_lo + (t - n_a) * BLOCK_M)
                dk, dv = _dkdv_tile(dk, dv, k, v, q_desc, do_desc, b, h, lse_ptr, delta_ptr, start_m, offs_n,
                                    seqlen_q, seqlen_k, diag, qk_scale, softcap_scale, softcap_out, slope_log2,
                                    window_left, window_right, ck, mk, rk_ptr, threshold, dropout_p,
                                    BLOCK_M, True, HAS_LEFT, HAS_RIGHT, HAS_ALIBI, HAS_SOFTCAP, HAS_DROPOUT,
                                    DOT_PRECISION, BLOCK_D, HOST_DESC, KEY_ROWS, QK_LEVELS)
        else:
            for start_m in range(lo, full_lo, BLOCK_M):
                dk, dv = _dkdv_tile(dk, dv, k, v, q_desc, do_desc, b, h, lse_ptr, delta_ptr, start_m, offs_n,
                                    seqlen_q, seqlen_k, diag, qk_scale, softcap_scale, softcap_out, slope_log2,
                                    window_left, window_right, ck, mk, rk_ptr, threshold, dropout_p,
                                    BLOCK_M, True, HAS_LEFT, HAS_RIGHT, HAS_ALIBI, HAS_SOFTCAP, HAS_DROPOUT,
                                    DOT_PRECISION, BLOCK_D, HOST_DESC, KEY_ROWS, QK_LEVELS)
            if RESUME and BULK_N > 0:   # (constexpr: the other kernels compile without this loop)
                for start_m in range(full_lo, skip_lo, BLOCK_M):
                    dk, dv = _dkdv_tile(dk, dv, k, v, q_desc, do_desc, b, h, lse_ptr, delta_ptr, start_m, offs_n,
                                        seqlen_q, seqlen_k, diag, qk_scale, softcap_scale, softcap_out, slope_log2,
                                        window_left, window_right, ck, mk, rk_ptr, threshold, dropout_p,
                                        BLOCK_M, False, HAS_LEFT, HAS_RIGHT, HAS_ALIBI, HAS_SOFTCAP, HAS_DROPOUT,
                                        DOT_PRECISION, BLOCK_D, HOST_DESC, KEY_ROWS, QK_LEVELS)
            for start_m in range(un_lo, full_hi, BLOCK_M):
                dk, dv = _dkdv_tile(dk, dv, k, v, q_desc, do_desc, b, h, lse_ptr, delta_ptr, start_m, offs_n,
                                    seqlen_q, seqlen_k, diag, qk_scale, softcap_scale, softcap_out, slope_log2,
                                    window_left, window_right, ck, mk, rk_ptr, threshold, dropout_p,
                                    BLOCK_M, False, HAS_LEFT, HAS_RIGHT, HAS_ALIBI, HAS_SOFTCAP, HAS_DROPOUT,
                                    DOT_PRECISION, BLOCK_D, HOST_DESC, KEY_ROWS, QK_LEVELS)
            for start_m in range(full_hi, hi, BLOCK_M):
                dk, dv = _dkdv_tile(dk, dv, k, v, q_desc, do_desc, b, h, lse_ptr, delta_ptr, start_m, offs_n,
                                    seqlen_q, seqlen_k, diag, qk_scale, softcap_scale, softcap_out, slope_log2,
                                    window_left, window_right, ck, mk, rk_ptr, threshold, dropout_p,
                                    BLOCK_M, True, HAS_LEFT, HAS_RIGHT, HAS_ALIBI, HAS_SOFTCAP, HAS_DROPOUT,
                                    DOT_PRECISION, BLOCK_D, HOST_DESC, KEY_ROWS, QK_LEVELS)

    dk = dk * softmax_scale
    tile_store(dk_desc, b, hk, start_n, dk.to(DK.dtype.element_ty), BLOCK_N, BLOCK_D, HOST_DESC)
    tile_store(dv_desc, b, hk, start_n, dv.to(DV.dtype.element_ty), BLOCK_N, BLOCK_D, HOST_DESC)


@triton.jit
def _dq_tile(dq, q, do, lse2, delta, k_desc, v_desc, b, hk, start_n, offs_m, seqlen_k, diag,
             qk_scale, softcap_scale, softcap_out, slope_log2, window_left, window_right,
             rk, KEYS, cs_mult, rng_stride, threshold, dropout_p,
             BLOCK_N: tl.constexpr, MASKED: tl.constexpr,
             HAS_LEFT: tl.constexpr, HAS_RIGHT: tl.constexpr, HAS_ALIBI: tl.constexpr,
             HAS_SOFTCAP: tl.constexpr, HAS_DROPOUT: tl.constexpr, DOT_PRECISION: tl.constexpr,
             BLOCK_D: tl.constexpr, HOST_DESC: tl.constexpr, QK_LEVELS: tl.constexpr = 0):
    offs_n = start_n + tl.arange(0, BLOCK_N)
    if HAS_DROPOUT:  # column keys of this tile, issued first so that the load overlaps the dots
        ck = tl.load(KEYS + offs_n, mask=offs_n < rng_stride, other=0).to(tl.uint32, bitcast=True)  # (BLOCK_N,)
    k = tile_load(k_desc, b, hk, start_n, BLOCK_N, BLOCK_D, HOST_DESC)    # (BLOCK_N, BLOCK_D)
    v = tile_load(v_desc, b, hk, start_n, BLOCK_N, BLOCK_D, HOST_DESC)
    qk = qk_dot(q, k, DOT_PRECISION, QK_LEVELS)                                # (BLOCK_M, BLOCK_N)
    s = scores_log2(qk, offs_m[:, None], offs_n[None, :], seqlen_k, diag, qk_scale,
                    softcap_scale, softcap_out, slope_log2, window_left, window_right,
                    MASKED, HAS_LEFT, HAS_RIGHT, HAS_ALIBI, HAS_SOFTCAP, DOT_PRECISION)
    if QK_LEVELS > 0 and not HAS_ALIBI and not HAS_SOFTCAP:   # one-row fp32: one rounding
        p = exp2_one_rounding(qk, s, lse2[:, None], qk_scale)
    else:
        p = tl.exp2(s - lse2[:, None])
    dp = qk_dot(do, v, DOT_PRECISION, QK_LEVELS)                    # (BLOCK_M, BLOCK_N)
    if HAS_DROPOUT:
        keep = dropout_keep_scale(rk[:, None], ck[None, :], dropout_group_mult(cs_mult, start_n), threshold)
        dp = dp * (keep * (1.0 / (1.0 - dropout_p)))
    ds = p * (dp - delta[:, None])
    if HAS_SOFTCAP:
        t = softcap_tanh(qk, softcap_scale)
        ds = ds * (1.0 - t * t)
    if QK_LEVELS > 0:
        # one-row fp32: the tile's dS K summed apart from dq (common.dot_apart)
        dq = dq + dot_apart(ds.to(k.dtype), k, qk_scale, DOT_PRECISION)
    else:
        dq += tl.dot(ds.to(k.dtype), k, input_precision=DOT_PRECISION)
    return dq


@triton.jit
def _dq_own_tiles(start_m, seqlen_q, seqlen_k, window_left, window_right, full_lo, full_hi,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HAS_LEFT: tl.constexpr, HAS_RIGHT: tl.constexpr,
                  RESUME: tl.constexpr, BULK_M: tl.constexpr):
    """(un_hi, skip_hi): the dQ kernel does the fully visible key tiles [full_lo, un_hi) and
    [skip_hi, full_hi); all of them, or with RESUME none of the bulk's (bulk_key_tiles)."""
    un_hi = full_hi if not RESUME else full_lo      # the fully visible tiles this kernel does: [full_lo, un_hi)
    skip_hi = full_hi                               # (BULK_M: and [skip_hi, full_hi) after the bulk's)
    if RESUME and BULK_M > 0:
        tl.static_assert(BULK_M % BLOCK_M == 0, "RESUME: the bulk's query block must be a multiple of BLOCK_M")
        n_lo, n_hi = bulk_key_tiles((start_m // BULK_M) * BULK_M, seqlen_q, seqlen_k, window_left, window_right,
                                    BULK_M, BLOCK_N, HAS_LEFT, HAS_RIGHT)
        un_hi = tl.where(n_hi > n_lo, tl.minimum(tl.maximum(n_lo, full_lo), full_hi), full_hi)
        skip_hi = tl.where(n_hi > n_lo, tl.minimum(tl.maximum(n_hi, un_hi), full_hi), full_hi)
    return un_hi, skip_hi


@triton.jit(do_not_specialize=NO_SPECIALIZE)
def attn_bwd_dq_kernel(
    Q, K, V, DO, LSE, DELTA, DQ,
    O,                                                   # FUSED_DELTA: the output, strided as DO; else None
    CU_Q, CU_K, CU_BLOCKS, ALIBI, KEYS,
    Q_DESC, K_DESC, V_DESC, DO_DESC, DQ_DESC,            # HOST_DESC: host-made, of the (B, N, H, D) tensors
    stride_qb, stride_qn, stride_qh,
    stride_kb, stride_kn, stride_kh,
    stride_vb, stride_vn, stride_vh,
    stride_dob, stride_don, stride_doh,
    stride_dqb, stride_dqn, stride_dqh,
    stride_lb, stride_lh,
    stride_ab, stride_ah,
    nheads, group, batch, seqlen_q, seqlen_k,
    softmax_scale, qk_scale, softcap_scale, softcap_out, window_left, window_right, dropout_p,
    rng_rows, rng_stride, n_bucket,
    HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    IS_VARLEN: tl.constexpr, HAS_LEFT: tl.constexpr, HAS_RIGHT: tl.constexpr,
    HAS_ALIBI: tl.constexpr, HAS_SOFTCAP: tl.constexpr, HAS_DROPOUT: tl.constexpr,
    DOT_PRECISION: tl.constexpr, HOST_DESC: tl.constexpr = False, RESUME: tl.constexpr = False,
    BULK_M: tl.constexpr = 0, ONE_LOOP: tl.constexpr = False, FUSED_DELTA: tl.constexpr = False,
    ROWS_FIRST: tl.constexpr = False, QK_LEVELS: tl.constexpr = 0,
):
    """Grid: as the forward kernel's. RESUME: kernels/bwd_ws.py (PARTIAL) already did the
    fully visible key tiles with the same BLOCK_M / BLOCK_N and left its dQ in DQ (without
    softmax_scale; with dropout already scaled by 1 / (1 - p)): start from it and do only
    the masked tiles. BULK_M (0: the bulk's query block is
    BLOCK_M): the bulk ran query blocks of BULK_M, a multiple of BLOCK_M, and did the key
    tiles bulk_key_tiles gives for its block; this program's rows may see more keys fully
    than the whole block did, and it does those tiles too. ONE_LOOP (with RESUME): those
    tiles in one loop, masked throughout (as attn_bwd_dkdv_kernel's); without RESUME, every
    key tile [lo, hi) in one loop, masked throughout (launchers/backward.BWD_MASKED_ONE_LOOP).
    FUSED_DELTA: delta =
    rowsum(dO * O) of this program's rows computed here (O read with dO's strides) and
    written to DELTA for the dK/dV kernel, launched after this one, instead of by
    bwd_preprocess_kernel before both. ROWS_FIRST (dense only): a 1-D grid of B * H * query
    blocks, a head's blocks consecutive (K and V shared in L2 by the programs in flight), as
    attn_bwd_dkdv_kernel's."""
    if IS_VARLEN:
        h = tl.program_id(0)
        pid = tl.program_id(1)
        if pid >= tl.load(CU_BLOCKS + batch):
            return
        b = find_sequence(CU_BLOCKS, pid, batch)
        q_start = tl.load(CU_Q + b)
        k_start = tl.load(CU_K + b)
        seqlen_q = tl.load(CU_Q + b + 1) - q_start
        seqlen_k = tl.load(CU_K + b + 1) - k_start
        block = pid - tl.load(CU_BLOCKS + b)
        n_blocks = tl.load(CU_BLOCKS + b + 1) - tl.load(CU_BLOCKS + b)
    else:
        pid_bh, block, n_blocks = dense_program(seqlen_q, BLOCK_M, ROWS_FIRST)
        b = pid_bh // nheads
        h = pid_bh % nheads
        q_start = 0
        k_start = 0
    if HAS_RIGHT:
        block = n_blocks - 1 - block  # heaviest query blocks first, as in the forward pass
    start_m = block * BLOCK_M
    hk = h // group
    diag = seqlen_k - seqlen_q
    offs_m = start_m + tl.arange(0, BLOCK_M)

    q_desc = head_rows_desc(Q_DESC, Q, b, q_start, h, stride_qb, stride_qn, stride_qh, seqlen_q,
                            HEAD_DIM, BLOCK_M, BLOCK_D, HOST_DESC)
    do_desc = head_rows_desc(DO_DESC, DO, b, q_start, h, stride_dob, stride_don, stride_doh, seqlen_q,
                             HEAD_DIM, BLOCK_M, BLOCK_D, HOST_DESC)
    k_desc = head_rows_desc(K_DESC, K, b, k_start, hk, stride_kb, stride_kn, stride_kh, tl.maximum(seqlen_k, 1),
                            HEAD_DIM, BLOCK_N, BLOCK_D, HOST_DESC)
    v_desc = head_rows_desc(V_DESC, V, b, k_start, hk, stride_vb, stride_vn, stride_vh, tl.maximum(seqlen_k, 1),
                            HEAD_DIM, BLOCK_N, BLOCK_D, HOST_DESC)
    q = tile_load(q_desc, b, h, start_m, BLOCK_M, BLOCK_D, HOST_DESC)
    do = tile_load(do_desc, b, h, start_m, BLOCK_M, BLOCK_D, HOST_DESC)
    row_mask = offs_m < seqlen_q
    if QK_LEVELS > 0:   # (log2 units already, as in _dkdv_tile)
        lse2 = tl.load(LSE + b * stride_lb + h * stride_lh + q_start + offs_m, mask=row_mask, other=float("inf"))
    else:
        lse2 = tl.load(LSE + b * stride_lb + h * stride_lh + q_start + offs_m, mask=row_mask,
                       other=float("inf")) * LOG2E
    if FUSED_DELTA:
        # (with RESUME the dK/dV kernel would have run first, before this delta existed)
        tl.static_assert(not RESUME, "FUSED_DELTA: only bwd.py's own path, dQ launched before dK/dV")
        # rows past seqlen_q and columns past HEAD_DIM read 0, so their delta is 0 (as the
        # preprocess kernel's); dO's tile pads the same way
        offs_d = tl.arange(0, BLOCK_D)
        o = tl.load(O + b * stride_dob + h * stride_doh + (q_start + offs_m)[:, None] * stride_don + offs_d[None, :],
                    mask=row_mask[:, None] & (offs_d[None, :] < HEAD_DIM), other=0.0)   # (BLOCK_M, BLOCK_D)
        delta = tl.sum(o.to(tl.float32) * do.to(tl.float32), 1)
        tl.store(DELTA + b * stride_lb + h * stride_lh + q_start + offs_m, delta, mask=row_mask)
    else:
        delta = tl.load(DELTA + b * stride_lb + h * stride_lh + q_start + offs_m, mask=row_mask, other=0.0)
    dq_desc = head_rows_desc(DQ_DESC, DQ, b, q_start, h, stride_dqb, stride_dqn, stride_dqh, seqlen_q,
                             HEAD_DIM, BLOCK_M, BLOCK_D, HOST_DESC)
    if RESUME:
        dq = tile_load(dq_desc, b, h, start_m, BLOCK_M, BLOCK_D, HOST_DESC).to(tl.float32)
    else:
        dq = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)

    slope_log2 = 0.0
    if HAS_ALIBI:
        slope_log2 = tl.load(ALIBI + b * stride_ab + h * stride_ah) * LOG2E
    rk = 0
    threshold = 0
    cs_mult = 0
    if HAS_DROPOUT:
        tl.static_assert(BLOCK_N <= DROPOUT_GROUP, "dropout: a key tile must lie in one column group")
        threshold = dropout_threshold(dropout_p)
        cs_mult = tl.load(KEYS + rng_stride + nheads * rng_rows).to(tl.uint32, bitcast=True)
        row_global = b * seqlen_q + offs_m
        if IS_VARLEN:
            row_global = q_start + offs_m
        rk = tl.load(KEYS + rng_stride + h.to(tl.int64) * rng_rows + row_global, mask=row_mask,
                     other=0).to(tl.uint32, bitcast=True)                 # (BLOCK_M,)

    lo, full_lo, full_hi, hi = kv_tile_ranges(start_m, seqlen_q, seqlen_k, diag, window_left, window_right,
                                              BLOCK_M, BLOCK_N, HAS_LEFT, HAS_RIGHT)
    if ONE_LOOP and not RESUME:     # (constexpr) every key tile the rows see, masked
        for start_n in range(lo, hi, BLOCK_N):
            dq = _dq_tile(dq, q, do, lse2, delta, k_desc, v_desc, b, hk, start_n, offs_m, seqlen_k, diag,
                          qk_scale, softcap_scale, softcap_out, slope_log2, window_left, window_right,
                          rk, KEYS, cs_mult, rng_stride, threshold, dropout_p,
                          BLOCK_N, True, HAS_LEFT, HAS_RIGHT, HAS_ALIBI, HAS_SOFTCAP, HAS_DROPOUT, DOT_PRECISION,
                          BLOCK_D, HOST_DESC, QK_LEVELS)
    elif RESUME and ONE_LOOP:     # (constexpr: the other kernels compile without this loop)
        un_hi, skip_hi = _dq_own_tiles(start_m, seqlen_q, seqlen_k, window_left, window_right, full_lo, full_hi,
                                       BLOCK_M, BLOCK_N, HAS_LEFT, HAS_RIGHT, RESUME, BULK_M)
        # The tiles of the loops below, in their order, as two runs: [lo, un_hi) (masked,
        # then fully visible before the bulk's) and [skip_hi, hi) (fully visible after the
        # bulk's, then masked; hi may end inside a tile). A mask on a fully visible tile
        # changes nothing, so the result is the loops'.
        # (cdiv: a run's end is a tile boundary or, clamped, hi; then the other is empty)
        n_a = tl.cdiv(un_hi - lo, BLOCK_N)
        for t in range(0, n_a + tl.cdiv(hi - skip_hi, BLOCK_N)):
            start_n = tl.where(t < n_a, lo + t * BLOCK_N, skip_hi + (t - n_a) * BLOCK_N)
            dq = _dq_tile(dq, q, do, lse2, delta, k_desc, v_desc, b, hk, start_n, offs_m, seqlen_k, diag,
                          qk_scale, softcap_scale, softcap_out, slope_log2, window_left, window_right,
                          rk, KEYS, cs_mult, rng_stride, threshold, dropout_p,
                          BLOCK_N, True, HAS_LEFT, HAS_RIGHT, HAS_ALIBI, HAS_SOFTCAP, HAS_DROPOUT, DOT_PRECISION,
                          BLOCK_D, HOST_DESC, QK_LEVELS)
    else:
        for start_n in range(lo, full_lo, BLOCK_N):
            dq = _dq_tile(dq, q, do, lse2, delta, k_desc, v_desc, b, hk, start_n, offs_m, seqlen_k, diag,
                          qk_scale, softcap_scale, softcap_out, slope_log2, window_left, window_right,
                          rk, KEYS, cs_mult, rng_stride, threshold, dropout_p,
                          BLOCK_N, True, HAS_LEFT, HAS_RIGHT, HAS_ALIBI, HAS_SOFTCAP, HAS_DROPOUT, DOT_PRECISION,
                          BLOCK_D, HOST_DESC, QK_LEVELS)
        un_hi, skip_hi = _dq_own_tiles(start_m, seqlen_q, seqlen_k, window_left, window_right, full_lo, full_hi,
                                       BLOCK_M, BLOCK_N, HAS_LEFT, HAS_RIGHT, RESUME, BULK_M)
        for start_n in range(full_lo, un_hi, BLOCK_N):
            dq = _dq_tile(dq, q, do, lse2, delta, k_desc, v_desc, b, hk, start_n, offs_m, seqlen_k, diag,
                          qk_scale, softcap_scale, softcap_out, slope_log2, window_left, window_right,
                          rk, KEYS, cs_mult, rng_stride, threshold, dropout_p,
                          BLOCK_N, False, HAS_LEFT, HAS_RIGHT, HAS_ALIBI, HAS_SOFTCAP, HAS_DROPOUT, DOT_PRECISION,
                          BLOCK_D, HOST_DESC, QK_LEVELS)
        if RESUME and BULK_M > 0:   # (constexpr: the other kernels compile without this loop)
            for start_n in range(skip_hi, full_hi, BLOCK_N):
                dq = _dq_tile(dq, q, do, lse2, delta, k_desc, v_desc, b, hk, start_n, offs_m, seqlen_k, diag,
                              qk_scale, softcap_scale, softcap_out, slope_log2, window_left, window_right,
                              rk, KEYS, cs_mult, rng_stride, threshold, dropout_p,
                              BLOCK_N, False, HAS_LEFT, HAS_RIGHT, HAS_ALIBI, HAS_SOFTCAP, HAS_DROPOUT, DOT_PRECISION,
                              BLOCK_D, HOST_DESC, QK_LEVELS)
        for start_n in range(full_hi, hi, BLOCK_N):
            dq = _dq_tile(dq, q, do, lse2, delta, k_desc, v_desc, b, hk, start_n, offs_m, seqlen_k, diag,
                          qk_scale, softcap_scale, softcap_out, slope_log2, window_left, window_right,
                          rk, KEYS, cs_mult, rng_stride, threshold, dropout_p,
                          BLOCK_N, True, HAS_LEFT, HAS_RIGHT, HAS_ALIBI, HAS_SOFTCAP, HAS_DROPOUT, DOT_PRECISION,
                          BLOCK_D, HOST_DESC, QK_LEVELS)

    dq = dq * softmax_scale
    tile_store(dq_desc, b, h, start_m, dq.to(DQ.dtype.element_ty), BLOCK_M, BLOCK_D, HOST_DESC)
