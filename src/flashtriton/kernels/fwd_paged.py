"""Variable-length prefill over a paged KV cache (flash_attn_varlen_func with block_table).

The queries are packed as in the varlen forward (kernels/fwd.py): q (total_q, H, D),
cu_seqlens_q. The keys and values stay where the cache keeps them: k_cache, v_cache
(num_blocks, PAGE_SIZE, Hk, D), and key position p of sequence b is row p % PAGE_SIZE of
page BLOCK_TABLE[b, p // PAGE_SIZE]; sequence b has cu_seqlens_k[b + 1] - cu_seqlens_k[b]
keys (cu_seqlens_k gives lengths only: it does not address k). Nothing is gathered or
copied: each key tile is read in place, one table lookup a tile when a page holds a whole
tile (PAGE_SIZE >= BLOCK_N; KV_TMA: by TMA through descriptors of the caches viewed as
(num_blocks * PAGE_SIZE, Hk * D) rows, as the decode kernel), page by page otherwise
(kernels/decode.py's page gather).

One program owns BLOCK_M query rows of one (sequence, head), as in kernels/fwd.py: the
grid is (heads, query blocks of all sequences), and CU_BLOCKS maps a program to its
(sequence, block) without a program per padding block. The key tiles, their masks and
the online softmax are the decode kernel's (_attend_cache_tile: exp2 with the scale
folded in, unnormalised accumulator, divide once at the end); masks align bottom-right
(query i sits on key i + Nk - Nq), and tiles outside the causal / window band are never
read.

    acc (BLOCK_M, BLOCK_D) fp32, m_i / l_i (BLOCK_M,) fp32 in log2 units;
    out = acc / l_i, lse = (m_i + log2 l_i) * ln 2 (+inf, and out 0, for a row that sees no key).
"""
import triton
import triton.language as tl

from .common import LN2, LOG2E, find_sequence, kv_tile_ranges
from .decode import _anchor_shift, _attend_cache_tile

NO_SPECIALIZE = ["batch", "window_left", "window_right"]


@triton.jit
def _paged_tiles(acc, l_i, m_i, q, offs_m, slope_log2, lo, hi,
                 K_CACHE, V_CACHE, K_DESC, V_DESC, bt_row, k_head, v_head, hk,
                 stride_kb, stride_kn, stride_vb, stride_vn,
                 seqlen_k, diag, qk_scale, softcap_scale, softcap_out, window_left, window_right, offs_d,
                 HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_N: tl.constexpr,
                 PAGE_SIZE: tl.constexpr, MASKED: tl.constexpr, HAS_LEFT: tl.constexpr,
                 HAS_RIGHT: tl.constexpr, HAS_ALIBI: tl.constexpr, HAS_SOFTCAP: tl.constexpr,
                 DOT_PRECISION: tl.constexpr, PAGE_GATHER: tl.constexpr, KV_TMA: tl.constexpr,
                 QK_LEVELS: tl.constexpr):
    for start_n in range(lo, hi, BLOCK_N):
        acc, l_i, m_i = _attend_cache_tile(
            acc, l_i, m_i, q, offs_m, slope_log2, start_n,
            K_CACHE, V_CACHE, K_DESC, V_DESC, bt_row, 0, k_head, v_head, hk, PAGE_SIZE,
            stride_kb, stride_kn, stride_vb, stride_vn,
            0, seqlen_k, diag, qk_scale, softcap_scale, softcap_out, window_left, window_right, offs_d,
            HEAD_DIM, BLOCK_D, BLOCK_N, PAGE_SIZE, MASKED, HAS_LEFT, HAS_RIGHT, HAS_ALIBI, HAS_SOFTCAP,
            KV_TMA, DOT_PRECISION, PAGE_GATHER, QK_LEVELS)
    return acc, l_i, m_i


