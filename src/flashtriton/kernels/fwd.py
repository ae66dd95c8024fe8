"""FlashAttention-2 forward kernel.

One program owns BLOCK_M query rows of one (batch, head) for its whole life
(queries outermost); the inner loop streams BLOCK_N-row tiles of K and V.
The grid is (batch * heads, query blocks), or for variable-length batches
(heads, query blocks of all sequences), so sequence length is a parallel axis.

Per program, in registers:  acc (BLOCK_M, BLOCK_D) fp32, unnormalised;
                            m_i, l_i (BLOCK_M,) fp32: running max and sum, log2 units.
Written once at the end:    out = acc / l_i, and lse = (m_i + log2(l_i)) * ln(2)
                            (LSE_LOG2: m_i + log2(l_i), for the one-row fp32 backward).

Loads and stores go through tensor descriptors (TMA on Hopper), so rows past the
sequence end and columns past the head dim read as zeros and are never written.
Either each program makes descriptors of its own (sequence, head) slice (varlen, and
the default), or, with HOST_DESC, the launcher passes descriptors of the whole
(B, N, H, D) tensors and programs address their slice by coordinates.
"""
import triton
import triton.language as tl

from .common import (LN2, LOG2E, NO_SPECIALIZE, dense_program, dropout_col_seeds, dropout_row_key, dropout_threshold,
                     dropout_tile_keep, exp2_one_rounding, find_sequence, head_rows_desc, kv_tile_ranges, dot_apart,
                     qk_dot, scores_log2, tile_load, tile_store)


@triton.jit
def _fwd_tile(acc, l_i, m_i, q, k_desc, v_desc, b, hk, start_n, offs_m, seqlen_k, diag,
              qk_scale, softcap_scale, softcap_out, slope_log2, window_left, window_right,
              rk, cs_in, cs_group, cs_mult, threshold,
              BLOCK_N: tl.constexpr, MASKED: tl.constexpr,
              HAS_LEFT: tl.constexpr, HAS_RIGHT: tl.constexpr, HAS_ALIBI: tl.constexpr,
              HAS_SOFTCAP: tl.constexpr, HAS_DROPOUT: tl.constexpr, DOT_PRECISION: tl.constexpr,
              BLOCK_D: tl.constexpr, HOST_DESC: tl.constexpr, QK_LEVELS: tl.constexpr = 0):
    offs_n = start_n + tl.arange(0, BLOCK_N)
    k = tile_load(k_desc, b, hk, start_n, BLOCK_N, BLOCK_D, HOST_DESC)  # (BLOCK_N, BLOCK_D)
    qk = qk_dot(q, k, DOT_PRECISION, QK_LEVELS)                            # (BLOCK_M, BLOCK_N)
    if MASKED or HAS_ALIBI or HAS_SOFTCAP:
        s = scores_log2(qk, offs_m[:, None], offs_n[None, :], seqlen_k, diag, qk_scale,
                        softcap_scale, softcap_out, slope_log2, window_left, window_right,
                        MASKED, HAS_LEFT, HAS_RIGHT, HAS_ALIBI, HAS_SOFTCAP, DOT_PRECISION)
        m_new = tl.maximum(m_i, tl.max(s, 1))
        # A row with nothing visible yet has m_new = -inf; shift it by 0 instead so
        # that exp2(-inf - -inf) never makes a NaN. m_i itself stays the true max.
        m_use = tl.where(m_new == float("-inf"), 0.0, m_new)
        if QK_LEVELS > 0 and not HAS_ALIBI and not HAS_SOFTCAP:   # one-row fp32: one rounding
            p = exp2_one_rounding(qk, s, m_use[:, None], qk_scale)
        else:
            p = tl.exp2(s - m_use[:, None])                         # (BLOCK_M, BLOCK_N)
    else:
        # Plain tile: the row max of the raw dots, scaled once per row (exact: scaling by
        # a positive number keeps the order), so the scale folds into the exp2 argument
        # as one FMA per score instead of a multiply and a subtract. A negative
        # softmax_scale reverses the order: then the row min is the max (a uniform
        # branch on a scalar, taken once per tile).
        if qk_scale >= 0:
            m_tile = tl.max(qk, 1) * qk_scale
        else:
            m_tile = tl.min(qk, 1) * qk_scale
        m_new = tl.maximum(m_i, m_tile)
        m_use = m_new
        if QK_LEVELS > 0:   # the FMA written out (what the compiler makes of the line below)
            p = exp2_one_rounding(qk, qk, m_use[:, None], qk_scale)
        else:
            p = tl.exp2(qk * qk_scale - m_use[:, None])             # (BLOCK_M, BLOCK_N)
    alpha = tl.exp2(m_i - m_use)                                    # rescale of the old state
    l_i = l_i * alpha + tl.sum(p, 1)                                # the sum ignores dropout
    if HAS_DROPOUT:
        # Column keys hashed in the kernel, not loaded from a key table as in the
        # backward: on the H200 (2026-11-29, B=2 H=16 N=4096 D=128, p = 0.1) the table
        # made the forward 1.36-1.40x the time without dropout, a hash per column and
        # tile 1.28x (bench/NOTES.md, Session 4); now a group key per tile (session 10). The
        # in-group keys are hashed per tile: once per program took 120 bytes of spill and
        # measured no faster (H200, 2026-11-29: 0.418 against 0.421 ms, s10_dropout.py).
        p = p * dropout_tile_keep(rk, 0, cs_in, cs_group, cs_mult, start_n, threshold, BLOCK_N, False)
    v = tile_load(v_desc, b, hk, start_n, BLOCK_N, BLOCK_D, HOST_DESC)  # (BLOCK_N, BLOCK_D)
    if QK_LEVELS > 0:
        # one-row fp32: the tile's P V summed apart from the accumulator (common.dot_apart)
        acc = acc * alpha[:, None] + dot_apart(p.to(v.dtype), v, qk_scale, DOT_PRECISION)
    else:
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=DOT_PRECISION)
    return acc, l_i, m_new


