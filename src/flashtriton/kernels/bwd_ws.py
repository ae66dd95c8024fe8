"""FlashAttention-2 dK/dV and dQ kernels, warp-specialized for Hopper (Triton 3.6 on sm_90).

The same math as kernels/bwd.py's attn_bwd_dkdv_kernel, for the calls that
kernels/fwd_ws.py computes whole (no mask at all: not causal, no window, Nq and Nk
multiples of the tiles), or (PARTIAL) the fully visible tiles of a masked call, whose
masked rest bwd.py's RESUME launches add; no ALiBi, softcap or varlen; dropout takes its
row and column keys from the call's table (kernels/dropout_keys.py) through 1-D
descriptors, and hashes the group multiplier of its key tile from the table's last entry. One program owns BLOCK_N
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

PERSISTENT (both kernels): about one program an SM loops over the call's tiles (key
blocks for dK/dV, query blocks for dQ) in snake rounds, as kernels/fwd_ws.py does; the
tile bodies are _dkdv_ws_tile and _dq_ws_tile. Every descriptor is then made once, before
that loop, over the whole tensor read as a (B * N, H-span) matrix (rows batch * N +
token, columns head * stride_h; launchers.common._flat_rows checks the layout), and a
tile finds its (batch, head) by row and column offsets: made per tile, descriptors sit
in the same global-scratch slots every tile, and one warpgroup rewrote them for its next
tile while another still copied through them (the persistent forward, H200, 2026-11-30).
One tile a program (PERSISTENT=False) makes its descriptors per tile, as before.
On the H200 (2026-11-30, session 17) the persistent launches give bitwise the gradients
of one tile a program with TILE_STAGES 1 at BLOCK_D 128 (2 gave NaN rows there) and 2 at
64, and only for Nq / Nk multiples of the tiles (a ragged last block's rows run into the
next batch's): launchers.backward._tile_stages, _ws_flat. The dK/dV kernel (one tile a
program too) gave NaN dk / dv in ~3% of calls at D = 128, N = 8k / 16k, from its 1-D
descriptor loads of lse / delta (pointer loads: 0 in 5457 calls; descriptors made on the
host: 4 in 3484; session 18): VEC_PTR, launchers.backward._dkdv_vec_ptr.

Per query tile of dK/dV (transposed layout: keys x queries, as bwd.py):
    P^T = exp2(K Q^T * scale * log2e - lse * log2e),   dV += P^T dO,
    dP^T = V dO^T,   dS^T = P^T * (dP^T - delta),      dK += dS^T Q   (times scale at the end)
"""
import triton
import triton.language as tl

from .common import (DROPOUT_GROUP, LOG2E, NO_SPECIALIZE, bulk_key_tiles, bulk_query_tiles, dropout_group_mult,
                     dropout_keep_scale, dropout_threshold, head_slice_desc, row_view_desc, vec_desc)


@triton.jit
def _snake_rounds(n_tiles):
    """(P, pid, n_iter) of a persistent launch over n_tiles tiles: P programs deal them in
    rounds of P, round r being tiles [rP, rP + P), program pid taking tile rP + pid in even
    rounds and rP + P - 1 - pid in odd ones (a snake: _snake_tile); n_iter rounds for this
    program (one more where the partial last round reaches its position)."""
    P = tl.num_programs(0)
    pid = tl.program_id(0)
    rounds = n_tiles // P
    last = tl.where(rounds % 2 == 0, pid, P - 1 - pid)       # the position in the partial last round
    n_iter = rounds + tl.where(last < n_tiles - rounds * P, 1, 0)
    return P, pid, n_iter


@triton.jit
def _snake_tile(r, P, pid, n_bh, n_blocks, BLOCK_MAJOR: tl.constexpr):
    """The tile of round r (see _snake_rounds), as a head-major index (bh * n_blocks +
    block). BLOCK_MAJOR: the deal's order is every head's block 0, then every head's block
    1, ... (under a mask each kernel's block 0 is its heaviest: dK/dV's first keys see the
    most queries, and the dQ tile turns its index heaviest first), so a round's tiles cost
    about the same (launchers.backward.WS_HEAD_MAJOR_MAX_BLOCKS, after the forward's deal)."""
    tile = r * P + tl.where(r % 2 == 0, pid, P - 1 - pid)
    if BLOCK_MAJOR:
        tile = (tile % n_bh) * n_blocks + tile // n_bh
    return tile


