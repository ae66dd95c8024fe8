"""FlashAttention-2 forward, warp-specialized for Hopper (Triton 3.6 on sm_90).

The same algorithm as kernels/fwd.py (queries outermost, one program per BLOCK_M rows
of one (batch, head), K/V tiles streamed, the accumulator normalised once at the end,
one logsumexp per row), for the plainest cases only: no mask (no window, key and query
counts multiples of the tile) or, with MASKED, a bottom-right causal mask or sliding
window with Nq <= Nk (launchers/policy.warp_spec_masked_fwd says where it runs); no
ALiBi, softcap or varlen. Dropout (HAS_DROPOUT; unmasked calls only: with MASKED the
specialization pass fails, NVGPUWarpSpecialization, Triton 3.6.0, 2026-11-29) hashes its
keys in the kernel, the rows from the iota table (launchers/policy.WARP_SPEC_DROPOUT_FWD).
The launcher (launchers/policy.warp_spec_mode) picks it; everything else runs fwd.py.
(A split path - this kernel on the fully visible tiles of causal and windowed calls,
fwd.py resuming with the masked ones - measured no faster anywhere and was removed in
session 7: bench/NOTES.md.)

What differs is the loop: `tl.range(..., warp_specialize=True)` with num_warps=4 makes
Triton's Hopper pass split the program into a producer warpgroup that only issues the
TMA loads and two consumer warpgroups that each own BLOCK_M / 2 rows (num_warps
becomes 12, registers rebalanced with setmaxnreg), so one consumer's softmax can run
while the other's wgmma holds the tensor cores. H200, 2026-11-29, bf16, D = 128,
non-causal, 16k tokens, both on the rows-first grid (bench/gpu/s6_ws_ab.py, eager):
300 / 405 / 479 / 520 / 537 / 548 TFLOP/s at N = 512 / 1k / 2k / 4k / 8k / 16k against
244 / 280 / 445 / 475 / 485 / 494 for fwd.py (cuDNN 526 / 569 / 599 / 599 / 611 / 612).

PERSISTENT wraps the body (_fwd_ws_tile) in a loop over query blocks, about one program an
SM (launchers.forward.WS_PERSISTENT: at D = 128 unmasked +13% at N = 512 to +1-2% at 16k).

Compiler constraints (Triton 3.6.0, 2026-11-29), which shape this file:
  - only one loop beside the warp-specialized one's nest: a second loop before or after it
    fails to compile ("'scf.for' op operation destroyed but still has uses", or the
    NVGPUWarpSpecialization pass fails), and a branch inside the loop silently turns the
    specialization off. A loop around it (PERSISTENT) is fine (2026-11-30: 12 warps,
    setmaxnreg, no spill, sm_90a);
  - anything indexed by the query row goes wrong in the second consumer warpgroup:
    a causal mask (key <= row, from tl.arange, inside or outside the loop) and a
    pointer store of the lse compiled, passed under the interpreter, and were wrong
    on the H200 (max error ~1; lse errors of inf), while masks on the key index alone
    were right (bench/gpu/s6_ws_mask_probe.py). So the MASKED variant takes its rows
    from an iota table through a descriptor, and the lse leaves through one;
  - dropout keys read from the call's key table through a descriptor (row keys before
    the loop and column keys per tile, session 8; both per tile, or column keys alone,
    session 9) left the lse of some rows wrong (row 0 of every D = 256 call, 0.07% of
    D = 128 calls under load; the output right there: bench/gpu/s9_dropout_fwd.py), and a
    pointer load inside the loop fails the specialization pass (WSLowerToken assertion).
    So both keys are hashed here: the row keys once, at the iota rows; the in-group
    column keys once, at tl.arange columns, and one group key per tile (15453 calls a
    case under load right with a column hash per tile, session 9);
  - descriptors made in the kernel (host-made ones are not data-partitioned);
  - no branch on a runtime scalar's sign inside the loop: the scale's sign is NEG_SCALE.
"""
import triton
import triton.language as tl