@triton.jit(do_not_specialize=NO_SPECIALIZE)
def attn_fwd_kernel(
    Q, K, V, O, LSE,                 # q (B, Nq, H, D), k/v (B, Nk, Hk, D), o like q, lse (B, H, Nq) fp32
    CU_Q, CU_K, CU_BLOCKS,           # varlen only: (B+1,) int32 offsets, and cumulative query-block counts
    ORDER,                           # varlen with USE_ORDER: (programs,) int32, dispatch slot -> program
    ALIBI, RNG,                      # (B, H) or (H,) fp32 slopes; int64 [seed, offset]
    Q_DESC, K_DESC, V_DESC, O_DESC,  # HOST_DESC: host-made descriptors of q, k, v, o as (B, N, H, D)
    stride_qb, stride_qn, stride_qh,
    stride_kb, stride_kn, stride_kh,
    stride_vb, stride_vn, stride_vh,
    stride_ob, stride_on, stride_oh,
    stride_lb, stride_lh,
    stride_ab, stride_ah,
    nheads, group, batch, seqlen_q, seqlen_k,
    qk_scale, softcap_scale, softcap_out, window_left, window_right, dropout_p,
    rng_rows, rng_stride,            # dropout counter layout: rows per head, counters per row
    n_bucket,                        # bucketed sequence length: an autotuning key only
    HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    IS_VARLEN: tl.constexpr, HAS_LEFT: tl.constexpr, HAS_RIGHT: tl.constexpr,
    HAS_ALIBI: tl.constexpr, HAS_SOFTCAP: tl.constexpr, HAS_DROPOUT: tl.constexpr,
    DOT_PRECISION: tl.constexpr, USE_ORDER: tl.constexpr = False, HOST_DESC: tl.constexpr = False,
    ROWS_FIRST: tl.constexpr = False, QK_LEVELS: tl.constexpr = 0, LSE_LOG2: tl.constexpr = False,
):
    if IS_VARLEN:
        if ROWS_FIRST:
            # one linear grid, a head's block slots consecutive (launchers/forward.FWD_ROWS_FIRST)
            n_slots = tl.num_programs(0) // nheads
            h = tl.program_id(0) // n_slots
            pid = tl.program_id(0) % n_slots
        else:
            h = tl.program_id(0)
            pid = tl.program_id(1)
        if USE_ORDER:
            # Blocks are dispatched in slot order; ORDER puts the programs with the most
            # key tiles first across all sequences (launchers/common._heaviest_first).
            pid = tl.load(ORDER + pid)
        if pid >= tl.load(CU_BLOCKS + batch):
            return  # the grid is an upper bound of at most `batch` spare programs
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
        # Causal-like masks: the last query block has the most key tiles. Block ids are
        # dispatched in order, so hand out the heaviest blocks first.
        block = n_blocks - 1 - block
    start_m = block * BLOCK_M
    hk = h // group
    diag = seqlen_k - seqlen_q

    q_desc = head_rows_desc(Q_DESC, Q, b, q_start, h, stride_qb, stride_qn, stride_qh, seqlen_q,
                            HEAD_DIM, BLOCK_M, BLOCK_D, HOST_DESC)
    # max(.., 1): a zero-length key sequence makes no loads, but its descriptor must be valid
    k_desc = head_rows_desc(K_DESC, K, b, k_start, hk, stride_kb, stride_kn, stride_kh, tl.maximum(seqlen_k, 1),
                            HEAD_DIM, BLOCK_N, BLOCK_D, HOST_DESC)
    v_desc = head_rows_desc(V_DESC, V, b, k_start, hk, stride_vb, stride_vn, stride_vh, tl.maximum(seqlen_k, 1),
                            HEAD_DIM, BLOCK_N, BLOCK_D, HOST_DESC)

    offs_m = start_m + tl.arange(0, BLOCK_M)
    q = tile_load(q_desc, b, h, start_m, BLOCK_M, BLOCK_D, HOST_DESC)  # (BLOCK_M, BLOCK_D)
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)

    slope_log2 = 0.0
    if HAS_ALIBI:
        slope_log2 = tl.load(ALIBI + b * stride_ab + h * stride_ah) * LOG2E
    rk = 0
    threshold = 0
    cs_in = 0
    cs_group = 0
    cs_mult = 0
    if HAS_DROPOUT:
        # this program's row keys, hashed once; per tile the in-group keys and one group
        # key and multiplier (kernels.common.dropout_tile_keep)
        threshold = dropout_threshold(dropout_p)
        seed = tl.load(RNG)
        cs_in, cs_group, cs_mult = dropout_col_seeds(seed)
        row_global = b * seqlen_q + offs_m
        if IS_VARLEN:
            row_global = q_start + offs_m
        rng_offset = tl.load(RNG + 1) + h.to(tl.int64) * rng_rows * rng_stride
        rk = dropout_row_key(seed, rng_offset + row_global.to(tl.int64) * rng_stride)  # (BLOCK_M,)

    lo, full_lo, full_hi, hi = kv_tile_ranges(start_m, seqlen_q, seqlen_k, diag, window_left, window_right,
                                              BLOCK_M, BLOCK_N, HAS_LEFT, HAS_RIGHT)
    # Tiles cut by the left edge of a sliding window: masked.
    for start_n in range(lo, full_lo, BLOCK_N):
        acc, l_i, m_i = _fwd_tile(acc, l_i, m_i, q, k_desc, v_desc, b, hk, start_n, offs_m, seqlen_k, diag,
                                  qk_scale, softcap_scale, softcap_out, slope_log2, window_left, window_right,
                                  rk, cs_in, cs_group, cs_mult, threshold,
                                  BLOCK_N, True, HAS_LEFT, HAS_RIGHT, HAS_ALIBI, HAS_SOFTCAP, HAS_DROPOUT,
                                  DOT_PRECISION, BLOCK_D, HOST_DESC, QK_LEVELS)
    # Fully visible tiles: no mask at all.
    for start_n in range(full_lo, full_hi, BLOCK_N):
        acc, l_i, m_i = _fwd_tile(acc, l_i, m_i, q, k_desc, v_desc, b, hk, start_n, offs_m, seqlen_k, diag,
                                  qk_scale, softcap_scale, softcap_out, slope_log2, window_left, window_right,
                                  rk, cs_in, cs_group, cs_mult, threshold,
                                  BLOCK_N, False, HAS_LEFT, HAS_RIGHT, HAS_ALIBI, HAS_SOFTCAP, HAS_DROPOUT,
                                  DOT_PRECISION, BLOCK_D, HOST_DESC, QK_LEVELS)
    # Tiles on the diagonal (or the right window edge) and the ragged last tile: masked.
    for start_n in range(full_hi, hi, BLOCK_N):
        acc, l_i, m_i = _fwd_tile(acc, l_i, m_i, q, k_desc, v_desc, b, hk, start_n, offs_m, seqlen_k, diag,
                                  qk_scale, softcap_scale, softcap_out, slope_log2, window_left, window_right,
                                  rk, cs_in, cs_group, cs_mult, threshold,
                                  BLOCK_N, True, HAS_LEFT, HAS_RIGHT, HAS_ALIBI, HAS_SOFTCAP, HAS_DROPOUT,
                                  DOT_PRECISION, BLOCK_D, HOST_DESC, QK_LEVELS)

    # The one normalisation. A row that saw no key has l_i = 0 and acc = 0: it outputs
    # 0 and gets lse = +inf, so that the backward pass recomputes p = 0 for it.
    empty = l_i == 0.0
    l_safe = tl.where(empty, 1.0, l_i)
    if LSE_LOG2:
        # (launchers/backward.py's one-row fp32 recompute: lse in log2 units, one rounding)
        lse = tl.where(empty, float("inf"), m_i + tl.log2(l_safe))
    else:
        lse = tl.where(empty, float("inf"), (m_i + tl.log2(l_safe)) * LN2)
    if HAS_DROPOUT:
        l_safe = l_safe * (1.0 - dropout_p)  # kept values are scaled by 1 / (1 - p)
    out = acc / l_safe[:, None]

    o_desc = head_rows_desc(O_DESC, O, b, q_start, h, stride_ob, stride_on, stride_oh, seqlen_q,
                            HEAD_DIM, BLOCK_M, BLOCK_D, HOST_DESC)
    tile_store(o_desc, b, h, start_m, out.to(O.dtype.element_ty), BLOCK_M, BLOCK_D, HOST_DESC)
    lse_ptrs = LSE + b * stride_lb + h * stride_lh + q_start + offs_m
    tl.store(lse_ptrs, lse, mask=offs_m < seqlen_q)
