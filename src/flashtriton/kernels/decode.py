"""Flash-Decoding: split-KV attention of a few query rows over a long KV cache, and the combine.

With one query (or a handful) per sequence there is no query axis to parallelise
over, and the work is bound by reading the cache. So the grid runs over chunks of
the cache instead: program (b, hk, split) streams its chunk of KV head hk of
sequence b exactly once, for all G = H / Hk query heads that share the head and all
Sq query rows together. Those G * Sq rows are the M dimension of the tile's dots
(padded to BLOCK_M >= 16 for tl.dot): row r is query qi = r // G of head hk * G + r % G.

Each program writes a partial result, normalised, with its logsumexp (log2 units):
    o_s = sum_j p_j v_j / l_s,   lse_s = m_s + log2(l_s)     (-inf when the chunk has no key)
and the partials merge exactly, weighted by exp2(lse_s - lse):
    lse = log2(sum_s exp2(lse_s)),   out = sum_s exp2(lse_s - lse) * o_s.
The merge runs either in the split kernel itself - the last program of each (b, hk)
to finish, found with an atomic ticket counter, merges the partials while they are
hot in L2 (FUSED_COMBINE: one launch per decode step) - or in decode_combine_kernel.
With one split the program normalises and writes the output directly.

Cache layouts (PAGE_SIZE constexpr):
  0            contiguous (B_cache, S_cache, Hk, D), row BATCH_IDX[b] (or b)
  >= BLOCK_N   paged, every tile inside one page: one block-table lookup per tile
  <  BLOCK_N   paged, small pages: a tile gathers its rows through per-row page indices
               (PAGE_GATHER 0), or page by page, BLOCK_N / PAGE_SIZE table entries a tile
               (PAGE_GATHER 1: int64 offsets, 2: int32; see launchers/decode.py, page_gather)
Tiles are aligned to absolute multiples of BLOCK_N, so with PAGE_SIZE >= BLOCK_N (both
powers of two) a tile never straddles two pages. K and V tiles come either through
TMA (KV_TMA: host-made descriptors of the cache viewed as (dim0 * dim1, Hk * D), for
the contiguous cache and pages >= BLOCK_N) or through pointer loads (any strides,
and the per-row gather of small pages), pipelined over num_stages either way.

Positions: the keys of sequence b are the absolute cache positions [lp, end + Snew),
lp = LEFTPAD[b] (or 0), end = SEQLENS[b] (+ `appended` when a separate kernel already
wrote the new tokens). Masks and ALiBi use positions relative to lp ("krel"); n keys,
diag = n - Sq (bottom-right alignment). The cached keys [lp, end) are shared out among
the first cache_splits splits in BLOCK_N tiles. With fused append (HAS_NEW), the new
tokens [end, end + Snew) belong to the last split: it reads them from K_NEW / V_NEW in
BLOCK_NEW-row tiles, rotates the keys, attends, and (in m-block 0) writes them into the
cache. cache_splits = n_splits - 1 gives that work a split of its own, off the critical
path of the cache streaming (the launcher's choice); that split also takes the ragged
last tile of the cache. No program reads a cache row that
this launch writes.

Scores are in log2 units: the softmax scale and log2(e) are folded into qk_scale, so
every exponential is an exp2 (as in the prefill kernel, kernels/fwd.py).
"""
import triton
import triton.language as tl

from .common import alibi_anchored_distance, dot_apart, exp2_one_rounding, qk_dot

LOG2E = tl.constexpr(1.4426950408889634)
LN2 = tl.constexpr(0.6931471805599453)

# Scalar arguments that change from call to call: not specialised, so that a new
# split count or sequence length reuses the compiled kernel.
NO_SPECIALIZE = ["seqlen_q", "seqlen_new", "appended", "n_ro", "rot_half", "n_splits", "cache_splits", "m_blocks",
                 "rows_per_block", "window_left", "window_right"]


@triton.constexpr_function
def combine_stages(block_r, block_d):
    """Pipeline depth of the combine's loop over the partials (see _combine_rows): 3
    partials in flight, 8 KB of shared memory each at 16 rows x 128 (reusing the K/V
    buffers); none for larger row blocks (64 x 256: 194 KB and 548 B of spills)."""
    return 4 if block_r * block_d <= 4096 else 1


@triton.jit
def rotated_rows(row_ptrs, row_ok, pos, COS, SIN, stride_cos, stride_sin, rot_half, n_ro, offs_d,
                 HEAD_DIM: tl.constexpr, INTERLEAVED: tl.constexpr):
    """Rows x (R, BLOCK_D) loaded from row_ptrs (R, 1) and rotated at positions pos (R,), fp32.

    Features d < 2 * rot_half rotate in pairs, x_d -> x_d cos - x_partner sin for the
    first of a pair and x_d cos + x_partner sin for the second:
      INTERLEAVED (GPT-J):     pairs (2i, 2i + 1), angle column i = d // 2
      not INTERLEAVED (NeoX):  pairs (i, i + rot_half), angle column i = d % rot_half
    Positions outside the table (only possible when value checks are off) read as
    angle 0, so the kernel never loads out of bounds.
    """
    d = offs_d[None, :]
    ok = row_ok & (d < HEAD_DIM)
    x = tl.load(row_ptrs + d, mask=ok, other=0.0).to(tl.float32)
    rot = d < 2 * rot_half
    if INTERLEAVED:
        first = (d % 2) == 0
        partner = d ^ 1
        col = d // 2
    else:
        first = d < rot_half
        partner = tl.where(first, d + rot_half, d - rot_half)
        col = tl.where(first, d, d - rot_half)
    rmask = ok & rot
    y = tl.load(row_ptrs + partner, mask=rmask, other=0.0).to(tl.float32)
    p = pos[:, None]
    cmask = rmask & (p >= 0) & (p < n_ro)
    c = tl.load(COS + p.to(tl.int64) * stride_cos + col, mask=cmask, other=1.0).to(tl.float32)
    s = tl.load(SIN + p.to(tl.int64) * stride_sin + col, mask=cmask, other=0.0).to(tl.float32)
    ys = tl.where(first, -y, y) * s
    return tl.where(rot, x * c + ys, x)