@triton.jit(do_not_specialize=NO_SPECIALIZE)
def attn_fwd_paged_kernel(
    Q, K_CACHE, V_CACHE, O, LSE,     # q, o (total_q, H, D); caches (num_blocks, PAGE_SIZE, Hk, D); lse (H, total_q)
    CU_Q, CU_K, CU_BLOCKS,           # (B + 1,) int32: query offsets, key lengths (cumulative), query-block counts
    BLOCK_TABLE, ALIBI,              # (B, max_blocks) int32; (B, H) or (H,) fp32 slopes
    K_DESC, V_DESC,                  # KV_TMA: host descriptors of the caches as (num_blocks * PAGE_SIZE, Hk * D)
    stride_qt, stride_qh,
    stride_kb, stride_kn, stride_kh,
    stride_vb, stride_vn, stride_vh,
    stride_ot, stride_oh,
    stride_lh, stride_btb, stride_ab, stride_ah,
    nheads, group, batch,
    qk_scale, softcap_scale, softcap_out, window_left, window_right,
    HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    PAGE_SIZE: tl.constexpr, PAGE_GATHER: tl.constexpr,
    HAS_LEFT: tl.constexpr, HAS_RIGHT: tl.constexpr, HAS_ALIBI: tl.constexpr, HAS_SOFTCAP: tl.constexpr,
    DOT_PRECISION: tl.constexpr, KV_TMA: tl.constexpr = False, QK_LEVELS: tl.constexpr = 0,
):
    h = tl.program_id(0)
    pid = tl.program_id(1)
    if pid >= tl.load(CU_BLOCKS + batch):
        return  # the grid is an upper bound of at most `batch` spare programs
    b = find_sequence(CU_BLOCKS, pid, batch)
    q_start = tl.load(CU_Q + b)
    seqlen_q = tl.load(CU_Q + b + 1) - q_start
    seqlen_k = tl.load(CU_K + b + 1) - tl.load(CU_K + b)
    block = pid - tl.load(CU_BLOCKS + b)
    if HAS_RIGHT:
        # causal-like masks: a sequence's last query block has the most key tiles; start it first
        block = tl.load(CU_BLOCKS + b + 1) - tl.load(CU_BLOCKS + b) - 1 - block
    start_m = block * BLOCK_M
    hk = h // group
    diag = seqlen_k - seqlen_q

    offs_m = start_m + tl.arange(0, BLOCK_M)                          # query rows of the sequence
    offs_d = tl.arange(0, BLOCK_D)
    row_ok = offs_m < seqlen_q
    rows = (q_start + offs_m).to(tl.int64)
    q_ptrs = Q + rows[:, None] * stride_qt + h * stride_qh + offs_d[None, :]
    q = tl.load(q_ptrs, mask=row_ok[:, None] & (offs_d[None, :] < HEAD_DIM), other=0.0)  # (BLOCK_M, BLOCK_D)
    if HAS_ALIBI:
        slope = tl.load(ALIBI + b * stride_ab + h * stride_ah)
        slope_log2 = tl.zeros([BLOCK_M], tl.float32) + slope * LOG2E
    else:
        slope = 0.0
        slope_log2 = tl.zeros([BLOCK_M], tl.float32)
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)

    bt_row = BLOCK_TABLE + b.to(tl.int64) * stride_btb
    k_head = hk.to(tl.int64) * stride_kh
    v_head = hk.to(tl.int64) * stride_vh
    lo, full_lo, full_hi, hi = kv_tile_ranges(start_m, seqlen_q, seqlen_k, diag, window_left, window_right,
                                              BLOCK_M, BLOCK_N, HAS_LEFT, HAS_RIGHT)
    # tiles cut by the window's left edge (masked), the fully visible ones, then the diagonal /
    # right edge and the ragged last tile (masked; masked tiles read no row outside [0, seqlen_k)).
    # Three calls, not a static_range over the three ranges: that form compiled to other SASS for
    # sm_90a (register allocation; session 49, offline) than the one measured on the H200.
    acc, l_i, m_i = _paged_tiles(acc, l_i, m_i, q, offs_m, slope_log2, lo, full_lo,
                                 K_CACHE, V_CACHE, K_DESC, V_DESC, bt_row, k_head, v_head, hk,
                                 stride_kb, stride_kn, stride_vb, stride_vn, seqlen_k, diag, qk_scale,
                                 softcap_scale, softcap_out, window_left, window_right, offs_d,
                                 HEAD_DIM, BLOCK_D, BLOCK_N, PAGE_SIZE, True, HAS_LEFT, HAS_RIGHT,
                                 HAS_ALIBI, HAS_SOFTCAP, DOT_PRECISION, PAGE_GATHER, KV_TMA, QK_LEVELS)
    acc, l_i, m_i = _paged_tiles(acc, l_i, m_i, q, offs_m, slope_log2, full_lo, full_hi,
                                 K_CACHE, V_CACHE, K_DESC, V_DESC, bt_row, k_head, v_head, hk,
                                 stride_kb, stride_kn, stride_vb, stride_vn, seqlen_k, diag, qk_scale,
                                 softcap_scale, softcap_out, window_left, window_right, offs_d,
                                 HEAD_DIM, BLOCK_D, BLOCK_N, PAGE_SIZE, False, HAS_LEFT, HAS_RIGHT,
                                 HAS_ALIBI, HAS_SOFTCAP, DOT_PRECISION, PAGE_GATHER, KV_TMA, QK_LEVELS)
    acc, l_i, m_i = _paged_tiles(acc, l_i, m_i, q, offs_m, slope_log2, full_hi, hi,
                                 K_CACHE, V_CACHE, K_DESC, V_DESC, bt_row, k_head, v_head, hk,
                                 stride_kb, stride_kn, stride_vb, stride_vn, seqlen_k, diag, qk_scale,
                                 softcap_scale, softcap_out, window_left, window_right, offs_d,
                                 HEAD_DIM, BLOCK_D, BLOCK_N, PAGE_SIZE, True, HAS_LEFT, HAS_RIGHT,
                                 HAS_ALIBI, HAS_SOFTCAP, DOT_PRECISION, PAGE_GATHER, KV_TMA, QK_LEVELS)

    # The one normalisation; a row that saw no key outputs 0 with lse = +inf (as kernels/fwd.py).
    empty = l_i == 0.0
    l_safe = tl.where(empty, 1.0, l_i)
    lse = tl.where(empty, float("inf"), (m_i + tl.log2(l_safe)) * LN2)
    if HAS_ALIBI == 2:
        # the tiles measured ALiBi from the rows' anchors (decode._update): flash-attn's lse, which
        # the paged op returns, for the rows before every key (flashtriton/alibi_anchor.py)
        lse = lse + _anchor_shift(slope, offs_m, diag)
    out = acc / l_safe[:, None]
    o_ptrs = O + rows[:, None] * stride_ot + h * stride_oh + offs_d[None, :]
    tl.store(o_ptrs, out.to(O.dtype.element_ty), mask=row_ok[:, None] & (offs_d[None, :] < HEAD_DIM))
    tl.store(LSE + h * stride_lh + q_start + offs_m, lse, mask=row_ok)