@triton.jit
def _flat_input_descs(Q, K, V, DO, LSE, DELTA, KEYS, stride_qn, stride_qh, stride_kn, stride_kh, stride_vn, stride_vh,
                      stride_don, stride_doh, lse_rows, keys_total, batch, nheads, nheads_k, seqlen_q, seqlen_k,
                      HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                      HAS_DROPOUT: tl.constexpr):
    """The persistent kernels' input descriptors, made once over every (batch, head):
    q, k, v, dO as (B * N, H-span) rows, the head a column offset (module doc: per-tile
    descriptors raced in the persistent forward); lse, delta and the dropout key table
    (keys_n / keys_m: blocks of BLOCK_N / BLOCK_M; lse's stands in without dropout) 1-D."""
    q_desc = row_view_desc(Q, batch * seqlen_q, (nheads - 1) * stride_qh + HEAD_DIM, stride_qn, BLOCK_M, BLOCK_D)
    k_desc = row_view_desc(K, batch * seqlen_k, (nheads_k - 1) * stride_kh + HEAD_DIM, stride_kn, BLOCK_N, BLOCK_D)
    v_desc = row_view_desc(V, batch * seqlen_k, (nheads_k - 1) * stride_vh + HEAD_DIM, stride_vn, BLOCK_N, BLOCK_D)
    do_desc = row_view_desc(DO, batch * seqlen_q, (nheads - 1) * stride_doh + HEAD_DIM, stride_don, BLOCK_M, BLOCK_D)
    lse_desc = vec_desc(LSE, lse_rows, BLOCK_M)
    delta_desc = vec_desc(DELTA, lse_rows, BLOCK_M)
    keys_desc_n = lse_desc                                              # (unused without dropout)
    keys_desc_m = lse_desc
    if HAS_DROPOUT:
        keys_desc_n = vec_desc(KEYS, keys_total, BLOCK_N)
        keys_desc_m = vec_desc(KEYS, keys_total, BLOCK_M)
    return q_desc, k_desc, v_desc, do_desc, lse_desc, delta_desc, keys_desc_n, keys_desc_m


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
    batch, nheads, nheads_k, group, seqlen_q, seqlen_k, softmax_scale, qk_scale, dropout_p, keys_total, rng_rows,
    window_left, window_right,
    HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    HAS_DROPOUT: tl.constexpr = False, PARTIAL: tl.constexpr = False, HAS_RIGHT: tl.constexpr = False,
    HAS_LEFT: tl.constexpr = False, PERSISTENT: tl.constexpr = False, BLOCK_MAJOR: tl.constexpr = False,
    TILE_STAGES: tl.constexpr = 2, VEC_PTR: tl.constexpr = 0,
):
    # One linear order of tiles (key blocks), the blocks of each (batch, KV head)
    # consecutive: one tile a program, or PERSISTENT, about one program an SM dealing them
    # out in snake rounds (_snake_rounds; the producer warpgroup loads the next tile's q / dO
    # while the consumers finish this one).
    if PERSISTENT:
        # every descriptor once, over every (batch, head): (B * N, H-span) rows, the head a
        # column offset (module doc: per-tile descriptors raced in the persistent forward)
        q_desc, k_desc, v_desc, do_desc, lse_desc, delta_desc, keys_desc_n, keys_desc_m = _flat_input_descs(
            Q, K, V, DO, LSE, DELTA, KEYS, stride_qn, stride_qh, stride_kn, stride_kh, stride_vn, stride_vh,
            stride_don, stride_doh, lse_rows, keys_total, batch, nheads, nheads_k, seqlen_q, seqlen_k,
            HEAD_DIM, BLOCK_D, BLOCK_M, BLOCK_N, HAS_DROPOUT)
        dk_desc = row_view_desc(DK, batch * seqlen_k, (nheads_k - 1) * stride_dkh + HEAD_DIM, stride_dkn, BLOCK_N,
                                BLOCK_D)
        dv_desc = row_view_desc(DV, batch * seqlen_k, (nheads_k - 1) * stride_dvh + HEAD_DIM, stride_dvn, BLOCK_N,
                                BLOCK_D)
        n_bh = batch * nheads_k
        n_blocks = tl.cdiv(seqlen_k, BLOCK_N)
        P, pid, n_iter = _snake_rounds(n_bh * n_blocks)
        # TILE_STAGES: buffers for the loads made once a tile (here k and v): 2 lets the
        # producer load the next tile's while the consumers finish this one, at 64 KB of
        # shared memory more at D = 128 (launchers.backward.WS_PERSISTENT_TILE_STAGES)
        for r in tl.range(0, n_iter, num_stages=TILE_STAGES):
            _dkdv_ws_tile(_snake_tile(r, P, pid, n_bh, n_blocks, BLOCK_MAJOR),
                          q_desc, k_desc, v_desc, do_desc, lse_desc, delta_desc, dk_desc, dv_desc,
                          keys_desc_n, keys_desc_m, Q, K, V, DO, LSE, DELTA, DK, DV, KEYS,
                          stride_qb, stride_qn, stride_qh, stride_kb, stride_kn, stride_kh,
                          stride_vb, stride_vn, stride_vh, stride_dob, stride_don, stride_doh,
                          stride_dkb, stride_dkn, stride_dkh, stride_dvb, stride_dvn, stride_dvh,
                          lse_rows, lse_stride, nheads, nheads_k, group, seqlen_q, seqlen_k, softmax_scale,
                          qk_scale, dropout_p, keys_total, rng_rows, window_left, window_right,
                          HEAD_DIM, BLOCK_D, BLOCK_M, BLOCK_N, HAS_DROPOUT, PARTIAL, HAS_RIGHT, HAS_LEFT, FLAT=True,
                          VEC_PTR=VEC_PTR)
    else:
        _dkdv_ws_tile(tl.program_id(0), Q, K, V, DO, LSE, DELTA, DK, DV, KEYS, KEYS,
                      Q, K, V, DO, LSE, DELTA, DK, DV, KEYS,
                      stride_qb, stride_qn, stride_qh, stride_kb, stride_kn, stride_kh,
                      stride_vb, stride_vn, stride_vh, stride_dob, stride_don, stride_doh,
                      stride_dkb, stride_dkn, stride_dkh, stride_dvb, stride_dvn, stride_dvh,
                      lse_rows, lse_stride, nheads, nheads_k, group, seqlen_q, seqlen_k, softmax_scale,
                      qk_scale, dropout_p, keys_total, rng_rows, window_left, window_right,
                      HEAD_DIM, BLOCK_D, BLOCK_M, BLOCK_N, HAS_DROPOUT, PARTIAL, HAS_RIGHT, HAS_LEFT, FLAT=False,
                      VEC_PTR=VEC_PTR)