from .common import (DROPOUT_GROUP, LN2, NO_SPECIALIZE, dropout_col_seeds, dropout_in_group_key, dropout_row_key,
                     dropout_threshold, dropout_tile_keep, head_slice_desc, row_view_desc, vec_desc,
                     ws_hidden_score, ws_softmax_step)


@triton.jit(do_not_specialize=NO_SPECIALIZE)
def attn_fwd_ws_kernel(
    Q, K, V, O, LSE,                 # q (B, Nq, H, D), k/v (B, Nk, Hk, D), o like q, lse (B, H, Nq) fp32 contiguous
    IOTA,                            # MASKED / HAS_DROPOUT: int32 (Nq,), IOTA[i] = i (the query rows)
    RNG,                             # HAS_DROPOUT: int64 (seed, offset) of the call
    stride_qb, stride_qn, stride_qh,
    stride_kb, stride_kn, stride_kh,
    stride_vb, stride_vn, stride_vh,
    stride_ob, stride_on, stride_oh,
    lse_rows,
    # PERSISTENT: each tensor as rows of its (B, N, H, D) view: element (b, t, h, :) is row
    # b * <x>_rb + h * <x>_rh + t, columns from h * <x>_ch (launchers.common._flat_view)
    q_rb, q_rh, q_ch, k_rb, k_rh, k_ch, v_rb, v_rh, v_ch, o_rb, o_rh, o_ch,
    batch, nheads, group, seqlen_q, seqlen_k, qk_scale, window_left, window_right, dropout_p, rng_rows, rng_stride,
    HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    NEG_SCALE: tl.constexpr, MASKED: tl.constexpr = False, HAS_LEFT: tl.constexpr = False,
    HAS_DROPOUT: tl.constexpr = False, HEAVY_FIRST: tl.constexpr = False, PERSISTENT: tl.constexpr = False,
    BLOCK_MAJOR: tl.constexpr = False,
):
    # One linear order of tiles (query blocks), the blocks of each (batch, head)
    # consecutive (see launchers/forward.FWD_ROWS_FIRST). PERSISTENT: a grid of P programs,
    # about one an SM, that deal the tiles out in rounds of P: round r is tiles [rP, rP + P),
    # program p takes tile rP + p in even rounds and rP + P - 1 - p in odd ones (a snake),
    # so the tiles in flight at once stay neighbours in that order, and under a mask (a
    # head's blocks heaviest first, HEAVY_FIRST) the heavy and light ones pair up. (Dealt
    # p, p + P, p + 2P, ..., program p got the blocks near p of every head: D = 256 causal
    # 16k 357-362 TFLOP/s against 524-566 for one tile a program, H200, 2026-11-30.) The
    # producer warpgroup loads the next tile's K / V while the consumers finish this one
    # (launchers.forward.WS_PERSISTENT).
    if PERSISTENT:
        # The descriptors are made once, over every (batch, head): each tensor as a 2-D
        # view of rows (stride_<x>n apart) whose (batch, head) is a row offset and a
        # column offset: heads side by side in a row for (B, N, H, D) memory, heads as
        # row ranges for (B, H, N, D) memory (launchers.common._flat_view). Made per tile
        # in the same global-scratch slots, a tile's descriptors overwrote the previous
        # tile's while its last bulk copies could still be queued: 29-87 of 42-276
        # persistent calls a case differed from one tile a program under a 3-process
        # stress (H200, 2026-11-30, bench/gpu/s16_persistent_stress.py).
        nheads_k = nheads // group
        q_desc = row_view_desc(Q, (batch - 1) * q_rb + (nheads - 1) * q_rh + seqlen_q, (nheads - 1) * q_ch + HEAD_DIM,
                               stride_qn, BLOCK_M, BLOCK_D)
        k_desc = row_view_desc(K, (batch - 1) * k_rb + (nheads_k - 1) * k_rh + seqlen_k,
                               (nheads_k - 1) * k_ch + HEAD_DIM, stride_kn, BLOCK_N, BLOCK_D)
        v_desc = row_view_desc(V, (batch - 1) * v_rb + (nheads_k - 1) * v_rh + seqlen_k,
                               (nheads_k - 1) * v_ch + HEAD_DIM, stride_vn, BLOCK_N, BLOCK_D)
        o_desc = row_view_desc(O, (batch - 1) * o_rb + (nheads - 1) * o_rh + seqlen_q, (nheads - 1) * o_ch + HEAD_DIM,
                               stride_on, BLOCK_M, BLOCK_D)
        lse_desc = vec_desc(LSE, lse_rows, BLOCK_M)
        iota_desc = lse_desc
        if MASKED or HAS_DROPOUT:
            iota_desc = vec_desc(IOTA, seqlen_q, BLOCK_M)
        n_tiles = batch * nheads * tl.cdiv(seqlen_q, BLOCK_M)
        P = tl.num_programs(0)
        pid = tl.program_id(0)
        rounds = n_tiles // P
        last = tl.where(rounds % 2 == 0, pid, P - 1 - pid)       # the position in the partial last round
        n_iter = rounds + tl.where(last < n_tiles - rounds * P, 1, 0)
        n_bh = batch * nheads
        n_blocks = tl.cdiv(seqlen_q, BLOCK_M)
        for r in tl.range(0, n_iter):
            tile = r * P + tl.where(r % 2 == 0, pid, P - 1 - pid)
            if BLOCK_MAJOR:
                # Block-major: the deal's order is every head's last block, then every
                # head's second last, ..., so a round's tiles cost about the same and the
                # snake evens what is left. (Head-major, a round of 132 at 16k covered one
                # head's blocks, heavy to light: D = 256 causal 16k 354 TFLOP/s against 535
                # for one tile a program, while 2k gained 12%; H200, 2026-11-30.) As a
                # head-major index, which _fwd_ws_tile turns heaviest first. Where a round
                # spans several heads the head-major snake already pairs heavy blocks with
                # light ones (launchers.forward.WS_HEAD_MAJOR_MAX_BLOCKS).
                tile = (tile % n_bh) * n_blocks + tile // n_bh
            _fwd_ws_tile(tile, q_desc, k_desc, v_desc, o_desc, lse_desc, iota_desc, Q, K, V, O, LSE, IOTA, RNG,
                         stride_qb, stride_qn, stride_qh, stride_kb, stride_kn, stride_kh,
                         stride_vb, stride_vn, stride_vh, stride_ob, stride_on, stride_oh, lse_rows,
                         q_rb, q_rh, q_ch, k_rb, k_rh, k_ch, v_rb, v_rh, v_ch, o_rb, o_rh, o_ch,
                         nheads, group, seqlen_q, seqlen_k, qk_scale, window_left, window_right, dropout_p,
                         rng_rows, rng_stride, HEAD_DIM, BLOCK_D, BLOCK_M, BLOCK_N, NEG_SCALE, MASKED, HAS_LEFT,
                         HAS_DROPOUT, HEAVY_FIRST, FLAT=True)
    else:
        _fwd_ws_tile(tl.program_id(0), Q, K, V, O, LSE, IOTA, Q, K, V, O, LSE, IOTA, RNG,
                     stride_qb, stride_qn, stride_qh, stride_kb, stride_kn, stride_kh,
                     stride_vb, stride_vn, stride_vh, stride_ob, stride_on, stride_oh, lse_rows,
                     q_rb, q_rh, q_ch, k_rb, k_rh, k_ch, v_rb, v_rh, v_ch, o_rb, o_rh, o_ch,
                     nheads, group, seqlen_q, seqlen_k, qk_scale, window_left, window_right, dropout_p,
                     rng_rows, rng_stride, HEAD_DIM, BLOCK_D, BLOCK_M, BLOCK_N, NEG_SCALE, MASKED, HAS_LEFT,
                     HAS_DROPOUT, HEAVY_FIRST, FLAT=False)