@triton.jit
def _locate(bt_row, start_n, offs_n, pos_ok, cache_b, PAGE_SIZE: tl.constexpr, BLOCK_N: tl.constexpr):
    """(block, slot) int64 of the cache rows at absolute positions offs_n (BLOCK_N,).

    block is the cache's dim-0 index (the batch row, or the page), slot its dim-1 index.
    bt_row points at this sequence's block-table row.
    """
    if PAGE_SIZE == 0:
        blk = cache_b.to(tl.int64)
        slot = offs_n.to(tl.int64)
    elif PAGE_SIZE >= BLOCK_N:
        # The whole tile lies in one page: one scalar lookup.
        blk = tl.load(bt_row + start_n // PAGE_SIZE).to(tl.int64)
        slot = (offs_n % PAGE_SIZE).to(tl.int64)
    else:
        # Small pages: BLOCK_N / PAGE_SIZE pages per tile, gathered per row. Unused
        # rows (outside the sequence) look up nothing, so a garbage table entry
        # beyond the sequence is never followed.
        blk = tl.load(bt_row + offs_n // PAGE_SIZE, mask=pos_ok, other=0).to(tl.int64)
        slot = (offs_n % PAGE_SIZE).to(tl.int64)
    return blk, slot


@triton.jit
def _page_gather_ptrs(K_CACHE, V_CACHE, bt_row, start_n, k_head, v_head, stride_kb, stride_kn, stride_vb, stride_vn,
                      lp, end, offs_d, PAGE_SIZE: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
                      MASKED: tl.constexpr, PAGE_GATHER: tl.constexpr):
    """K and V row pointers (BLOCK_N, BLOCK_D) of the tile at start_n (a multiple of BLOCK_N)
    for pages smaller than the tile, built page by page: BLOCK_N / PAGE_SIZE table entries a
    tile (not one per row), and the in-page part (slot * stride) a loop invariant, so a row
    costs one add. PAGE_GATHER 2: offsets in int32 (the launcher's promise: every element of
    both caches lies below 2**31). Pages outside [lp, end) of a masked tile look up nothing."""
    P: tl.constexpr = BLOCK_N // PAGE_SIZE
    pg = start_n // PAGE_SIZE + tl.arange(0, P)                      # table column of each page
    if MASKED:
        page_ok = (pg * PAGE_SIZE + PAGE_SIZE > lp) & (pg * PAGE_SIZE < end)
        blk = tl.load(bt_row + pg, mask=page_ok, other=0)
    else:
        blk = tl.load(bt_row + pg)
    slot = tl.arange(0, PAGE_SIZE)
    if PAGE_GATHER != 2:
        blk = blk.to(tl.int64)
    k_off = (blk * stride_kb)[:, None, None] + (slot * stride_kn)[None, :, None] + offs_d[None, None, :]
    v_off = (blk * stride_vb)[:, None, None] + (slot * stride_vn)[None, :, None] + offs_d[None, None, :]
    # (the reshape hides the rows' alignment from the compiler: without the hints the loads
    # would not vectorize, nor go through cp.async; the launcher checks them)
    k_off = tl.max_contiguous(tl.multiple_of(tl.reshape(k_off, (BLOCK_N, BLOCK_D)), [1, 8]), [1, BLOCK_D])
    v_off = tl.max_contiguous(tl.multiple_of(tl.reshape(v_off, (BLOCK_N, BLOCK_D)), [1, 8]), [1, BLOCK_D])
    return (K_CACHE + k_head) + k_off, (V_CACHE + v_head) + v_off


@triton.jit
def _update(acc, l_i, m_i, q, k, v, qi, slope_log2, krel, valid, diag, qk_scale, softcap_scale, softcap_out,
            window_left, window_right, MASKED: tl.constexpr, HAS_LEFT: tl.constexpr, HAS_RIGHT: tl.constexpr,
            HAS_ALIBI: tl.constexpr, HAS_SOFTCAP: tl.constexpr, DOT_PRECISION: tl.constexpr,
            QK_LEVELS: tl.constexpr = 0):
    """Online-softmax update of (acc, l_i, m_i) with one tile of keys k and values v.

    krel (1, N): the keys' positions in the slice; valid (1, N): keys that exist (only
    used when MASKED, which also applies the window; unmasked tiles are fully visible).
    """
    # The plain dot stays inline here: through qk_dot at QK_LEVELS = 0 the same dot compiled with its
    # loads in another order (bf16 / fp16 SASS, sm_90a, session 58); inline it is the earlier kernel's
    # SASS, byte for byte.
    if QK_LEVELS == 0:
        qk = tl.dot(q, tl.trans(k), input_precision=DOT_PRECISION)  # (BLOCK_M, N)
    else:   # fp32 one-row steps: the head dim in slices (kernels/common.qk_dot)
        qk = qk_dot(q, k, DOT_PRECISION, QK_LEVELS)
    if HAS_SOFTCAP:
        # softcap * tanh(scale * qk / softcap), in log2 units; tanh(x) = 1 - 2 / (e^2x + 1)
        s = (1.0 - 2.0 / (tl.exp2(qk * softcap_scale) + 1.0)) * softcap_out
    else:
        s = qk * qk_scale
    if HAS_ALIBI == 2:
        # anchored (flashtriton/alibi_anchor.py): rows before every key (qi + diag < 0) measure the
        # distance from key 0, so that their scores stay near 0; their lse moves back at the store.
        # (sm_90a, offline: the paged kernel +192 instructions over the plain bias in this float32
        # form, +296 with an integer max; session 68)
        s = s - slope_log2[:, None] * alibi_anchored_distance(qi[:, None] + diag, krel)
    elif HAS_ALIBI:
        s = s - slope_log2[:, None] * tl.abs(qi[:, None] + diag - krel).to(tl.float32)
    if MASKED:
        visible = valid
        if HAS_RIGHT:
            visible = visible & (krel <= qi[:, None] + diag + window_right)
        if HAS_LEFT:
            visible = visible & (krel >= qi[:, None] + diag - window_left)
        s = tl.where(visible, s, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, 1))
    if MASKED:
        # nothing visible yet in a row: shift by 0, not -inf, so exp2 never sees -inf - -inf
        m_use = tl.where(m_new == float("-inf"), 0.0, m_new)
    else:
        m_use = m_new
    alpha = tl.exp2(m_i - m_use)
    if QK_LEVELS > 0 and not HAS_ALIBI and not HAS_SOFTCAP:
        # fp32 one-row steps: the exponent rounded once (common.exp2_one_rounding), as in fwd.py / bwd.py
        p = exp2_one_rounding(qk, s, m_use[:, None], qk_scale)
    else:
        p = tl.exp2(s - m_use[:, None])
    l_i = l_i * alpha + tl.sum(p, 1)
    if QK_LEVELS > 0:
        # fp32 one-row steps: the tile's P V summed apart from the accumulator (common.dot_apart); as
        # `acc * alpha + tl.dot(p, v)` Triton 3.6 folds the add into the dot, one FMA chain over every key
        acc = acc * alpha[:, None] + dot_apart(p.to(v.dtype), v, qk_scale, DOT_PRECISION)
    else:
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=DOT_PRECISION)
    return acc, l_i, m_new