@triton.jit
def _dkdv_ws_tile(
    tile, q_desc, k_desc, v_desc, do_desc, lse_desc, delta_desc, dk_desc, dv_desc, keys_desc_n, keys_desc_m,
    Q, K, V, DO, LSE, DELTA, DK, DV, KEYS,
    stride_qb, stride_qn, stride_qh, stride_kb, stride_kn, stride_kh,
    stride_vb, stride_vn, stride_vh, stride_dob, stride_don, stride_doh,
    stride_dkb, stride_dkn, stride_dkh, stride_dvb, stride_dvn, stride_dvh,
    lse_rows, lse_stride, nheads, nheads_k, group, seqlen_q, seqlen_k, softmax_scale, qk_scale, dropout_p,
    keys_total, rng_rows, window_left, window_right,
    HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    HAS_DROPOUT: tl.constexpr, PARTIAL: tl.constexpr, HAS_RIGHT: tl.constexpr, HAS_LEFT: tl.constexpr,
    FLAT: tl.constexpr, VEC_PTR: tl.constexpr = 0,
):
    """One key block (tile) of dK / dV: the body of attn_bwd_dkdv_ws_kernel. VEC_PTR: the
    loop's 1-D loads (lse, delta, dropout's row keys) by pointers instead of descriptors
    (launchers.backward._dkdv_vec_ptr: the descriptor loads gave NaN in long loops at
    D = 128): 1 in the iteration, after its first dot; 2 one iteration ahead. FLAT: the
    *_desc arguments are the kernel's descriptors over every (batch, head), the tile's
    rows and heads found by offsets; otherwise (one tile a program) they are unused and
    the tile makes its own over its batch's slices."""
    n_blocks = tl.cdiv(seqlen_k, BLOCK_N)
    pid_bh = tile // n_blocks
    b = pid_bh // nheads_k
    hk = pid_bh % nheads_k
    start_n = (tile % n_blocks) * BLOCK_N

    if FLAT:
        # (B * N, H-span) views: batch b's rows start at b * N, a head at its column
        q_row = b * seqlen_q
        k_row = b * seqlen_k
        q_hcol = stride_qh                                              # column of head h: h * q_hcol
        do_hcol = stride_doh
        k_col = hk * stride_kh
        v_col = hk * stride_vh
        dk_col = hk * stride_dkh
        dv_col = hk * stride_dvh
    else:
        k_desc = head_slice_desc(K, b, hk, stride_kb, stride_kh, stride_kn, seqlen_k, HEAD_DIM, BLOCK_N, BLOCK_D)
        v_desc = head_slice_desc(V, b, hk, stride_vb, stride_vh, stride_vn, seqlen_k, HEAD_DIM, BLOCK_N, BLOCK_D)
        # q and dO of batch b as (Nq, H * D): a tile is the box [BLOCK_M, BLOCK_D] at column
        # h * D (the launcher guarantees stride_qh == stride_doh == HEAD_DIM == BLOCK_D). A 3-D
        # (Nq, H, D) descriptor with a [BLOCK_M, 1, BLOCK_D] box and a reshape gave wrong dK and
        # dV on the H200 under warp_specialize (right without it; Triton 3.6, 2026-11-29,
        # bench/gpu/s7_dk_probe.py).
        q_desc = tl.make_tensor_descriptor(Q + b.to(tl.int64) * stride_qb, shape=[seqlen_q, nheads * HEAD_DIM],
                                           strides=[stride_qn, 1], block_shape=[BLOCK_M, BLOCK_D])
        do_desc = tl.make_tensor_descriptor(DO + b.to(tl.int64) * stride_dob, shape=[seqlen_q, nheads * HEAD_DIM],
                                            strides=[stride_don, 1], block_shape=[BLOCK_M, BLOCK_D])
        lse_desc = vec_desc(LSE, lse_rows, BLOCK_M)
        delta_desc = vec_desc(DELTA, lse_rows, BLOCK_M)
        q_row = 0
        k_row = 0
        q_hcol = HEAD_DIM
        do_hcol = HEAD_DIM
        k_col = 0
        v_col = 0
        dk_col = 0
        dv_col = 0

    k = k_desc.load([k_row + start_n, k_col])                           # (BLOCK_N, BLOCK_D)
    v = v_desc.load([k_row + start_n, v_col])
    if HAS_DROPOUT:
        # table: [ck of seqlen_k columns | rk of (head, b * seqlen_q + row), head-major]
        if not FLAT:
            keys_desc_n = vec_desc(KEYS, keys_total, BLOCK_N)
            keys_desc_m = vec_desc(KEYS, keys_total, BLOCK_M)
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
    # VEC_PTR 2: the loop's lse / delta one iteration ahead (the first tile's here), so a
    # load's latency hides behind the iteration's last three dots (unused otherwise)
    offs_n0 = (b * nheads + hk * group) * lse_stride + m_lo + tl.arange(0, BLOCK_M)
    lse_nx = tl.load(LSE + offs_n0, mask=offs_n0 < lse_rows, other=0.0) * LOG2E
    delta_nx = tl.load(DELTA + offs_n0, mask=offs_n0 < lse_rows, other=0.0)
    # every such query tile of every head of the GQA group, in one loop: t -> (head, tile)
    for t in tl.range(0, group * m_tiles, warp_specialize=True):
        h = hk * group + t // m_tiles
        start_m = m_lo + (t % m_tiles) * BLOCK_M
        q = q_desc.load([q_row + start_m, h * q_hcol])                  # (BLOCK_M, BLOCK_D)
        do = do_desc.load([q_row + start_m, h * do_hcol])
        row = (b * nheads + h) * lse_stride + start_m                   # flat (B, H, rows) index
        offs_m = row + tl.arange(0, BLOCK_M)
        if VEC_PTR == 0:
            lse2 = lse_desc.load([row]) * LOG2E                         # (BLOCK_M,)
            delta = delta_desc.load([row])
        qkT = tl.dot(k, tl.trans(q))                                    # (BLOCK_N, BLOCK_M)
        if VEC_PTR == 1:
            # after the dot, not before: no registers held across it (0 spill bytes
            # against 68 for loads before it at D = 128, the same speed)
            lse2 = tl.load(LSE + offs_m, mask=offs_m < lse_rows, other=0.0) * LOG2E
            delta = tl.load(DELTA + offs_m, mask=offs_m < lse_rows, other=0.0)
        if VEC_PTR == 2:
            lse2 = lse_nx
            delta = delta_nx
            t1 = t + 1
            offs_n1 = (b * nheads + hk * group + t1 // m_tiles) * lse_stride + m_lo + (t1 % m_tiles) * BLOCK_M \
                + tl.arange(0, BLOCK_M)
            ok1 = (offs_n1 < lse_rows) & (t1 < group * m_tiles)
            lse_nx = tl.load(LSE + offs_n1, mask=ok1, other=0.0) * LOG2E
            delta_nx = tl.load(DELTA + offs_n1, mask=ok1, other=0.0)
        pT = tl.exp2(qkT * qk_scale - lse2[None, :])                    # normalised probabilities
        if HAS_DROPOUT:
            # 1 / (1 - p) = s leaves the loop: dV = s * sum(keep * P) dO, and with dP' = keep *
            # dP, dS = P (s dP' - delta) = s * (P_kept dP - P (1 - p) delta); dK and dV scale
            # once. The mask is a float (kernels.common.dropout_keep_scale) with one use.
            rk_at = seqlen_k + h * rng_rows + b * seqlen_q + start_m
            if VEC_PTR > 0:
                offs_rk = rk_at + tl.arange(0, BLOCK_M)
                rk = tl.load(KEYS + offs_rk, mask=offs_rk < keys_total, other=0).to(tl.uint32, bitcast=True)
            else:
                rk = keys_desc_m.load([rk_at]).to(tl.uint32, bitcast=True)
            pT_kept = pT * dropout_keep_scale(rk[None, :], ck[:, None], mk, threshold)
            dv = tl.dot(pT_kept.to(do.dtype), do, dv)
            dpT = tl.dot(v, tl.trans(do))                               # (BLOCK_N, BLOCK_M)
            dsT = pT_kept * dpT - pT * (delta * keep_frac)[None, :]
        else:
            dv = tl.dot(pT.to(do.dtype), do, dv)
            dpT = tl.dot(v, tl.trans(do))                               # (BLOCK_N, BLOCK_M)
            dsT = pT * (dpT - delta[None, :])
        dk = tl.dot(dsT.to(q.dtype), q, dk)

    if not FLAT:
        dk_desc = head_slice_desc(DK, b, hk, stride_dkb, stride_dkh, stride_dkn, seqlen_k, HEAD_DIM, BLOCK_N, BLOCK_D)
        dv_desc = head_slice_desc(DV, b, hk, stride_dvb, stride_dvh, stride_dvn, seqlen_k, HEAD_DIM, BLOCK_N, BLOCK_D)
    if HAS_DROPOUT:
        dk = dk / keep_frac                                             # the loop's 1 / (1 - p), once
        dv = dv / keep_frac
    if PARTIAL:
        dk_desc.store([k_row + start_n, dk_col], dk.to(DK.dtype.element_ty))   # RESUME applies softmax_scale once
    else:
        dk_desc.store([k_row + start_n, dk_col], (dk * softmax_scale).to(DK.dtype.element_ty))
    dv_desc.store([k_row + start_n, dv_col], dv.to(DV.dtype.element_ty))


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
    batch, nheads, group, seqlen_q, seqlen_k, softmax_scale, qk_scale, dropout_p, keys_total, rng_rows,
    window_left, window_right,
    HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    HAS_DROPOUT: tl.constexpr = False, PARTIAL: tl.constexpr = False, HAS_RIGHT: tl.constexpr = False,
    HAS_LEFT: tl.constexpr = False, HEAVY_FIRST: tl.constexpr = False, PERSISTENT: tl.constexpr = False,
    BLOCK_MAJOR: tl.constexpr = False, TILE_STAGES: tl.constexpr = 2,
):
    # One linear order of tiles (query blocks), the blocks of each (batch, head)
    # consecutive: one tile a program, or PERSISTENT, dealt in snake rounds as the dK/dV
    # kernel's. Under a mask (HEAVY_FIRST) _dq_ws_tile turns a head's blocks heaviest first,
    # so the head-major snake pairs one head's heavy blocks with another's light ones where
    # a round spans several heads; BLOCK_MAJOR deals every head's heaviest block first.
    if PERSISTENT:
        # every descriptor once, over every (batch, head) (see the dK/dV kernel)
        q_desc, k_desc, v_desc, do_desc, lse_desc, delta_desc, keys_desc_n, keys_desc_m = _flat_input_descs(
            Q, K, V, DO, LSE, DELTA, KEYS, stride_qn, stride_qh, stride_kn, stride_kh, stride_vn, stride_vh,
            stride_don, stride_doh, lse_rows, keys_total, batch, nheads, nheads // group, seqlen_q, seqlen_k,
            HEAD_DIM, BLOCK_D, BLOCK_M, BLOCK_N, HAS_DROPOUT)
        dq_desc = row_view_desc(DQ, batch * seqlen_q, (nheads - 1) * stride_dqh + HEAD_DIM, stride_dqn, BLOCK_M,
                                BLOCK_D)
        n_bh = batch * nheads
        n_blocks = tl.cdiv(seqlen_q, BLOCK_M)
        P, pid, n_iter = _snake_rounds(n_bh * n_blocks)
        for r in tl.range(0, n_iter, num_stages=TILE_STAGES):      # (q and dO: see the dK/dV kernel)
            _dq_ws_tile(_snake_tile(r, P, pid, n_bh, n_blocks, BLOCK_MAJOR),
                        q_desc, k_desc, v_desc, do_desc, lse_desc, delta_desc, dq_desc, keys_desc_m, keys_desc_n,
                        Q, K, V, DO, LSE, DELTA, DQ, KEYS,
                        stride_qb, stride_qn, stride_qh, stride_kb, stride_kn, stride_kh,
                        stride_vb, stride_vn, stride_vh, stride_dob, stride_don, stride_doh,
                        stride_dqb, stride_dqn, stride_dqh,
                        lse_rows, lse_stride, nheads, group, seqlen_q, seqlen_k, softmax_scale, qk_scale, dropout_p,
                        keys_total, rng_rows, window_left, window_right,
                        HEAD_DIM, BLOCK_D, BLOCK_M, BLOCK_N, HAS_DROPOUT, PARTIAL, HAS_RIGHT, HAS_LEFT, HEAVY_FIRST,
                        FLAT=True)
    else:
        _dq_ws_tile(tl.program_id(0), Q, K, V, DO, LSE, DELTA, DQ, KEYS, KEYS,
                    Q, K, V, DO, LSE, DELTA, DQ, KEYS,
                    stride_qb, stride_qn, stride_qh, stride_kb, stride_kn, stride_kh,
                    stride_vb, stride_vn, stride_vh, stride_dob, stride_don, stride_doh,
                    stride_dqb, stride_dqn, stride_dqh,
                    lse_rows, lse_stride, nheads, group, seqlen_q, seqlen_k, softmax_scale, qk_scale, dropout_p,
                    keys_total, rng_rows, window_left, window_right,
                    HEAD_DIM, BLOCK_D, BLOCK_M, BLOCK_N, HAS_DROPOUT, PARTIAL, HAS_RIGHT, HAS_LEFT, HEAVY_FIRST,
                    FLAT=False)