@triton.jit
def _fwd_ws_tile(
    tile, q_desc, k_desc, v_desc, o_desc, lse_desc, iota_desc, Q, K, V, O, LSE, IOTA, RNG,
    stride_qb, stride_qn, stride_qh, stride_kb, stride_kn, stride_kh,
    stride_vb, stride_vn, stride_vh, stride_ob, stride_on, stride_oh, lse_rows,
    q_rb, q_rh, q_ch, k_rb, k_rh, k_ch, v_rb, v_rh, v_ch, o_rb, o_rh, o_ch,
    nheads, group, seqlen_q, seqlen_k, qk_scale, window_left, window_right, dropout_p, rng_rows, rng_stride,
    HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    NEG_SCALE: tl.constexpr, MASKED: tl.constexpr, HAS_LEFT: tl.constexpr, HAS_DROPOUT: tl.constexpr,
    HEAVY_FIRST: tl.constexpr, FLAT: tl.constexpr,
):
    """One query block (tile) of the forward: the body of attn_fwd_ws_kernel. FLAT: the
    *_desc arguments are the kernel's descriptors over every (batch, head), the tile's
    rows and head found by offsets; otherwise (one tile a program) they are unused and
    the tile makes its own over its (batch, head) slices."""
    n_blocks = tl.cdiv(seqlen_q, BLOCK_M)
    pid_bh = tile // n_blocks
    b = pid_bh // nheads
    h = pid_bh % nheads
    block = tile % n_blocks
    if HEAVY_FIRST:
        # MASKED: the last query blocks see the most key tiles; blocks are dispatched in
        # order, so the heaviest go first (launchers.forward.WS_HEAVY_FIRST)
        block = n_blocks - 1 - block
    start_m = block * BLOCK_M
    hk = h // group

    if FLAT:
        # the kernel's row views: the tile's (batch, head) as a row offset and a column
        q_row = b * q_rb + h * q_rh
        k_row = b * k_rb + hk * k_rh
        v_row = b * v_rb + hk * v_rh
        o_row = b * o_rb + h * o_rh
        q_col = h * q_ch
        k_col = hk * k_ch
        v_col = hk * v_ch
        o_col = h * o_ch
    else:
        # this program's (rows, HEAD_DIM) slices; rows past the end read as 0, are never written
        q_desc = head_slice_desc(Q, b, h, stride_qb, stride_qh, stride_qn, seqlen_q, HEAD_DIM, BLOCK_M, BLOCK_D)
        k_desc = head_slice_desc(K, b, hk, stride_kb, stride_kh, stride_kn, seqlen_k, HEAD_DIM, BLOCK_N, BLOCK_D)
        v_desc = head_slice_desc(V, b, hk, stride_vb, stride_vh, stride_vn, seqlen_k, HEAD_DIM, BLOCK_N, BLOCK_D)
        o_desc = head_slice_desc(O, b, h, stride_ob, stride_oh, stride_on, seqlen_q, HEAD_DIM, BLOCK_M, BLOCK_D)
        lse_desc = vec_desc(LSE, lse_rows, BLOCK_M)
        if MASKED or HAS_DROPOUT:
            iota_desc = vec_desc(IOTA, seqlen_q, BLOCK_M)
        q_row = 0
        k_row = 0
        v_row = 0
        o_row = 0
        q_col = 0
        k_col = 0
        v_col = 0
        o_col = 0

    q = q_desc.load([q_row + start_m, q_col])                           # (BLOCK_M, BLOCK_D)
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)

    if MASKED or HAS_DROPOUT:
        # The query rows come from IOTA through a descriptor: rows from tl.arange are wrong
        # in the second consumer warpgroup (module doc), rows loaded like lse are right
        # (session 7, s7_ws_iota_probe.py; the MASKED variant, stressed in session 9).
        rows = iota_desc.load([start_m])                                # (BLOCK_M,)
        offs_n = tl.arange(0, BLOCK_N)
    n_lo = 0
    n_hi = seqlen_k
    if MASKED:
        # A bottom-right band, Nq <= Nk: row i sees keys j with d - window_left <= j <= d +
        # window_right, d = i + Nk - Nq (causal: window_right = 0, no left edge), so every
        # row sees its diagonal key d and no row is empty. One loop only, so every tile of
        # the block's band is masked.
        diag = rows + (seqlen_k - seqlen_q)                             # (BLOCK_M,) each row's diagonal key
        n_hi = tl.minimum(tl.cdiv(start_m + BLOCK_M + seqlen_k - seqlen_q + window_right, BLOCK_N) * BLOCK_N,
                          seqlen_k)
        if HAS_LEFT:
            n_lo = tl.maximum(start_m + seqlen_k - seqlen_q - window_left, 0) // BLOCK_N * BLOCK_N
    if HAS_DROPOUT:
        # The mask of element (i, j) is kernels.common.dropout_keep_keys(rk_i, ck_j, mk_j),
        # the keys hashed here as kernels/dropout_keys.py hashes its table (module doc:
        # why not read from it): rk at the counter rng_offset + (h * rng_rows + b * Nq +
        # row) * rng_stride of each row loaded above, and the in-group column keys, once;
        # per tile a group key (folded into rk) and multiplier (common.dropout_tile_keep).
        seed = tl.load(RNG)
        rng_row0 = tl.load(RNG + 1) + (h.to(tl.int64) * rng_rows + b * seqlen_q) * rng_stride
        rk = dropout_row_key(seed, rng_row0 + rows.to(tl.int64) * rng_stride)   # (BLOCK_M,)
        threshold = dropout_threshold(dropout_p)
        cs_in, cs_group, cs_mult = dropout_col_seeds(seed)
        # In-group keys once when a tile is a whole group (D = 128: 128-key tiles); the
        # 64-key tiles of D = 256 hash theirs per tile: two precomputed halves made this
        # kernel spill (132 bytes, sm_90a), and one call of 4759 under the stress came out
        # different from fwd.py that way (H200, 2026-11-29, s10_dropout.py).
        CB_ONCE: tl.constexpr = BLOCK_N == DROPOUT_GROUP
        cb = 0
        if CB_ONCE:
            cb = dropout_in_group_key(cs_in, tl.arange(0, BLOCK_N))     # (BLOCK_N,)

    # every key tile lies wholly inside the sequence (seqlen_k is a multiple of BLOCK_N)
    for start_n in tl.range(n_lo, n_hi, BLOCK_N, warp_specialize=True):
        k = k_desc.load([k_row + start_n, k_col])                       # (BLOCK_N, BLOCK_D)
        qk = tl.dot(q, tl.trans(k))                                     # (BLOCK_M, BLOCK_N)
        if MASKED:
            visible = (start_n + offs_n)[None, :] <= (diag + window_right)[:, None]
            if HAS_LEFT:
                visible = visible & ((start_n + offs_n)[None, :] >= (diag - window_left)[:, None])
            qk = tl.where(visible, qk, ws_hidden_score(NEG_SCALE))
        # HAS_LEFT: a row's first tiles may hide all its keys (its window starts later)
        p, alpha, m_new, l_i = ws_softmax_step(qk, m_i, l_i, qk_scale, NEG_SCALE, HAS_LEFT)
        v = v_desc.load([v_row + start_n, v_col])                       # (BLOCK_N, BLOCK_D)
        if HAS_DROPOUT:
            keep = dropout_tile_keep(rk, cb, cs_in, cs_group, cs_mult, start_n, threshold, BLOCK_N, CB_ONCE)
            p = p * keep                                                # l_i kept all of p
        acc = acc * alpha[:, None]
        acc = tl.dot(p.to(v.dtype), v, acc)                             # accumulates in place
        m_i = m_new

    # the one normalisation (every row saw at least one key: l_i >= 1)
    lse = (m_i + tl.log2(l_i)) * LN2
    l_out = l_i
    if HAS_DROPOUT:
        l_out = l_i * (1.0 - dropout_p)                                  # kept values scale by 1 / (1 - p)
    o_desc.store([o_row + start_m, o_col], (acc / l_out[:, None]).to(O.dtype.element_ty))
    # The lse leaves through a descriptor too, over the flat (B * H * Nq,) buffer: a pointer
    # store indexed by tl.arange rows put the rows of the second consumer warpgroup in
    # the wrong place (H200, 2026-11-29: lse errors of inf, the output right). Query
    # blocks never straddle two heads: seqlen_q is a multiple of BLOCK_M here.
    lse_desc.store([pid_bh * seqlen_q + start_m], lse)