@triton.jit
def _attend_cache_tile(acc, l_i, m_i, q, qi, slope_log2, start_n,
                       K_CACHE, V_CACHE, K_DESC, V_DESC, bt_row, cache_b, k_head, v_head, hk, rows_per_block,
                       stride_kb, stride_kn, stride_vb, stride_vn,
                       lp, end, diag, qk_scale, softcap_scale, softcap_out, window_left, window_right, offs_d,
                       HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_N: tl.constexpr,
                       PAGE_SIZE: tl.constexpr, MASKED: tl.constexpr, HAS_LEFT: tl.constexpr,
                       HAS_RIGHT: tl.constexpr, HAS_ALIBI: tl.constexpr, HAS_SOFTCAP: tl.constexpr,
                       KV_TMA: tl.constexpr, DOT_PRECISION: tl.constexpr, PAGE_GATHER: tl.constexpr,
                       QK_LEVELS: tl.constexpr = 0):
    """One tile of BLOCK_N cached keys at absolute positions [start_n, start_n + BLOCK_N).
    MASKED tiles may stick out of [lp, end) (those keys read as 0 and are masked) and
    apply the window."""
    offs_n = start_n + tl.arange(0, BLOCK_N)                         # absolute positions
    d_ok = offs_d < HEAD_DIM
    if MASKED:
        in_cache = (offs_n >= lp) & (offs_n < end)
    else:
        in_cache = offs_n >= 0
    if PAGE_GATHER > 0 and 0 < PAGE_SIZE and PAGE_SIZE < BLOCK_N and not KV_TMA:
        blk, slot = 0, 0  # (the page gather locates its rows itself)
    else:
        blk, slot = _locate(bt_row, start_n, offs_n, in_cache, cache_b, PAGE_SIZE, BLOCK_N)
    if KV_TMA:
        # TMA: the cache viewed as (blocks * rows_per_block, Hk * D); the tile is the box
        # at row blk * rows_per_block + first slot, column hk * D. (With D < BLOCK_D the
        # box also covers the next head's first columns: q is zero there, and the extra
        # output columns are never stored.) Rows past the sequence may hold anything,
        # NaN included: their scores become -inf in _update whatever k holds, but
        # p = 0 times a NaN value is NaN, so masked tiles zero v.
        if PAGE_SIZE == 0:
            row0 = blk * rows_per_block + start_n
        else:
            row0 = blk * rows_per_block + start_n % PAGE_SIZE
        k = K_DESC.load([row0.to(tl.int32), hk * HEAD_DIM])           # (BLOCK_N, BLOCK_D)
        v = V_DESC.load([row0.to(tl.int32), hk * HEAD_DIM])
        if MASKED:
            v = tl.where(in_cache[:, None], v, 0.0)
    else:
        if PAGE_GATHER > 0 and 0 < PAGE_SIZE and PAGE_SIZE < BLOCK_N:
            k_ptrs, v_ptrs = _page_gather_ptrs(K_CACHE, V_CACHE, bt_row, start_n, k_head, v_head,
                                               stride_kb, stride_kn, stride_vb, stride_vn, lp, end, offs_d,
                                               PAGE_SIZE, BLOCK_N, BLOCK_D, MASKED, PAGE_GATHER)
        else:
            k_ptrs = K_CACHE + k_head + (blk * stride_kb + slot * stride_kn)[:, None] + offs_d[None, :]
            v_ptrs = V_CACHE + v_head + (blk * stride_vb + slot * stride_vn)[:, None] + offs_d[None, :]
        if MASKED:
            kv_mask = in_cache[:, None] & d_ok[None, :]
            k = tl.load(k_ptrs, mask=kv_mask, other=0.0)            # (BLOCK_N, BLOCK_D)
            v = tl.load(v_ptrs, mask=kv_mask, other=0.0)
        elif HEAD_DIM == BLOCK_D:
            k = tl.load(k_ptrs)
            v = tl.load(v_ptrs)
        else:
            k = tl.load(k_ptrs, mask=d_ok[None, :], other=0.0)
            v = tl.load(v_ptrs, mask=d_ok[None, :], other=0.0)
    return _update(acc, l_i, m_i, q, k, v, qi, slope_log2, (offs_n - lp)[None, :], in_cache[None, :], diag,
                   qk_scale, softcap_scale, softcap_out, window_left, window_right,
                   MASKED, HAS_LEFT, HAS_RIGHT, HAS_ALIBI, HAS_SOFTCAP, DOT_PRECISION, QK_LEVELS)