@triton.jit
def _dq_ws_tile(
    tile, q_desc, k_desc, v_desc, do_desc, lse_desc, delta_desc, dq_desc, keys_desc_m, keys_desc_n,
    Q, K, V, DO, LSE, DELTA, DQ, KEYS,
    stride_qb, stride_qn, stride_qh, stride_kb, stride_kn, stride_kh,
    stride_vb, stride_vn, stride_vh, stride_dob, stride_don, stride_doh,
    stride_dqb, stride_dqn, stride_dqh,
    lse_rows, lse_stride, nheads, group, seqlen_q, seqlen_k, softmax_scale, qk_scale, dropout_p,
    keys_total, rng_rows, window_left, window_right,
    HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    HAS_DROPOUT: tl.constexpr, PARTIAL: tl.constexpr, HAS_RIGHT: tl.constexpr, HAS_LEFT: tl.constexpr,
    HEAVY_FIRST: tl.constexpr, FLAT: tl.constexpr,
):
    """One query block (tile) of dQ: the body of attn_bwd_dq_ws_kernel (FLAT: as
    _dkdv_ws_tile's)."""
    n_blocks = tl.cdiv(seqlen_q, BLOCK_M)
    pid_bh = tile // n_blocks
    b = pid_bh // nheads
    h = pid_bh % nheads
    hk = h // group
    block = tile % n_blocks
    if HEAVY_FIRST:
        # causal-like masks: the last query blocks see the most key tiles; blocks are
        # dispatched in order, so the heaviest go first (launchers.backward.WS_HEAVY_FIRST)
        block = n_blocks - 1 - block
    start_m = block * BLOCK_M

    if FLAT:
        # (B * N, H-span) views: batch b's rows start at b * N, a head at its column
        q_row = b * seqlen_q
        k_row = b * seqlen_k
        q_col = h * stride_qh
        do_col = h * stride_doh
        k_col = hk * stride_kh
        v_col = hk * stride_vh
        dq_col = h * stride_dqh
    else:
        q_desc = head_slice_desc(Q, b, h, stride_qb, stride_qh, stride_qn, seqlen_q, HEAD_DIM, BLOCK_M, BLOCK_D)
        do_desc = head_slice_desc(DO, b, h, stride_dob, stride_doh, stride_don, seqlen_q, HEAD_DIM, BLOCK_M, BLOCK_D)
        k_desc = head_slice_desc(K, b, hk, stride_kb, stride_kh, stride_kn, seqlen_k, HEAD_DIM, BLOCK_N, BLOCK_D)
        v_desc = head_slice_desc(V, b, hk, stride_vb, stride_vh, stride_vn, seqlen_k, HEAD_DIM, BLOCK_N, BLOCK_D)
        lse_desc = vec_desc(LSE, lse_rows, BLOCK_M)
        delta_desc = vec_desc(DELTA, lse_rows, BLOCK_M)
        q_row = 0
        k_row = 0
        q_col = 0
        do_col = 0
        k_col = 0
        v_col = 0
        dq_col = 0

    q = q_desc.load([q_row + start_m, q_col])                           # (BLOCK_M, BLOCK_D)
    do = do_desc.load([q_row + start_m, do_col])
    lse2 = lse_desc.load([pid_bh * lse_stride + start_m]) * LOG2E       # (BLOCK_M,)
    delta = delta_desc.load([pid_bh * lse_stride + start_m])
    if HAS_DROPOUT:
        if not FLAT:
            keys_desc_m = vec_desc(KEYS, keys_total, BLOCK_M)
            keys_desc_n = vec_desc(KEYS, keys_total, BLOCK_N)
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
        k = k_desc.load([k_row + start_n, k_col])                       # (BLOCK_N, BLOCK_D)
        v = v_desc.load([k_row + start_n, v_col])
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

    if not FLAT:
        dq_desc = head_slice_desc(DQ, b, h, stride_dqb, stride_dqh, stride_dqn, seqlen_q, HEAD_DIM, BLOCK_M, BLOCK_D)
    if HAS_DROPOUT:
        dq = dq / keep_frac
    if PARTIAL:
        dq_desc.store([q_row + start_m, dq_col], dq.to(DQ.dtype.element_ty))   # RESUME applies softmax_scale once
    else:
        dq_desc.store([q_row + start_m, dq_col], (dq * softmax_scale).to(DQ.dtype.element_ty))
