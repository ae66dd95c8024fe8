"""Triton helpers shared by the forward and backward prefill kernels.

Conventions: scores live in log2 units (s2 = s * log2(e)), so every exponential is
an exp2 with the softmax scale and log2(e) folded into one multiplier. `diag` is
Nk - Nq: query i and key j sit on the (bottom-right aligned) diagonal when
j == i + diag.
"""
import triton
import triton.language as tl

LOG2E = tl.constexpr(1.4426950408889634)
LN2 = tl.constexpr(0.6931471805599453)


@triton.jit
def _column_halves(x):
    """(R, C) -> its columns [0, C / 2) and [C / 2, C), as two (R, C / 2) tensors."""
    R: tl.constexpr = x.shape[0]
    C: tl.constexpr = x.shape[1]
    return tl.split(tl.permute(tl.reshape(x, (R, 2, C // 2)), (0, 2, 1)))


@triton.jit
def _qk_l1(a, b, DOT_PRECISION: tl.constexpr):
    a0, a1 = _column_halves(a)
    b0, b1 = _column_halves(b)
    return (tl.dot(a0, tl.trans(b0), input_precision=DOT_PRECISION)
            + tl.dot(a1, tl.trans(b1), input_precision=DOT_PRECISION))


@triton.jit
def _qk_l2(a, b, DOT_PRECISION: tl.constexpr):
    a0, a1 = _column_halves(a)
    b0, b1 = _column_halves(b)
    return _qk_l1(a0, b0, DOT_PRECISION) + _qk_l1(a1, b1, DOT_PRECISION)


@triton.jit
def _qk_l3(a, b, DOT_PRECISION: tl.constexpr):
    a0, a1 = _column_halves(a)
    b0, b1 = _column_halves(b)
    return _qk_l2(a0, b0, DOT_PRECISION) + _qk_l2(a1, b1, DOT_PRECISION)


@triton.jit
def _qk_l4(a, b, DOT_PRECISION: tl.constexpr):
    a0, a1 = _column_halves(a)
    b0, b1 = _column_halves(b)
    return _qk_l3(a0, b0, DOT_PRECISION) + _qk_l3(a1, b1, DOT_PRECISION)


@triton.jit
def qk_dot(a, b, DOT_PRECISION: tl.constexpr, QK_LEVELS: tl.constexpr = 0):
    """a (R, BLOCK_D) . b (C, BLOCK_D)^T -> (R, C) fp32: the raw scores.

    QK_LEVELS = L > 0 (launchers.common.qk_levels: true-fp32 calls with one query row)
    sums the head dim in 2^L slices of BLOCK_D / 2^L columns, added as a tree. Triton's
    ieee dot is one FMA chain over BLOCK_D per score, whose rounding grows with D, while
    cuBLAS's one-row fp32 product (the tests' baseline there) sums in parts: the fp32
    decode read 1.0-7x its error at sharp scales, 11 of 72 probe cells over the 2x
    criterion, and 0 of 72 with the slices (session 58, H200,
    bench/gpu/s56_kvcache_fp32_probe.py). Triton's combine pass fuses each pair of
    leaves (`dot(a0, b0) + dot(a1, b1)` becomes one dot continuing the other's chain;
    Triton 3.6.0, seen in the TTIR 2026-12-05), so the chains are 2 x BLOCK_D / 2^L
    columns long: 32 at L = log2(BLOCK_D / 16). kernels/decode.py and, since session 59,
    kernels/fwd.py / bwd.py take it (the one-row forward also sums P V apart from the
    accumulator: dot_apart). L = 0 is the one dot.
    """
    if QK_LEVELS == 1:
        return _qk_l1(a, b, DOT_PRECISION)
    elif QK_LEVELS == 2:
        return _qk_l2(a, b, DOT_PRECISION)
    elif QK_LEVELS == 3:
        return _qk_l3(a, b, DOT_PRECISION)
    elif QK_LEVELS == 4:
        return _qk_l4(a, b, DOT_PRECISION)
    else:
        return tl.dot(a, tl.trans(b), input_precision=DOT_PRECISION)


@triton.jit
def dot_apart(a, b, x, DOT_PRECISION: tl.constexpr):
    """a (R, K) . b (K, C) -> (R, C) fp32, one FMA chain over K from zero that the caller then
    adds to its accumulator: the one-row fp32 paths' P V (kernels/fwd.py) and dS K
    (kernels/bwd.py's dQ) at QK_LEVELS > 0. x: any finite runtime fp32 scalar.

    Why not `acc + tl.dot(a, b)`: Triton's combine pass rewrites an add of a dot whose
    accumulator is the constant zero into that dot's accumulator (Triton 3.6.0, seen in the
    TTIR 2026-12-05: `tl.dot(a0, b0) + tl.dot(a1, b1)` becomes `tt.dot a1, b1, (tt.dot a0,
    b0, 0)`), so P V was one FMA chain over every key of the row (113 in the tests),
    continued from the rescaled accumulator, where PyTorch's one-row product on the GPU sums
    in parts. A zero the compiler cannot prove (x * 0, a runtime value) keeps the dot from
    zero and its add an add (checked in the TTIR); the results are those of a chain over
    this tile alone, then one add.
    """
    zero = tl.full((a.shape[0], b.shape[1]), 0.0, tl.float32) + x * 0.0
    return tl.dot(a, b, zero, input_precision=DOT_PRECISION)


@triton.jit
def exp2_one_rounding(qk, s, shift, qk_scale):
    """exp2(S - shift) for the one-row fp32 paths (QK_LEVELS > 0 with neither ALiBi nor
    softcap, so that s = qk * qk_scale or -inf): the exponent as one fused multiply-add of
    the raw dot, fma(qk, qk_scale, -shift), rounded once, and 0 where s is -inf. shift
    broadcasts against s (a row max or lse2, (R, 1) or (1, C)). The plain s - shift carries
    s's own rounding at |s| ~ 15-20 (about 1e-6, the size of the whole error PyTorch's fp32
    softmax makes there; session 60's float32 emulation, bench/NOTES.md). The other paths
    keep tl.exp2(s - shift) inline: through a helper, ptxas allocated the same PTX
    differently (its inlining debug info; fp32 dK/dV SASS, sm_90a, 2026-12-05).
    """
    scale = tl.full(qk.shape, 0.0, tl.float32) + qk_scale        # tl.fma does not broadcast
    arg = tl.fma(qk, scale, -tl.broadcast_to(shift, qk.shape))
    return tl.where(s == float("-inf"), 0.0, tl.exp2(arg))


@triton.jit
def softcap_tanh(qk, softcap_scale):
    """tanh(qk * softmax_scale / softcap), written with exp2 so that it runs everywhere.

    softcap_scale = 2 * log2(e) * softmax_scale / softcap, and
    tanh(x) = 1 - 2 / (exp(2x) + 1): saturates cleanly to +-1 when exp2 overflows.
    """
    return 1.0 - 2.0 / (tl.exp2(qk * softcap_scale) + 1.0)


@triton.jit
def softcap_tanh_precise(qk, softcap_scale):
    """softcap_tanh with a small relative error near 0 too, for fp32 inputs.

    Near 0, 1 - 2 / (e + 1) cancels: its error is ~1 ulp of 1, not of tanh, and the
    softcap multiplies it back up (softcap 50: ~6e-6 on every score, many times
    PyTorch's fp32 error). There an odd Taylor polynomial, exact to ~1e-10 relative
    for |x| < 1/4, takes over.
    """
    x = qk * (softcap_scale * 0.34657359027997264)  # x = qk * softmax_scale / softcap (ln(2) / 2)
    x2 = x * x
    poly = x + x * x2 * (-0.3333333333333333 + x2 * (0.13333333333333333 + x2 * (
        -0.05396825396825397 + x2 * (0.021869488536155203 + x2 * -0.008863235529902197))))
    return tl.where(tl.abs(x) < 0.25, poly, softcap_tanh(qk, softcap_scale))


@triton.jit
def alibi_anchored_distance(p, k):
    """|max(p, 0) - k| in float32 (exact: positions < 2^24), p the keys the rows sit on and k the
    keys, broadcasting: the ALiBi distance from the rows' anchors (flashtriton/alibi_anchor.py).
    In float32 rather than integers: ptxas shares the integer |p - k| between a thread's elements
    on one diagonal, which the max breaks (scores_log2); the row's anchor converts once and each
    element costs one FADD."""
    return tl.abs(tl.maximum(p, 0).to(tl.float32) - k.to(tl.float32))


@triton.jit
def scores_log2(qk, q_idx, k_idx, seqlen_k, diag, qk_scale, softcap_scale, softcap_out,
                slope_log2, window_left, window_right,
                MASKED: tl.constexpr, HAS_LEFT: tl.constexpr, HAS_RIGHT: tl.constexpr,
                HAS_ALIBI: tl.constexpr, HAS_SOFTCAP: tl.constexpr, DOT_PRECISION: tl.constexpr):
    """Raw q.k dots -> scores in log2 units, -inf where key k_idx is not visible to q_idx.

    q_idx and k_idx are index tensors that broadcast against qk: (BM, 1) and (1, BN)
    in the forward layout, (1, BM) and (BN, 1) in the transposed backward layout.
    DOT_PRECISION "ieee" or "tf32x3" (fp32 inputs) also selects the precise softcap tanh.
    """
    if HAS_SOFTCAP:
        # softcap * tanh(s / softcap), times log2(e): softcap_out = softcap * log2(e)
        if DOT_PRECISION != "tf32":
            s = softcap_tanh_precise(qk, softcap_scale) * softcap_out
        else:
            s = softcap_tanh(qk, softcap_scale) * softcap_out
    else:
        s = qk * qk_scale
    if HAS_ALIBI:
        # bias = -slope * |a - j| in log2 units. HAS_ALIBI == 2 (the launcher: a row may sit before
        # every key and see one) anchors it at a = max(i + diag, 0): such a row differs from
        # flash-attn's -slope * |i + diag - j| by a constant, which softmax ignores but a float32 lse
        # would be rounded at (flashtriton/alibi_anchor.py). Otherwise a = i + diag is that anchor.
        # Two forms, because ptxas shares the integer |i + diag - j| between a thread's elements on
        # one diagonal (equal i - j), which the max breaks: the integer form with the max cost ~10%
        # more instructions and 6-7% of an ALiBi forward (H100, session 67). The anchored one takes
        # the distance in float32 instead (exact: positions < 2^24), level with the plain form
        # (bench/gpu/s67_alibi_anchor_sass.py).
        if HAS_ALIBI == 2:
            dist = alibi_anchored_distance(q_idx + diag, k_idx)
        else:
            dist = tl.abs(q_idx + diag - k_idx).to(tl.float32)
        s = s - slope_log2 * dist
    if MASKED:
        visible = k_idx < seqlen_k
        if HAS_RIGHT:
            visible = visible & (k_idx <= q_idx + diag + window_right)
        if HAS_LEFT:
            visible = visible & (k_idx >= q_idx + diag - window_left)
        s = tl.where(visible, s, float("-inf"))
    return s


@triton.jit
def ws_hidden_score(NEG_SCALE: tl.constexpr):
    """The raw score a hidden key gets in the warp-specialized forwards: the value that
    scales to -inf (+inf before a negative scale)."""
    if NEG_SCALE:
        return float("inf")
    else:
        return float("-inf")


@triton.jit
def ws_softmax_step(qk, m_i, l_i, qk_scale, NEG_SCALE: tl.constexpr, MAY_HIDE_ROW: tl.constexpr = False):
    """One online-softmax step of the warp-specialized forwards on raw scores qk (BLOCK_M,
    BLOCK_N): returns (p, alpha, m_new, l_new), p unnormalised in exp2 units. The row max
    of the raw dots, scaled once per row, is the max of the scaled ones (with a negative
    scale, the min), so the scale folds into exp2's FMA. Every row must see a key in the
    first tile it runs (m_new finite from there on), unless MAY_HIDE_ROW: then a row
    whose keys are all hidden so far keeps m = -inf but exponentiates against 0 (p = 0,
    alpha = 0, no NaN)."""
    if NEG_SCALE:
        m_new = tl.maximum(m_i, tl.min(qk, 1) * qk_scale)
    else:
        m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
    m_ref = m_new
    if MAY_HIDE_ROW:
        m_ref = tl.where(m_new == float("-inf"), 0.0, m_new)
    p = tl.exp2(qk * qk_scale - m_ref[:, None])                         # (BLOCK_M, BLOCK_N)
    alpha = tl.exp2(m_i - m_ref)
    return p, alpha, m_new, l_i * alpha + tl.sum(p, 1)


@triton.jit
def kv_tile_ranges(start_m, seqlen_q, seqlen_k, diag, window_left, window_right,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                   HAS_LEFT: tl.constexpr, HAS_RIGHT: tl.constexpr):
    """Key tiles for query rows [start_m, start_m + BLOCK_M), as four BLOCK_N-aligned offsets.

    [a, b) and [c, d) straddle a mask edge and need the per-element mask; [b, c) is
    fully visible and runs unmasked. Tiles outside [a, d) are never loaded: with a
    causal mask this skips everything above the diagonal.
    """
    lo = 0
    hi = seqlen_k
    if HAS_RIGHT:
        # the last row of the block sees up to key (start_m + BLOCK_M - 1) + diag + right
        hi = tl.minimum(hi, start_m + BLOCK_M + diag + window_right)
    if HAS_LEFT:
        lo = tl.maximum(lo, start_m + diag - window_left)
    lo = (lo // BLOCK_N) * BLOCK_N
    hi = tl.maximum(hi, lo)
    # Fully visible tiles: every row of the block sees every key of the tile.
    full_lo = lo
    if HAS_LEFT:
        # the first key the last row sees
        first = tl.maximum(start_m + BLOCK_M - 1 + diag - window_left, 0)
        full_lo = tl.maximum(lo, ((first + BLOCK_N - 1) // BLOCK_N) * BLOCK_N)
    full_hi = (seqlen_k // BLOCK_N) * BLOCK_N
    if HAS_RIGHT:
        # one past the last key the first row sees
        # (operands of // are kept >= 0: the GPU truncates, the interpreter floors)
        full_hi = tl.minimum(full_hi, (tl.maximum(start_m + diag + window_right + 1, 0) // BLOCK_N) * BLOCK_N)
    b = tl.minimum(tl.maximum(full_lo, lo), hi)
    c = tl.minimum(tl.maximum(full_hi, b), hi)
    return lo, b, c, hi


@triton.jit
def q_tile_ranges(start_n, seqlen_q, seqlen_k, diag, window_left, window_right,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  HAS_LEFT: tl.constexpr, HAS_RIGHT: tl.constexpr):
    """Query tiles that see keys [start_n, start_n + BLOCK_N): the transpose of kv_tile_ranges.

    Row i sees key j when j - diag - right <= i <= j - diag + left. Rows past seqlen_q
    and keys past seqlen_k need no mask here: their lse is +inf (p = 0) and their
    key rows are zero-filled and never stored.
    """
    lo = 0
    hi = seqlen_q
    if HAS_RIGHT:
        lo = tl.maximum(lo, start_n - diag - window_right)
    if HAS_LEFT:
        hi = tl.minimum(hi, start_n + BLOCK_N - 1 - diag + window_left + 1)
    lo = (lo // BLOCK_M) * BLOCK_M
    hi = tl.maximum(hi, lo)
    full_lo = lo
    if HAS_RIGHT:
        # the first row that sees the last key of the tile
        first = tl.maximum(start_n + BLOCK_N - 1 - diag - window_right, 0)
        full_lo = tl.maximum(lo, ((first + BLOCK_M - 1) // BLOCK_M) * BLOCK_M)
    full_hi = ((seqlen_q + BLOCK_M - 1) // BLOCK_M) * BLOCK_M
    if HAS_LEFT:
        # one past the last row that sees the first key of the tile
        full_hi = tl.minimum(full_hi, (tl.maximum(start_n - diag + window_left + 1, 0) // BLOCK_M) * BLOCK_M)
    b = tl.minimum(tl.maximum(full_lo, lo), hi)
    c = tl.minimum(tl.maximum(full_hi, b), hi)
    return lo, b, c, hi


@triton.jit
def find_sequence(CU_BLOCKS, pid, batch):
    """Varlen program map: the sequence s with CU_BLOCKS[s] <= pid < CU_BLOCKS[s + 1].

    CU_BLOCKS (batch + 1,) holds the cumulative count of row blocks per sequence; a
    binary search keeps the grid tight (no program per padding block).
    """
    lo = 0
    hi = batch - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if tl.load(CU_BLOCKS + mid) <= pid:
            lo = mid
        else:
            hi = mid - 1
    return lo


@triton.jit
def dense_program(seqlen, BLOCK: tl.constexpr, ROWS_FIRST: tl.constexpr):
    """(batch x head index, block, blocks a head) of a dense (not varlen) program.

    ROWS_FIRST: one linear grid with the blocks of a (batch, head) consecutive, so the
    programs in flight share a few heads' other-side operand in L2 instead of touching
    one per program (launchers/forward.FWD_ROWS_FIRST, launchers/backward.BWD_ROWS_FIRST);
    else a (B * H, blocks) grid.
    """
    if ROWS_FIRST:
        n_blocks = tl.cdiv(seqlen, BLOCK)
        pid_bh = tl.program_id(0) // n_blocks
        block = tl.program_id(0) % n_blocks
    else:
        pid_bh = tl.program_id(0)
        block = tl.program_id(1)
        n_blocks = tl.num_programs(1)
    return pid_bh, block, n_blocks


@triton.jit
def bulk_key_tiles(start_m, seqlen_q, seqlen_k, window_left, window_right,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HAS_LEFT: tl.constexpr, HAS_RIGHT: tl.constexpr):
    """[n_lo, n_hi): the key tiles of the warp-specialized dQ bulk (bwd_ws.py, PARTIAL)
    for query rows [start_m, start_m + BLOCK_M) - exactly kv_tile_ranges' fully visible
    [b, c) (empty when n_hi <= n_lo); bwd.py's resuming dQ kernel skips that range."""
    diag = seqlen_k - seqlen_q
    n_lo = 0
    if HAS_LEFT:
        lo = (tl.maximum(start_m + diag - window_left, 0) // BLOCK_N) * BLOCK_N
        first = tl.maximum(start_m + BLOCK_M - 1 + diag - window_left, 0)
        n_lo = tl.maximum(lo, ((first + BLOCK_N - 1) // BLOCK_N) * BLOCK_N)
    n_hi = (seqlen_k // BLOCK_N) * BLOCK_N
    if HAS_RIGHT:
        n_hi = tl.minimum(n_hi, (tl.maximum(start_m + diag + window_right + 1, 0) // BLOCK_N) * BLOCK_N)
    return n_lo, n_hi


@triton.jit
def bulk_query_tiles(start_n, seqlen_q, seqlen_k, window_left, window_right,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HAS_LEFT: tl.constexpr, HAS_RIGHT: tl.constexpr):
    """[m_lo, m_hi): the query tiles of the warp-specialized dK/dV bulk for keys
    [start_n, start_n + BLOCK_N) - q_tile_ranges' fully visible tiles, cut at the last
    whole tile of the sequence (the bulk reads lse through a descriptor: rows past
    seqlen_q would read the next head's). bwd.py's RESUME skips exactly these."""
    diag = seqlen_k - seqlen_q
    m_lo = 0
    if HAS_RIGHT:
        lo = (tl.maximum(start_n - diag - window_right, 0) // BLOCK_M) * BLOCK_M
        first = tl.maximum(start_n + BLOCK_N - 1 - diag - window_right, 0)
        m_lo = tl.maximum(lo, ((first + BLOCK_M - 1) // BLOCK_M) * BLOCK_M)
    m_hi = (seqlen_q // BLOCK_M) * BLOCK_M
    if HAS_LEFT:
        m_hi = tl.minimum(m_hi, (tl.maximum(start_n - diag + window_left + 1, 0) // BLOCK_M) * BLOCK_M)
    m_hi = tl.maximum(m_hi, m_lo)
    return m_lo, m_hi


@triton.jit
def head_rows_desc(HOST, X, b, row0, h, stride_b, stride_n, stride_h, n_rows,
                   HEAD_DIM: tl.constexpr, ROWS: tl.constexpr, BLOCK_D: tl.constexpr, HOST_DESC: tl.constexpr):
    """The descriptor a program reads (or writes) its rows of batch b, head h through:
    HOST (made on the host over the whole (B, N, H, D) tensor) with HOST_DESC, else one
    made here over this program's (n_rows, HEAD_DIM) slice starting at row0 (rows past
    n_rows read as 0 and are never written)."""
    if HOST_DESC:
        return HOST
    else:
        return tl.make_tensor_descriptor(X + b * stride_b + row0 * stride_n + h * stride_h,
                                         shape=[n_rows, HEAD_DIM], strides=[stride_n, 1],
                                         block_shape=[ROWS, BLOCK_D])


@triton.jit
def head_slice_desc(X, b, h, stride_b, stride_h, stride_n, n_rows,
                    HEAD_DIM: tl.constexpr, ROWS: tl.constexpr, BLOCK_D: tl.constexpr):
    """A descriptor over batch b, head h's (n_rows, HEAD_DIM) slice of a (B, N, H, D)
    tensor, as a warp-specialized kernel's one-tile program makes it: rows past n_rows read
    as 0 and are never written."""
    return tl.make_tensor_descriptor(X + b.to(tl.int64) * stride_b + h * stride_h, shape=[n_rows, HEAD_DIM],
                                     strides=[stride_n, 1], block_shape=[ROWS, BLOCK_D])


@triton.jit
def row_view_desc(X, n_rows, n_cols, stride_n, ROWS: tl.constexpr, BLOCK_D: tl.constexpr):
    """A descriptor over X read as one (n_rows, n_cols) matrix of rows stride_n apart: the
    persistent kernels' views over every (batch, head), made once before their tile loop."""
    return tl.make_tensor_descriptor(X, shape=[n_rows, n_cols], strides=[stride_n, 1], block_shape=[ROWS, BLOCK_D])


@triton.jit
def vec_desc(X, n, BLOCK: tl.constexpr):
    """A 1-D descriptor over n elements of X (lse, delta, the dropout key table, iota)."""
    return tl.make_tensor_descriptor(X, shape=[n], strides=[1], block_shape=[BLOCK])


@triton.jit
def seq_rows_desc(X, row0, col0, stride_n, n_rows, HEAD_DIM: tl.constexpr, ROWS: tl.constexpr, BLOCK_D: tl.constexpr):
    """A descriptor over n_rows rows of X from row row0 (HEAD_DIM columns from column
    offset col0, e.g. a head's): rows past n_rows read as 0 and are never written. The
    shape is max(n_rows, 1), since a descriptor's must be positive (an empty sequence
    makes no loads; stores past its end are dropped)."""
    return tl.make_tensor_descriptor(X + row0.to(tl.int64) * stride_n + col0, shape=[tl.maximum(n_rows, 1), HEAD_DIM],
                                     strides=[stride_n, 1], block_shape=[ROWS, BLOCK_D])


@triton.jit
def varlen_slot(SLOTS, CU_Q, CU_K, slot):
    """A varlen warp-specialized program's place: (sequence, first row of its block, the
    sequence's first query and key rows, its query and key counts), from the launcher's
    slot table (n_slots, 2) int32 and the (B + 1,) cu_seqlens."""
    b = tl.load(SLOTS + 2 * slot)
    start = tl.load(SLOTS + 2 * slot + 1)
    q_start = tl.load(CU_Q + b)
    k_start = tl.load(CU_K + b)
    return b, start, q_start, k_start, tl.load(CU_Q + b + 1) - q_start, tl.load(CU_K + b + 1) - k_start


@triton.jit
def tile_load(desc, b, h, start, ROWS: tl.constexpr, COLS: tl.constexpr, HOST_DESC: tl.constexpr):
    """A (ROWS, COLS) tile of rows [start, start + ROWS) of batch b, head h.

    HOST_DESC: desc was made on the host over the whole (B, N, H, D) tensor (a kernel
    parameter; box [1, ROWS, 1, COLS], rows past N read as 0). Otherwise desc is this
    program's (N, D) slice, made in the kernel: each such descriptor costs the program
    13 tensormap.replace, a 128-byte global write and a proxy fence (PTX, sm_90a)."""
    if HOST_DESC:
        return desc.load([b, start, h, 0]).reshape(ROWS, COLS)
    else:
        return desc.load([start, 0])


@triton.jit
def tile_store(desc, b, h, start, x, ROWS: tl.constexpr, COLS: tl.constexpr, HOST_DESC: tl.constexpr):
    """Stores x (ROWS, COLS) at rows [start, start + ROWS) of batch b, head h (rows past
    the sequence are not written); desc as in tile_load."""
    if HOST_DESC:
        desc.store([b, start, h, 0], x.reshape(1, ROWS, 1, COLS))
    else:
        desc.store([start, 0], x)


@triton.jit
def _fmix32(x):
    """murmur3's 32-bit finaliser: a bijection of uint32 with full avalanche."""
    x = x ^ (x >> 16)
    x = x * 0x85EBCA6B
    x = x ^ (x >> 13)
    x = x * 0xC2B2AE35
    return x ^ (x >> 16)


@triton.jit
def dropout_row_key(seed, row_id):
    """rk: the hash of the seed and a row's counter (int64, rng_offset + row * rng_stride)."""
    s64 = seed.to(tl.int64)
    s_lo = (s64 & 0xFFFFFFFF).to(tl.uint32)
    s_hi = ((s64 >> 32) & 0xFFFFFFFF).to(tl.uint32)
    r_lo = (row_id & 0xFFFFFFFF).to(tl.uint32)
    r_hi = ((row_id >> 32) & 0xFFFFFFFF).to(tl.uint32)
    return _fmix32(_fmix32(r_lo ^ s_lo) ^ r_hi ^ s_hi)


# The mask of element (i, j) with j = t * G + c (G = DROPOUT_GROUP, 0 <= c < G): keep
# iff the top 23 bits of x = ((rk_i ^ tk_t ^ cb_c) * mk_t) mod 2^32 reach those of p * 2^32,
# rk a row key, cb an in-group column key, tk a group key and mk an odd group
# multiplier, each a full-avalanche hash of its index and its own word of the seed.
# ck_j = tk_t ^ cb_c is the column key the backward's table holds. A kernel whose key
# tile lies in one group hashes the G in-group keys once per program, and per tile only
# tk and mk (scalars): two xors a row instead of a hash per column (before session 10
# the 32 column hashes a thread did per 128-key tile, ~9 integer ops each, cost more
# than the per-element test; bench/NOTES.md, "Session 10"). Why a multiplier per group
# and not one constant: with the constant, the keys of columns j, j + 1, j + G, j + G + 1
# of a row XOR to zero for every row, and the joint-keep and parity statistics of those
# four bits read up to 7 standard deviations off independence (0.5-8M quads at p = 0.5;
# the old per-column hash: 2-4, noise level); with mk per group: under 3
# (tests/test_dropout.py keeps a small version of that check).
DROPOUT_GROUP = tl.constexpr(128)


@triton.jit
def dropout_col_seeds(seed):
    """The seed's parts of the column keys (scalars, hashed once per program): in-group
    keys, group keys, group multipliers."""
    s_hi = ((seed.to(tl.int64) >> 32) & 0xFFFFFFFF).to(tl.uint32)
    return _fmix32(s_hi ^ 0x5BD1E995), _fmix32(s_hi ^ 0x27D4EB2F), _fmix32(s_hi ^ 0x1B873593)


@triton.jit
def dropout_in_group_key(cs_in, c):
    """cb: the key of in-group column c (0 <= c < DROPOUT_GROUP)."""
    return _fmix32(c.to(tl.uint32) ^ cs_in)


@triton.jit
def dropout_group_key(cs_group, col):
    """tk: the key of the group holding column col."""
    return _fmix32((tl.cast(col, tl.int32) // DROPOUT_GROUP).to(tl.uint32) ^ cs_group)


@triton.jit
def dropout_group_mult(cs_mult, col):
    """mk: the odd multiplier of the group holding column col."""
    return _fmix32((tl.cast(col, tl.int32) // DROPOUT_GROUP).to(tl.uint32) ^ cs_mult) | 1


@triton.jit
def dropout_col_key(seed, col):
    """ck = tk ^ cb of column col (its index within the sequence), from scratch."""
    cs_in, cs_group, cs_mult = dropout_col_seeds(seed)
    return dropout_in_group_key(cs_in, col % DROPOUT_GROUP) ^ dropout_group_key(cs_group, col)


@triton.jit
def dropout_col_mult(seed, col):
    """mk of column col, from scratch."""
    cs_in, cs_group, cs_mult = dropout_col_seeds(seed)
    return dropout_group_mult(cs_mult, col)


@triton.jit
def dropout_mult_seed(seed):
    """cs_mult alone: what the backward kernels need besides their key table."""
    cs_in, cs_group, cs_mult = dropout_col_seeds(seed)
    return cs_mult


@triton.jit
def dropout_tile_keep(rk, cb, cs_in, cs_group, cs_mult, start_n, threshold, BLOCK_N: tl.constexpr,
                      CB_ONCE: tl.constexpr):
    """The keep mask (rows, BLOCK_N) as 1.0 / 0.0 (dropout_keep_scale) of the key tile at
    start_n (a multiple of BLOCK_N, BLOCK_N <= DROPOUT_GROUP: the tile lies in one group)
    for row keys rk (rows,); the tile's tk folds into the rows, its mk is one scalar.
    CB_ONCE (a tile is a whole group): cb holds the group's in-group keys, hashed once per
    program (dropout_in_group_key over tl.arange(0, BLOCK_N)); otherwise cb is unused and
    the tile's in-group keys are hashed here (fewer live registers)."""
    tl.static_assert(BLOCK_N <= DROPOUT_GROUP, "dropout_tile_keep: a key tile must lie in one column group")
    start_n = tl.cast(start_n, tl.int32)    # (the interpreter's loop counters are Python ints)
    rk_t = rk ^ dropout_group_key(cs_group, start_n)                # (rows,)
    if CB_ONCE:
        tl.static_assert(BLOCK_N == DROPOUT_GROUP, "dropout_tile_keep: CB_ONCE needs tiles of one whole group")
        cb_t = cb
    else:
        cb_t = dropout_in_group_key(cs_in, start_n % DROPOUT_GROUP + tl.arange(0, BLOCK_N))
    return dropout_keep_scale(rk_t[:, None], cb_t[None, :], dropout_group_mult(cs_mult, start_n), threshold)


@triton.jit
def dropout_threshold(dropout_p):
    # p * 2^32, capped below 2^32 (the largest float32 under it) so the cast cannot wrap
    return tl.minimum(dropout_p * 4294967296.0, 4294967040.0).to(tl.uint32)


@triton.jit
def dropout_keep_keys(rk, ck, mk, threshold):
    """The keep decision: x = (rk ^ ck) * mk (uint32; mk odd, one per column group), keep
    iff its top 23 bits reach threshold's: (x >> 9) >= (threshold >> 9)."""
    return (((rk ^ ck) * mk) >> 9) >= (threshold >> 9)


@triton.jit
def dropout_keep_scale(rk, ck, mk, threshold):
    """dropout_keep_keys as a float, 1.0 (keep) or 0.0, with no boolean in between: the
    top 23 bits of x become the mantissa of u = 1 + (x >> 9) 2^-23, and
    u 2^23 - (2^23 + (threshold >> 9) - 1) = (x >> 9) - (threshold >> 9) + 1 is exact (an
    integer under 2^24), >= 1 when kept and <= 0 when not, so clamping it to [0, 1] (one
    FFMA.SAT) is the mask. Why: a boolean mask of 32+ elements a thread that is not used
    at once is packed into bit fields by LLVM and unpacked again (~5 integer ops an
    element, sm_90a SASS, Triton 3.6.0); this is LOP3, IMAD, LEA.HI and FFMA.SAT, then a
    multiply that the kernels fold into their own arithmetic (H200, session 10: the
    dropout forward 1.24x -> 1.14x the time without dropout)."""
    x = (rk ^ ck) * mk
    u = ((x >> 9) | 0x3F800000).to(tl.float32, bitcast=True)
    c = ((threshold >> 9) | 0x3F800000).to(tl.float32, bitcast=True) * 8388608.0 - 1.0
    return tl.minimum(tl.maximum(u * 8388608.0 - c, 0.0), 1.0)


@triton.jit
def dropout_keep(seed, rng_offset, row_global, col, rng_stride, dropout_p):
    """Counter-based keep mask of element (row, col), computed from scratch: the
    definition of the mask. The forward kernels hash the same keys themselves (rk and
    the in-group column keys once per program, a group key and multiplier per tile);
    the backward kernels load rk and ck from a table that kernels/dropout_keys.py
    fills once per call and hash mk per key tile. The S_dmask kernel
    (return_attn_probs) hashes here, so the tests that compare outputs and gradients
    against the returned mask also check the forward's hashes and the backward's table.

    A row key rk (hash of seed and the row's counter, rng_offset + row * rng_stride),
    a column key ck and an odd multiplier mk of the column's group (DROPOUT_GROUP); an
    element costs three integer ops and one float op in the kernels: x = (rk ^ ck) * mk,
    then keep iff its top 23 bits reach p's (dropout_keep_keys, dropout_keep_scale).
    Since x is a bijection of ck for a fixed row, and rk, ck are full-avalanche hashes,
    every element is uniform; tests/test_dropout.py checks rates, neighbours, 2 x 2
    blocks and in-row quads a group apart against independence.

    Why not Philox (tl.rand) per element: measured 2026-11-29 on the H200, ~80 integer
    ops per element made dropout cost 4.0x the time of a forward+backward without it
    (bench/NOTES.md, "Dropout")."""
    rk = dropout_row_key(seed, rng_offset + row_global.to(tl.int64) * rng_stride)   # per row
    ck = dropout_col_key(seed, col)                                                 # per column
    return dropout_keep_keys(rk, ck, dropout_col_mult(seed, col), dropout_threshold(dropout_p))


# Scalar arguments that vary from call to call: not specialised (Triton would otherwise
# compile a variant for each value that is 1 or a multiple of 16), so that a new
# batch size or sequence length reuses the compiled kernel.
NO_SPECIALIZE = ["batch", "seqlen_q", "seqlen_k", "window_left", "window_right", "rng_rows", "rng_stride", "n_bucket"]