@triton.jit
def _attend_new_tile(acc, l_i, m_i, q, qi, slope_log2, start_n,
                     K_CACHE, V_CACHE, bt_row, cache_b, k_head, v_head, stride_kb, stride_kn, stride_vb, stride_vn,
                     knew_row, vnew_row, stride_kns, stride_vns, seqlen_new, write_new,
                     COS, SIN, stride_cos, stride_sin, rot_half, n_ro,
                     lp, end, diag, qk_scale, softcap_scale, softcap_out, window_left, window_right, offs_d,
                     HEAD_DIM: tl.constexpr, BLOCK_NEW: tl.constexpr, PAGE_SIZE: tl.constexpr,
                     HAS_ROTARY: tl.constexpr, INTERLEAVED: tl.constexpr, HAS_LEFT: tl.constexpr,
                     HAS_RIGHT: tl.constexpr, HAS_ALIBI: tl.constexpr, HAS_SOFTCAP: tl.constexpr,
                     DOT_PRECISION: tl.constexpr, QK_LEVELS: tl.constexpr = 0):
    """BLOCK_NEW of the new tokens, at absolute positions [start_n, start_n + BLOCK_NEW)
    (>= end): read from K_NEW / V_NEW, the keys rotated at their position, attended,
    and written into the cache when write_new. Small tiles: the new tokens are few, and
    the rotation holds four tiles (x, partner, cos, sin) in registers."""
    offs_n = start_n + tl.arange(0, BLOCK_NEW)                       # absolute positions
    j = offs_n - end                                                 # index into the new tokens
    is_new = (j >= 0) & (j < seqlen_new)
    jj = tl.where(is_new, j, 0).to(tl.int64)
    nmask = is_new[:, None] & (offs_d[None, :] < HEAD_DIM)
    if HAS_ROTARY:
        k = rotated_rows(knew_row + jj[:, None] * stride_kns, is_new[:, None], offs_n, COS, SIN,
                         stride_cos, stride_sin, rot_half, n_ro, offs_d, HEAD_DIM, INTERLEAVED)
        k = k.to(K_CACHE.dtype.element_ty)
    else:
        k = tl.load(knew_row + jj[:, None] * stride_kns + offs_d[None, :], mask=nmask, other=0.0)
    v = tl.load(vnew_row + jj[:, None] * stride_vns + offs_d[None, :], mask=nmask, other=0.0)
    # where they go: the cache row of each position (new tokens need not be tile aligned,
    # so pages are looked up per row)
    if PAGE_SIZE == 0:
        blk = cache_b.to(tl.int64)
        slot = offs_n.to(tl.int64)
    else:
        blk = tl.load(bt_row + offs_n // PAGE_SIZE, mask=is_new, other=0).to(tl.int64)
        slot = (offs_n % PAGE_SIZE).to(tl.int64)
    k_ptrs = K_CACHE + k_head + (blk * stride_kb + slot * stride_kn)[:, None] + offs_d[None, :]
    v_ptrs = V_CACHE + v_head + (blk * stride_vb + slot * stride_vn)[:, None] + offs_d[None, :]
    tl.store(k_ptrs, k, mask=nmask & write_new)
    tl.store(v_ptrs, v, mask=nmask & write_new)
    return _update(acc, l_i, m_i, q, k, v, qi, slope_log2, (offs_n - lp)[None, :], is_new[None, :], diag,
                   qk_scale, softcap_scale, softcap_out, window_left, window_right,
                   True, HAS_LEFT, HAS_RIGHT, HAS_ALIBI, HAS_SOFTCAP, DOT_PRECISION, QK_LEVELS)


@triton.jit
def _store_final(O, LSE, out, lse2, lse_shift, b, qi, h, row_ok, offs_d,
                 stride_ob, stride_os, stride_oh, stride_lb, stride_lh, stride_ls, HEAD_DIM: tl.constexpr,
                 SHIFT: tl.constexpr):
    """out (R, BLOCK_D) fp32 and lse2 (R,) log2 units (+inf: no key) into O (B, Sq, H, D), LSE (B, H, Sq).
    SHIFT: lse2 is the anchored lse, and lse_shift (R,) (natural units, _anchor_shift) turns it into
    flash-attn's, one rounding at its size as in alibi_anchor.to_public."""
    o_ptrs = O + b * stride_ob + qi[:, None] * stride_os + h[:, None] * stride_oh + offs_d[None, :]
    tl.store(o_ptrs, out.to(O.dtype.element_ty), mask=row_ok[:, None] & (offs_d[None, :] < HEAD_DIM))
    if SHIFT:
        lse = lse2 * LN2 + lse_shift
    else:
        lse = lse2 * LN2
    tl.store(LSE + b * stride_lb + h * stride_lh + qi * stride_ls, lse, mask=row_ok)


@triton.jit
def _anchor_shift(slope, qi, diag):
    """slope * min(qi + diag, 0) (R,), natural units: flash-attn's lse minus the anchored one
    (flashtriton/alibi_anchor.py; 0 for a row that sits on a key)."""
    return slope * tl.minimum(qi + diag, 0).to(tl.float32)


@triton.jit
def _combine_rows(O_PART, LSE_PART, O, LSE, lse_shift, pid_bh, b, hk, offs_m, group, rows_total, n_splits,
                  stride_ob, stride_os, stride_oh, stride_lb, stride_lh, stride_ls,
                  HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_R: tl.constexpr,
                  SPLIT_STAGES: tl.constexpr, SHIFT: tl.constexpr):
    """Merge the n_splits partials of rows offs_m of (b, hk) and store the final rows.

    Partials: O_PART (B * Hk, n_splits, rows_total, HEAD_DIM) fp32, normalised;
    LSE_PART (B * Hk, n_splits, rows_total) fp32, log2 units, -inf for an empty chunk.
    One pass with a running max, as in the attention loop, software-pipelined
    SPLIT_STAGES deep (cp.async: SPLIT_STAGES - 1 partials in flight). The loop is
    bound by the latency of its loads, not by their bytes: the first H200 run
    (2026-11-29, B = 1, L = 8k, graph) cost ~0.27 us a split (24.3 / 28.6 / 40.0 /
    60.0 us at 16 / 32 / 64 / 128 splits) with one load in flight. (Loading several
    partials as one 3-D tile instead took 254 registers at D = 128 against 128: one
    program less an SM.) Loads bypass L1 (.cg):
    the partials were written by other programs, possibly on other SMs.
    SHIFT: the partials are anchored (ALiBi, _update) and lse_shift (BLOCK_R,) moves the final lse
    (_store_final); a row's partials share its anchor, so the merge itself is unchanged.
    """
    offs_d = tl.arange(0, BLOCK_D)
    row_ok = offs_m < rows_total
    mask = row_ok[:, None] & (offs_d[None, :] < HEAD_DIM)
    m = tl.full([BLOCK_R], float("-inf"), tl.float32)
    l = tl.zeros([BLOCK_R], tl.float32)
    acc = tl.zeros([BLOCK_R, BLOCK_D], tl.float32)
    base = pid_bh.to(tl.int64) * n_splits
    for s in tl.range(0, n_splits, num_stages=SPLIT_STAGES):
        part = base + s
        lse_s = tl.load(LSE_PART + part * rows_total + offs_m, mask=row_ok, other=float("-inf"),
                        cache_modifier=".cg")
        o_s = tl.load(O_PART + (part * rows_total + offs_m[:, None]) * HEAD_DIM + offs_d[None, :], mask=mask,
                      other=0.0, cache_modifier=".cg")
        m_new = tl.maximum(m, lse_s)
        m_use = tl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = tl.exp2(m - m_use)
        w = tl.exp2(lse_s - m_use)                                   # 0 for an empty chunk
        # an empty chunk's o_s is 0, never NaN; but keep 0 * garbage out regardless
        acc = acc * alpha[:, None] + tl.where(w[:, None] > 0, w[:, None] * o_s, 0.0)
        l = l * alpha + w
        m = m_new
    empty = l == 0.0
    l_safe = tl.where(empty, 1.0, l)
    lse2 = tl.where(empty, float("inf"), m + tl.log2(l_safe))
    qi = offs_m // group
    h = hk * group + offs_m % group
    _store_final(O, LSE, acc / l_safe[:, None], lse2, lse_shift, b, qi, h, row_ok, offs_d,
                 stride_ob, stride_os, stride_oh, stride_lb, stride_lh, stride_ls, HEAD_DIM, SHIFT)


@triton.jit(do_not_specialize=NO_SPECIALIZE)
def decode_split_kernel(
    Q, K_CACHE, V_CACHE, K_NEW, V_NEW, COS, SIN,    # q (B, Sq, H, D); caches (see layouts); new (B, Snew, Hk, D)
    K_DESC, V_DESC,                                # KV_TMA: descriptors of the caches as (dim0 * dim1, Hk * D)
    SEQLENS, BATCH_IDX, LEFTPAD, BLOCK_TABLE,      # (B,) int32 each; block table (B, max_blocks) int32
    ALIBI,                                         # (B, H) or (H,) fp32 slopes
    O, LSE,                                        # out (B, Sq, H, D) like q, lse (B, H, Sq) fp32
    O_PART, LSE_PART, COUNTERS,                    # split partials (see _combine_rows); (B * Hk * m_blocks,) int32
    stride_qb, stride_qs, stride_qh,
    stride_kb, stride_kn, stride_kh,
    stride_vb, stride_vn, stride_vh,
    stride_knb, stride_kns, stride_knh,
    stride_vnb, stride_vns, stride_vnh,
    stride_ob, stride_os, stride_oh,
    stride_lb, stride_lh, stride_ls,
    stride_btb, stride_cos, stride_sin, stride_ab, stride_ah,
    nheads_k, group, seqlen_q, seqlen_new, appended, n_ro, rot_half, n_splits, cache_splits, m_blocks,
    rows_per_block,
    qk_scale, softcap_scale, softcap_out, window_left, window_right,
    HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    PAGE_SIZE: tl.constexpr, HAS_BATCH_IDX: tl.constexpr, HAS_LEFTPAD: tl.constexpr,
    HAS_NEW: tl.constexpr, BLOCK_NEW: tl.constexpr, HAS_ROTARY: tl.constexpr, ROTARY_INTERLEAVED: tl.constexpr,
    ROTARY_PER_ROW: tl.constexpr, HAS_LEFT: tl.constexpr, HAS_RIGHT: tl.constexpr,
    HAS_ALIBI: tl.constexpr, HAS_SOFTCAP: tl.constexpr, SPLIT: tl.constexpr, FUSED_COMBINE: tl.constexpr,
    KV_TMA: tl.constexpr, DOT_PRECISION: tl.constexpr, PAGE_GATHER: tl.constexpr = 0,
    QK_LEVELS: tl.constexpr = 0,
):
    pid_bh = tl.program_id(0)                       # b * Hk + hk
    split = tl.program_id(1)
    mblk = tl.program_id(2)
    b = pid_bh // nheads_k
    hk = pid_bh % nheads_k
    rows_total = group * seqlen_q

    # ---- this sequence's keys: absolute positions [lp, end + snew) ----------------------
    end = tl.load(SEQLENS + b) + appended
    if HAS_LEFTPAD:
        lp = tl.load(LEFTPAD + b)
    else:
        lp = 0
    if HAS_NEW:
        snew = seqlen_new
    else:
        snew = 0
    n = end + snew - lp                              # keys in the slice
    diag = n - seqlen_q                              # query i sits on key i + diag
    if HAS_BATCH_IDX:
        cache_b = tl.load(BATCH_IDX + b)
    else:
        cache_b = b
    bt_row = BLOCK_TABLE + b.to(tl.int64) * stride_btb
    k_head = hk.to(tl.int64) * stride_kh
    v_head = hk.to(tl.int64) * stride_vh
    knew_row = K_NEW + b.to(tl.int64) * stride_knb + hk * stride_knh
    vnew_row = V_NEW + b.to(tl.int64) * stride_vnb + hk * stride_vnh

    # ---- the G * Sq query rows of this m-block: (BLOCK_M, BLOCK_D) ------------------------
    offs_m = mblk * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = offs_m < rows_total
    qi = offs_m // group                            # query index of the row
    h = hk * group + offs_m % group                 # its query head
    offs_d = tl.arange(0, BLOCK_D)
    q_rows = Q + b.to(tl.int64) * stride_qb + qi[:, None].to(tl.int64) * stride_qs + h[:, None] * stride_qh
    if HAS_ROTARY:
        # flash-attn's rule: per-row positions when causal or windowed, else all at `end`
        if ROTARY_PER_ROW:
            pos_q = end + qi
        else:
            pos_q = end + qi * 0
        q = rotated_rows(q_rows, row_ok[:, None], pos_q, COS, SIN, stride_cos, stride_sin, rot_half, n_ro,
                         offs_d, HEAD_DIM, ROTARY_INTERLEAVED).to(Q.dtype.element_ty)
    else:
        q = tl.load(q_rows + offs_d[None, :], mask=row_ok[:, None] & (offs_d[None, :] < HEAD_DIM), other=0.0)
    if HAS_ALIBI:
        slope_log2 = tl.load(ALIBI + b * stride_ab + h * stride_ah, mask=row_ok, other=0.0) * LOG2E
    else:
        slope_log2 = tl.zeros([BLOCK_M], tl.float32)

    # ---- key range of these rows (relative), its fully visible part, and our chunk ---------
    q_first = (mblk * BLOCK_M) // group
    q_last = (tl.minimum(rows_total, (mblk + 1) * BLOCK_M) - 1) // group
    lo = 0
    hi = n
    if HAS_RIGHT:
        hi = tl.minimum(hi, q_last + diag + window_right + 1)
    if HAS_LEFT:
        lo = tl.maximum(lo, q_first + diag - window_left)
    write_new = mblk == 0
    if HAS_NEW:
        # m-block 0 writes every new token into the cache, visible to its rows or not
        lo = tl.where(write_new, tl.minimum(lo, end - lp), lo)
        hi = tl.where(write_new, n, hi)
    hi = tl.maximum(hi, lo)
    # Cached keys [lp + lo, min(lp + hi, end)) are tiled at absolute multiples of BLOCK_N
    # and the tiles shared out among the splits; the new tokens [end, end + snew) go to
    # the last split. Fully visible tiles (every row sees every key, all in the cache)
    # run unmasked.
    full_lo = 0
    if HAS_LEFT:
        full_lo = tl.maximum(q_last + diag - window_left, 0)
    full_lo = ((lp + full_lo + BLOCK_N - 1) // BLOCK_N) * BLOCK_N
    full_hi = end - lp
    if HAS_RIGHT:
        full_hi = tl.minimum(full_hi, q_first + diag + window_right + 1)
    # (operands of // kept >= 0: the GPU truncates, the interpreter floors)
    full_hi = (tl.maximum(lp + full_hi, 0) // BLOCK_N) * BLOCK_N
    t_lo = ((lp + lo) // BLOCK_N) * BLOCK_N
    t_hi = tl.maximum(tl.minimum(lp + hi, end), t_lo)
    # The first cache_splits splits share the cached tiles: all of them, or (when the
    # launcher gives the appended tokens a split of their own, cache_splits = n_splits - 1)
    # all but the ragged last one, which goes to the last split with the new tokens. A
    # ragged tile is masked and not pipelined: at the end of a cache split it lengthened
    # the critical path by ~1.5 us (B = 1, L = 8k: 22.9 us at 8191 keys against 21.4 at
    # 8192, H200, 2026-11-29); the append split has slack to absorb it.
    t_cut = t_hi
    if HAS_NEW:
        own_split = (cache_splits < n_splits) & (split == n_splits - 1)
        t_cut = tl.where(cache_splits < n_splits, tl.maximum(tl.minimum(t_hi, (end // BLOCK_N) * BLOCK_N), t_lo),
                         t_hi)
    n_tiles = (t_cut - t_lo + BLOCK_N - 1) // BLOCK_N
    per_split = (n_tiles + cache_splits - 1) // cache_splits
    s0 = t_lo + split * per_split * BLOCK_N
    s1 = tl.minimum(s0 + per_split * BLOCK_N, t_cut)
    if HAS_NEW:
        s0 = tl.where(own_split, t_cut, s0)
        s1 = tl.where(own_split, t_hi, s1)
    a = tl.minimum(tl.maximum(full_lo, s0), s1)
    c = tl.minimum(tl.maximum(full_hi, a), s1)

    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)
    # Tiles cut by the window's left edge or the left padding: masked, not pipelined
    # (there are one or two).
    for start_n in tl.range(s0, a, BLOCK_N, num_stages=1):
        acc, l_i, m_i = _attend_cache_tile(acc, l_i, m_i, q, qi, slope_log2, start_n,
                                           K_CACHE, V_CACHE, K_DESC, V_DESC, bt_row, cache_b, k_head, v_head, hk,
                                           rows_per_block, stride_kb, stride_kn, stride_vb, stride_vn,
                                           lp, end, diag, qk_scale, softcap_scale, softcap_out,
                                           window_left, window_right, offs_d,
                                           HEAD_DIM, BLOCK_D, BLOCK_N, PAGE_SIZE, True, HAS_LEFT, HAS_RIGHT,
                                           HAS_ALIBI, HAS_SOFTCAP, KV_TMA, DOT_PRECISION, PAGE_GATHER,
                                           QK_LEVELS)
    # Fully visible tiles: no mask, pipelined num_stages deep - the bulk of a decode step.
    for start_n in range(a, c, BLOCK_N):
        acc, l_i, m_i = _attend_cache_tile(acc, l_i, m_i, q, qi, slope_log2, start_n,
                                           K_CACHE, V_CACHE, K_DESC, V_DESC, bt_row, cache_b, k_head, v_head, hk,
                                           rows_per_block, stride_kb, stride_kn, stride_vb, stride_vn,
                                           lp, end, diag, qk_scale, softcap_scale, softcap_out,
                                           window_left, window_right, offs_d,
                                           HEAD_DIM, BLOCK_D, BLOCK_N, PAGE_SIZE, False, HAS_LEFT, HAS_RIGHT,
                                           HAS_ALIBI, HAS_SOFTCAP, KV_TMA, DOT_PRECISION, PAGE_GATHER,
                                           QK_LEVELS)
    # The ragged end of the cache and the diagonal / right window edge: masked.
    for start_n in tl.range(c, s1, BLOCK_N, num_stages=1):
        acc, l_i, m_i = _attend_cache_tile(acc, l_i, m_i, q, qi, slope_log2, start_n,
                                           K_CACHE, V_CACHE, K_DESC, V_DESC, bt_row, cache_b, k_head, v_head, hk,
                                           rows_per_block, stride_kb, stride_kn, stride_vb, stride_vn,
                                           lp, end, diag, qk_scale, softcap_scale, softcap_out,
                                           window_left, window_right, offs_d,
                                           HEAD_DIM, BLOCK_D, BLOCK_N, PAGE_SIZE, True, HAS_LEFT, HAS_RIGHT,
                                           HAS_ALIBI, HAS_SOFTCAP, KV_TMA, DOT_PRECISION, PAGE_GATHER,
                                           QK_LEVELS)
    if HAS_NEW:
        # The new tokens, in the last split: appended (m-block 0) and attended.
        new_lo = tl.maximum(lp + lo, end)
        new_hi = tl.where(split == n_splits - 1, lp + hi, new_lo)
        for start_n in tl.range(new_lo, new_hi, BLOCK_NEW, num_stages=1):
            acc, l_i, m_i = _attend_new_tile(acc, l_i, m_i, q, qi, slope_log2, start_n,
                                             K_CACHE, V_CACHE, bt_row, cache_b, k_head, v_head,
                                             stride_kb, stride_kn, stride_vb, stride_vn,
                                             knew_row, vnew_row, stride_kns, stride_vns, snew, write_new,
                                             COS, SIN, stride_cos, stride_sin, rot_half, n_ro,
                                             lp, end, diag, qk_scale, softcap_scale, softcap_out,
                                             window_left, window_right, offs_d,
                                             HEAD_DIM, BLOCK_NEW, PAGE_SIZE, HAS_ROTARY, ROTARY_INTERLEAVED,
                                             HAS_LEFT, HAS_RIGHT, HAS_ALIBI, HAS_SOFTCAP, DOT_PRECISION,
                                             QK_LEVELS)

    empty = l_i == 0.0                               # no visible key in this chunk
    l_safe = tl.where(empty, 1.0, l_i)
    out = acc / l_safe[:, None]
    if HAS_ALIBI == 2:
        # (the slopes loaded again, in natural units: kept apart, the other variants' SASS is unchanged)
        lse_shift = _anchor_shift(tl.load(ALIBI + b * stride_ab + h * stride_ah, mask=row_ok, other=0.0), qi,
                                  diag)                              # (BLOCK_M,)
    else:
        lse_shift = slope_log2                                       # (unused: no SHIFT)
    if not SPLIT:
        _store_final(O, LSE, out, tl.where(empty, float("inf"), m_i + tl.log2(l_safe)), lse_shift, b, qi, h,
                     row_ok, offs_d, stride_ob, stride_os, stride_oh, stride_lb, stride_lh, stride_ls, HEAD_DIM,
                     HAS_ALIBI == 2)
    else:
        part = pid_bh.to(tl.int64) * n_splits + split
        tl.store(LSE_PART + part * rows_total + offs_m, tl.where(empty, float("-inf"), m_i + tl.log2(l_safe)),
                 mask=row_ok)
        tl.store(O_PART + (part * rows_total + offs_m[:, None]) * HEAD_DIM + offs_d[None, :], out,
                 mask=row_ok[:, None] & (offs_d[None, :] < HEAD_DIM))
        if HAS_ALIBI == 2 and not FUSED_COMBINE:
            # the separate combine finds the rows' lse shift in LSE (decode_combine_kernel's SHIFT):
            # it launches after this kernel, and LSE is not written before it
            tl.store(LSE + b * stride_lb + h * stride_lh + qi * stride_ls, lse_shift, mask=row_ok & (split == 0))
        if FUSED_COMBINE:
            # Last one out merges. The barrier orders every thread's partial stores before
            # the (single-thread, acq_rel, gpu-scope) ticket; the ticket's acquire makes the
            # other programs' partials visible to the merging program.
            tl.debug_barrier()
            counter = COUNTERS + pid_bh * m_blocks + mblk
            ticket = tl.atomic_add(counter, 1, sem="acq_rel", scope="gpu")
            if ticket == n_splits - 1:
                tl.atomic_xchg(counter, 0, sem="relaxed", scope="gpu")  # ready for the next launch
                _combine_rows(O_PART, LSE_PART, O, LSE, lse_shift, pid_bh, b, hk, offs_m, group, rows_total,
                              n_splits, stride_ob, stride_os, stride_oh, stride_lb, stride_lh, stride_ls,
                              HEAD_DIM, BLOCK_D, BLOCK_M, combine_stages(BLOCK_M, BLOCK_D), HAS_ALIBI == 2)


@triton.jit(do_not_specialize=["seqlen_q", "n_splits"])
def decode_combine_kernel(O_PART, LSE_PART, O, LSE,
                          stride_ob, stride_os, stride_oh, stride_lb, stride_lh, stride_ls,
                          nheads_k, group, seqlen_q, n_splits,
                          HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_R: tl.constexpr,
                          SHIFT: tl.constexpr = False):
    """The separate combine: program (b * Hk + hk, row block) merges BLOCK_R rows. SHIFT: anchored
    ALiBi partials, whose lse shift the split kernel left in LSE (decode_split_kernel's epilogue)."""
    pid_bh = tl.program_id(0)
    offs_m = tl.program_id(1) * BLOCK_R + tl.arange(0, BLOCK_R)
    if SHIFT:
        lse_shift = tl.load(LSE + (pid_bh // nheads_k) * stride_lb
                            + ((pid_bh % nheads_k) * group + offs_m % group) * stride_lh
                            + (offs_m // group) * stride_ls, mask=offs_m < group * seqlen_q, other=0.0)
    else:
        lse_shift = offs_m                                           # (unused: no SHIFT)
    _combine_rows(O_PART, LSE_PART, O, LSE, lse_shift, pid_bh, pid_bh // nheads_k, pid_bh % nheads_k, offs_m,
                  group, group * seqlen_q, n_splits, stride_ob, stride_os, stride_oh, stride_lb, stride_lh, stride_ls,
                  HEAD_DIM, BLOCK_D, BLOCK_R, combine_stages(BLOCK_R, BLOCK_D), SHIFT)


@triton.jit(do_not_specialize=["n_parts", "seqlen"])
def merge_states_kernel(OUTS, LSES, OUT, LSE,
                        stride_on, stride_op, stride_os, stride_oh,      # outs (N, P, S, H, D)
                        stride_ln, stride_lp, stride_lh, stride_ls,      # lses (N, P, H, S)
                        stride_rp, stride_rs, stride_rh,                 # out (P, S, H, D)
                        stride_xp, stride_xh, stride_xs,                 # lse (P, H, S)
                        nheads, seqlen, n_parts,
                        HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_S: tl.constexpr):
    """merge_attention_states: program (p * H + h, row block) merges BLOCK_S rows of
    head h over the N parts. lse in natural log; +inf or -inf marks an empty part."""
    pid = tl.program_id(0)
    p = pid // nheads
    h = pid % nheads
    offs_s = tl.program_id(1) * BLOCK_S + tl.arange(0, BLOCK_S)
    offs_d = tl.arange(0, BLOCK_D)
    row_ok = offs_s < seqlen
    mask = row_ok[:, None] & (offs_d[None, :] < HEAD_DIM)
    m = tl.full([BLOCK_S], float("-inf"), tl.float32)
    l = tl.zeros([BLOCK_S], tl.float32)
    acc = tl.zeros([BLOCK_S, BLOCK_D], tl.float32)
    for i in range(n_parts):
        lse_i = tl.load(LSES + i * stride_ln + p * stride_lp + h * stride_lh + offs_s * stride_ls, mask=row_ok,
                        other=float("-inf")).to(tl.float32) * LOG2E
        lse_i = tl.where(lse_i == float("inf"), float("-inf"), lse_i)   # +inf: a part that saw no key
        o_i = tl.load(OUTS + i * stride_on + p * stride_op + offs_s[:, None] * stride_os + h * stride_oh
                      + offs_d[None, :], mask=mask, other=0.0).to(tl.float32)
        m_new = tl.maximum(m, lse_i)
        m_use = tl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = tl.exp2(m - m_use)
        w = tl.exp2(lse_i - m_use)
        acc = acc * alpha[:, None] + tl.where(w[:, None] > 0, w[:, None] * o_i, 0.0)
        l = l * alpha + w
        m = m_new
    empty = l == 0.0
    l_safe = tl.where(empty, 1.0, l)
    tl.store(OUT + p * stride_rp + offs_s[:, None] * stride_rs + h * stride_rh + offs_d[None, :],
             (acc / l_safe[:, None]).to(OUT.dtype.element_ty), mask=mask)
    tl.store(LSE + p * stride_xp + h * stride_xh + offs_s * stride_xs,
             tl.where(empty, float("inf"), (m + tl.log2(l_safe)) * LN2), mask=row_ok)
