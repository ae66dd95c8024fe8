"""FlashAttention-2 backward, dK/dV pass, for Hopper written in Gluon, hand-scheduled.

Status (2026-12-01, Triton 3.6.0): written and compiled offline for sm_90a in session 24
(bench/gluon_bwd_compile.py); its GPU tests pass on the H200 since session 25 (3 stages
causal D = 128 gave a wrong dk and is refused); not routed: the fused backward
(bwd_gluon_fused.py) supersedes it (host
side launchers/backward_gluon.py; GPU tests tests/test_bwd_gluon.py; the first GPU run and
the A/B against the library's dK/dV kernel: bench/gpu/s24_gluon_bwd_ab.py).

What it computes: exactly kernels/bwd_ws.py's attn_bwd_dkdv_ws_kernel on its dense path
(no dropout, ALiBi, softcap, varlen or window): for every key j of a (batch, KV head)
    dV_j = sum_i P_ij dO_i,   dK_j = softmax_scale * sum_i P_ij (dP_ij - delta_i) Q_i,
    P_ij = exp2(S_ij * softmax_scale * log2(e) - lse_i * log2(e)),  S_ij = Q_i . K_j,
    dP_ij = dO_i . V_j,  delta_i = rowsum(dO_i * O_i)  (launchers.backward's preprocess,
    bwd.py's bwd_preprocess_kernel),
the sums running over every query row i of every query head of the KV head's GQA group
(Hk < H: query head h reads KV head h // (H / Hk)); the group is looped inside the CTA, as
attn_bwd_dkdv_ws_kernel does (its one flattened loop over group x query tiles), so dK / dV
are written once, with no scratch and no host reduction. lse is the forward's natural-log
logsumexp (B, H, Nq) fp32, +inf for a row that sees no key: exp2(. - inf) = 0 makes such a
row's P = 0 and its dS = 0 with no special case. CAUSAL: the library's bottom-right mask,
query i sees key j iff j <= i + Nk - Nq.

Design: one CTA per (key block of BLOCK_N = 128 keys, batch x KV head), grid (Nk / 128,
B * Hk), three partitions (gl.warp_specialize), as kernels/fwd_gluon.py:
  - two consumer warpgroups (the default partition, 4 warps, and a 4-warp worker), each
    owning HALF_N = 64 keys (rows of K, V, dK, dV), with its dK and dV in fp32 wgmma
    accumulators (HALF_N x D each: 64 + 64 registers a thread at D = 128), 240 registers
    (setmaxnreg) each;
  - a load partition (1 warp, 24 registers): K and V once (both halves, kv_bar), then for
    every query tile (BLOCK_M = 64 rows) of every head of the group, Q and dO (BLOCK_M x D
    boxes of the (B * Nq, H * D) views) through a ring of NUM_STAGES stages (2 at D = 128:
    129 KB of shared memory; 4 at D = 64: 97 KB), and, unless VEC_PTR, lse and delta
    (BLOCK_M fp32 boxes of 1-D (B * H * Nq) views) into the same stage, all on one mbarrier
    (ready[s]).
  Per query tile, in each consumer (shapes per warpgroup):
      S^T  = K_half Q^T            (HALF_N, BLOCK_M)  A: K half (smem), B: Q stage permuted
      dP^T = V_half dO^T           (HALF_N, BLOCK_M)  A: V half (smem), B: dO stage permuted
      P^T  = exp2(S^T * qk_scale - lse * log2(e))    (lse a column vector)
      dV  += P^T dO                (HALF_N, D)        A: P^T in registers (DotOperandLayout)
      dS^T = P^T * (dP^T - delta)
      dK  += dS^T Q                (HALF_N, D)        A: dS^T in registers
  No P / dS round trip through shared memory: in this pass both are only ever the A operand
  of a wgmma, which may come from registers (B must be shared memory; Q and dO are B
  operands as they lie, and permuted for S^T / dP^T). Overlap inside a consumer: S^T and
  dP^T are issued together (async), the wait leaves dP^T in flight while P^T is computed;
  dV is issued before dS^T is computed, so it runs under that math; dK is issued last and
  both are waited for before the stage is released. The other consumer's wgmmas fill the
  gaps (both share the tensor cores; ~2k cycles of wgmma a tile at D = 128 against ~150 of
  exp2 / FMA work, so the pass is tensor-bound when the two warpgroups interleave).
  Epilogue: dK * softmax_scale and dV to 16 bits, stored into the consumer's own K / V
  half of shared memory (no other warpgroup reads it, and its last wgmma is done), then
  TMA to dk / dv.
  VEC_PTR (the launcher's default): lse and delta by pointer loads in the consumers, one
  value a thread (a 1-D blocked layout: 2 registers across the stage wait and the S^T /
  dP^T wgmmas), issued before the stage's wait and moved into the accumulator's column
  layout where used (gl.convert_layout: a shared-memory round trip and a warpgroup
  barrier each). Why: the library's dK/dV kernel gave NaN in 0.1-3% of calls with 1-D TMA
  loads of lse / delta and none with pointer loads (bench/NOTES.md "The dK/dV NaN", cause
  not found; that kernel's schedule is Triton's automatic one). VEC_PTR=False keeps the
  TMA path for the A/B. Loaded straight into the column layout, the pointer loads cost 32
  registers (and 16 64-bit addresses) a tile: 96 spill bytes at D = 128.
  OVERLAP (non-causal, NUM_STAGES >= 2; for D = 64): tile g's dV / dK wgmmas stay in
  flight into tile g + 1, which issues S^T_{g+1} / dP^T_{g+1} first, then retires them and
  releases stage g (_dkdv_loop_overlap). At D = 128 it does not fit: ptxas serializes the
  wgmmas ("insufficient register resources"; 0 spills, no DEPBAR.LE 1 left).

Barriers (arrival counts and parities; every wait names the phase it waits for):
  kv_bar (count 1): the loader's expect(4 half-box bytes) is its one arrival; the four
    TMA copies complete the transaction count. Used once: both consumers wait parity 0.
  ready[s] (count 1): one expect(Q + dO [+ lse + delta] bytes) per use, the copies
    complete it. Ring tile g (0, 1, ... over the CTA's group x tiles, in the loader's order)
    uses stage g % NUM_STAGES and completes that barrier's phase number g // NUM_STAGES,
    so consumers wait parity (g // NUM_STAGES) & 1.
  empty[s] (count 2): each consumer arrives once per ring tile g, after the wgmmas reading
    stage s (dV: dO, dK: Q; S^T / dP^T already waited) are complete and after its reads of
    the stage's lse / delta, so the phase g // NUM_STAGES of empty[s] completes when both
    are done with tile g. The loader, before loading tile g (>= NUM_STAGES) into stage s,
    waits for the completion of the phase of tile g - NUM_STAGES, number g // NUM_STAGES - 1,
    parity ((g // NUM_STAGES) & 1) ^ 1; for g < NUM_STAGES that is parity 1 on a fresh
    barrier, which passes at once (a fresh mbarrier counts as having completed the phase
    before phase 0). Every consumer visits every ring tile, including (CAUSAL) the tiles
    hidden from all its keys, which it waits for and releases without computing, so every
    stage gets exactly its 2 arrivals per use and the phase sequence is the loader's g
    alone. Triton issues an arrive from one thread after a bar.sync of the warpgroup
    (kernels/fwd_gluon.py; SASS: BAR.SYNC 0x0 / 0x2, 0x80 then one SYNCS.ARRIVE), so one
    arrival a consumer.
  A stage is overwritten only after both consumers' arrivals (the loader's wait), and a
  consumer reads a stage only after ready's phase for that use completed: no stage is
  read before it lands or written while read. The loader never waits for anything the
  consumers wait for, and it finishes its issue loop once every stage it needs was freed:
  no cycle, so no hang as long as every consumer arrives once per ring tile (the loops
  below cover [0, group * n_m) exactly, in every variant). OVERLAP releases stage g only
  in tile g + 1, after waiting for ready[g + 1]: with one stage that is a wait for itself
  (a hang), hence NUM_STAGES >= 2 there (static_assert; the launcher checks first).

CAUSAL: key block n0.., query tile m.. (rows m..m+BLOCK_M-1), off = Nk - Nq. The loader
  starts at the first query tile whose last row sees the block's first key (m_lo: tile
  j0 = cdiv(max(n0 - off - BLOCK_M + 1, 0), BLOCK_M)); every later tile sees it (the mask
  is monotone in i), so each head has n_m = Nq / BLOCK_M - j0 >= 1 tiles (the last query
  row sees every key). Per consumer (its keys kh..kh+HALF_N-1), the head's tiles split
  into [0, n_skip) hidden from all its keys (released unread), [n_skip, n_mask) partly
  visible (masked: P^T = 0 where key c of the half and query r of the tile have
  kh + c > m + r + off), [n_mask, n_m) fully visible (no mask work). With the launcher's
  Nq % 64 == 0 and Nk % 128 == 0, off is a multiple of 64: WG 0 has at most one masked
  tile and no hidden one, WG 1 at most one hidden (the first) and one masked. (The
  classification, the ring order and the lse offsets were checked against a brute-force
  visibility map in Python for the tests' shapes, session 24.) The mask is applied to
  the scaled exponent (x = -inf), so a negative softmax_scale needs no special case.

Compiler facts found (Triton 3.6.0, offline sm_90a, bench/gluon_bwd_compile.py, 2026-12-01):
  - A tile's registers at D = 128 are at the 240 limit: dK + dV 128, S^T and dP^T 32 each,
    P^T / dS^T as bf16 A operands 16 each, lse / delta 16 each in the column layout. What
    tipped it into spills, each found by compiling variants: the lse / delta pointer loads
    made in the column layout (96 B; fixed by the compact layout above), a loop nest per
    GQA head with per-head bounds in the causal path (112 B; one flat loop instead), and
    the causal mask's column iota (gl.arange), which LLVM hoists out of the loop as 16
    live registers (8-56 B, in whatever scalar ptxas then spilled: a TMA descriptor
    address of the epilogue, loop bounds). The fix: the column indices 0..BLOCK_M-1 are
    written once to 256 B of shared memory before warp_specialize (the region's entry
    barrier orders that store before the partitions' reads) and read in the masked tile
    (cols_smem), where the barrier waits keep the load. Not fixes: masking S before the
    exponent, an opaque (inline asm) zero added to the iota, the difference form
    (c - r <= rel: 32 hoisted values, 232-344 B), recomputing the tile's class from rel
    per tile (88-196 B), one tile body with a runtime mask (52 B).
  - warpgroup_mma with is_async=True, its accumulator a token from a previous async
    warpgroup_mma, carries across a loop (OVERLAP), but the first iteration must be
    peeled: with warpgroup_mma_init(zeros) as the loop's initial tokens ptxas serialized
    every wgmma ("non wgmma instructions defining accumulator registers of a wgmma between
    start and end of the pipeline stage", C7515).
  - mbarrier.expect needs a constexpr byte count: a Python-level sum of block_type.nbytes
    assigned to a plain variable became a tensor and failed (TypeError in
    create_mbarrier_expect); assign it to a gl.constexpr.
  - An int32 gl.arange stored to a 1-D SwizzledSharedLayout buffer lowers to stmatrix.
  - use_acc=False with a zeros accumulator costs no registers (HGMMA ... RZ, !UPT).
  - The launcher's own arguments bound through Triton's JIT path (stub driver, no GPU:
    gluon_bwd_compile.py --jit) compile to the same kernels, with group or nheads_k = 1
    specialized to constexprs: 0 spills in every case listed there.

Offline compile (sm_90a, bench/gluon_bwd_compile.py, 2026-12-01; every row 12 warps,
setmaxnreg 240 / 240 / 24 in the partitions, ptxas -v 168 registers kernel-wide, no wgmma
advisory unless said):
  | D | dtype | stages | causal | vec | spill B | smem KB | HGMMA | DEPBAR.LE 1 | UTMALDG |
  | 128 | bf16 / fp16 | 2 | no | ptr | 0 | 129 | 48 | 2 | 12 |
  | 128 | bf16 / fp16 | 2 | no | tma | 0 | 129 | 48 | 2 | 14 |
  | 128 | bf16 | 3 / 4 | no | ptr | 0 | 161 / 193 | 48 | 2 | 12 |
  | 64 | bf16 / fp16 | 4 | no | ptr | 0 | 97 | 32 | 2 | 6 |
  | 64 | bf16 | 4 | no | tma | 0 | 98 | 32 | 2 | 8 |
  | 128 | bf16 / fp16 | 2 | yes | ptr | 0 | 129 | 96 | 4 | 12 |
  | 128 | bf16 | 2 | yes | tma | 0 | 130 | 96 | 4 | 14 |
  | 64 | bf16 / fp16 | 4 | yes | ptr | 0 | 97 | 64 | 4 | 6 |
  | 64 | bf16 | 4 | yes | tma | 0 | 99 | 64 | 4 | 8 |
  | 64 | bf16 / fp16 | 4 | OVERLAP | ptr / tma | 0 | 97 / 98 | 64 | 4 | 6 / 8 |
  | 128 | bf16 | 2 | OVERLAP | ptr | 0 | 129 | 96 | 0 (serialized, C7512) | 12 |
  UTMASTG 4 everywhere (dK, dV of both consumers). HGMMA: 24 a consumer per tile body at
  D = 128 (S^T, dP^T: 8 k-steps each; dV, dK: 4 each), two bodies under CAUSAL; SASS of a
  tile: TRYWAIT ready, 2 x HGMMA 64x64 (S^T, dP^T), DEPBAR.LE 1, P^T math, DEPBAR.LE 0,
  HGMMA 64xD with the register A operand (dV), dS^T math, HGMMA (dK), DEPBAR.LE 0,
  BAR.SYNC of the warpgroup, one SYNCS.ARRIVE on empty.
"""
from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, tma, warpgroup_mma,
                                                               warpgroup_mma_wait)

LOG2E: gl.constexpr = gl.constexpr(1.4426950408889634)

# (BLOCK_M, BLOCK_N, NUM_STAGES) per head dim. Shared memory: K and V (BLOCK_N x D each,
# once) plus NUM_STAGES x (Q + dO, BLOCK_M x D each, [+ 2 x BLOCK_M fp32]): D = 128, 2
# stages 129 KB, 3 161 KB, 4 193 KB; D = 64: 2 stages 65 KB, 4 97 KB (offline report).
# Untimed (2026-12-01): a stage here is ~2k cycles of wgmma (both consumers) against one
# 32 KB load from L2, so 2 should hide it at D = 128; D = 64 (half the work a stage) gets 4.
# The tests run 1-4; the A/B script times the defaults only.
DEFAULT_CONFIG = {64: (64, 128, 4), 128: (64, 128, 2)}
CONSUMER_REGS: gl.constexpr = gl.constexpr(240)
LOADER_REGS: gl.constexpr = gl.constexpr(24)
LOADER_WARPS: gl.constexpr = gl.constexpr(1)


@gluon.jit
def _block_coords(pid_n, pid_bh, seqlen_q, seqlen_k, nheads_k, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
                  CAUSAL: gl.constexpr):
    """One CTA's bookkeeping: (b, hk, n0, j0, n_m): its batch, KV head, first key, the first
    query tile it loads (per head) and how many (per head)."""
    b = pid_bh // nheads_k
    hk = pid_bh % nheads_k
    n0 = pid_n * BLOCK_N
    n_q_tiles = seqlen_q // BLOCK_M
    if CAUSAL:
        # the first query tile whose last row (m + BLOCK_M - 1) sees key n0:
        # m + BLOCK_M - 1 + (Nk - Nq) >= n0
        j0 = gl.cdiv(gl.maximum(n0 - (seqlen_k - seqlen_q) - BLOCK_M + 1, 0), BLOCK_M)
        j0 = gl.minimum(j0, n_q_tiles - 1)      # (never binds: the last row sees every key)
    else:
        j0 = 0
    return b, hk, n0, j0, n_q_tiles - j0


@gluon.jit
def _dkdv_load(q_desc, do_desc, k_desc, v_desc, lse_desc, delta_desc, q_smem, do_smem, k_smem, v_smem, lse_smem,
               delta_smem, kv_bar, ready, empty, seqlen_q, seqlen_k, nheads, nheads_k, group,
               HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, NUM_STAGES: gl.constexpr,
               CAUSAL: gl.constexpr, VEC_PTR: gl.constexpr):
    HALF_N: gl.constexpr = BLOCK_N // 2
    b, hk, n0, j0, n_m = _block_coords(gl.program_id(0), gl.program_id(1), seqlen_q, seqlen_k, nheads_k,
                                       BLOCK_M, BLOCK_N, CAUSAL)
    kv_row = b * seqlen_k + n0
    kv_col = hk * HEAD_DIM
    # K and V, both halves, once: one arrival (the expect) plus the four copies' bytes
    mbarrier.expect(kv_bar, 4 * k_desc.block_type.nbytes)
    tma.async_copy_global_to_shared(k_desc, [kv_row, kv_col], kv_bar, k_smem.index(0))
    tma.async_copy_global_to_shared(k_desc, [kv_row + HALF_N, kv_col], kv_bar, k_smem.index(1))
    tma.async_copy_global_to_shared(v_desc, [kv_row, kv_col], kv_bar, v_smem.index(0))
    tma.async_copy_global_to_shared(v_desc, [kv_row + HALF_N, kv_col], kv_bar, v_smem.index(1))
    if VEC_PTR:
        STAGE_BYTES: gl.constexpr = 2 * q_desc.block_type.nbytes                # Q, dO
    else:
        STAGE_BYTES: gl.constexpr = 2 * q_desc.block_type.nbytes + 2 * lse_desc.block_type.nbytes
    for g in range(group * n_m):
        hh = g // n_m
        h = hk * group + hh
        m = (j0 + g % n_m) * BLOCK_M                        # the tile's first query row
        stage = g % NUM_STAGES
        # both consumers released the stage's previous use (tile g - NUM_STAGES: phase
        # g // NUM_STAGES - 1 of empty[stage]); a fresh barrier passes parity 1
        mbarrier.wait(empty.index(stage), ((g // NUM_STAGES) & 1) ^ 1)
        bar = ready.index(stage)
        mbarrier.expect(bar, STAGE_BYTES)
        tma.async_copy_global_to_shared(q_desc, [b * seqlen_q + m, h * HEAD_DIM], bar, q_smem.index(stage))
        tma.async_copy_global_to_shared(do_desc, [b * seqlen_q + m, h * HEAD_DIM], bar, do_smem.index(stage))
        if not VEC_PTR:
            vec = (b * nheads + h) * seqlen_q + m           # (B, H, Nq) flat index of the tile's first row
            tma.async_copy_global_to_shared(lse_desc, [vec], bar, lse_smem.index(stage))
            tma.async_copy_global_to_shared(delta_desc, [vec], bar, delta_smem.index(stage))


@gluon.jit
def _dkdv_tile(g, k_half, v_half, q_smem, do_smem, lse_smem, delta_smem, cols_smem, ready, empty, dk, dv, s_zero,
               qk_scale, rel, LSE, DELTA, vec, NUM_STAGES: gl.constexpr, MASKED: gl.constexpr, VEC_PTR: gl.constexpr,
               s_layout: gl.constexpr, a_layout: gl.constexpr):
    """Ring tile g of one consumer: dV += P^T dO, dK += dS^T Q (unscaled) for its HALF_N keys
    and the tile's BLOCK_M queries; releases the stage. MASKED: key c of the half and query
    r of the tile are kept iff c <= r + rel, rel = (tile's first row) + Nk - Nq - (half's
    first key). VEC_PTR: lse / delta by pointer loads at LSE / DELTA + vec.. (vec: the flat
    (B, H, Nq) index of the tile's first row), issued before the stage's wait; else from the
    stage's shared buffers (TMA)."""
    dtype: gl.constexpr = k_half.dtype
    col: gl.constexpr = gl.SliceLayout(0, s_layout)
    stage = g % NUM_STAGES
    if VEC_PTR:
        # one value a thread (BLOCK_M = 64 of the warpgroup's 128 threads, the rest
        # replicated), moved into the column layout where used: 2 registers across the wait
        # and the wgmmas instead of 2 x 16 (and their 16 64-bit addresses)
        vec_layout: gl.constexpr = gl.BlockedLayout([1], [32], [4], [0])
        offs_m = vec + gl.arange(0, s_zero.shape[1], layout=vec_layout)         # (BLOCK_M,)
        lse_c = gl.load(LSE + offs_m)
        delta_c = gl.load(DELTA + offs_m)
    mbarrier.wait(ready.index(stage), (g // NUM_STAGES) & 1)
    q = q_smem.index(stage)                                                  # (BLOCK_M, D) smem
    do = do_smem.index(stage)                                                # (BLOCK_M, D) smem
    # S^T = K Q^T and dP^T = V dO^T in flight together
    s_tok = warpgroup_mma(k_half, q.permute((1, 0)), s_zero, use_acc=False, is_async=True)
    dp_tok = warpgroup_mma(v_half, do.permute((1, 0)), s_zero, use_acc=False, is_async=True)
    # S^T done (groups retire in order), dP^T still running: P^T meanwhile
    s = warpgroup_mma_wait(1, deps=[s_tok])                                  # (HALF_N, BLOCK_M) fp32
    if VEC_PTR:
        lse_v = gl.convert_layout(lse_c, col)                                # (BLOCK_M,)
    else:
        lse_v = lse_smem.index(stage).load(col)                              # (BLOCK_M,)
    lse2 = lse_v * LOG2E                                                     # log2 units
    x = s * qk_scale - gl.expand_dims(lse2, 0)                               # (HALF_N, BLOCK_M) log2 units
    if MASKED:
        # after the scale (a negative softmax_scale needs no special case)
        HALF_N: gl.constexpr = s.shape[0]
        offs_c = gl.arange(0, HALF_N, layout=gl.SliceLayout(1, s_layout))    # key in the half
        # query in the tile: 0 .. BLOCK_M - 1 read from shared memory here, not made by an
        # arange (which LLVM hoists out of the loop: 16 registers live across it, 8-16 spill
        # bytes at D = 128; the loop's barrier waits keep this load in the tile)
        offs_r = cols_smem.load(col)                                         # (BLOCK_M,)
        x = gl.where(gl.expand_dims(offs_c - rel, 1) <= gl.expand_dims(offs_r, 0), x, float("-inf"))
    p = gl.exp2(x)                                                           # (HALF_N, BLOCK_M)
    p16 = gl.convert_layout(p.to(dtype), a_layout)                           # (HALF_N, BLOCK_M) A operand
    dp = warpgroup_mma_wait(0, deps=[dp_tok])                                # (HALF_N, BLOCK_M) fp32
    dv_tok = warpgroup_mma(p16, do, dv, is_async=True)                       # dV += P^T dO, under dS^T's math
    if VEC_PTR:
        delta = gl.convert_layout(delta_c, col)                              # (BLOCK_M,)
    else:
        delta = delta_smem.index(stage).load(col)                            # (BLOCK_M,)
    ds16 = gl.convert_layout((p * (dp - gl.expand_dims(delta, 0))).to(dtype), a_layout)
    dk_tok = warpgroup_mma(ds16, q, dk, is_async=True)                       # dK += dS^T Q
    dv, dk, p16, ds16 = warpgroup_mma_wait(0, deps=[dv_tok, dk_tok, p16, ds16])
    # Q and dO of this stage no longer read by this warpgroup (one of empty's 2 arrivals)
    mbarrier.arrive(empty.index(stage))
    return dk, dv


@gluon.jit
def _overlap_step(g, n_m, k_half, v_half, q_smem, do_smem, lse_smem, delta_smem, ready, empty, dk_tok, dv_tok, p16,
                  ds16, s_zero, qk_scale, LSE, DELTA, vec_base, seqlen_q, FIRST: gl.constexpr,
                  NUM_STAGES: gl.constexpr, VEC_PTR: gl.constexpr, s_layout: gl.constexpr, a_layout: gl.constexpr):
    """Tile g of _dkdv_loop_overlap; FIRST: tile 0 (no previous tile's wgmmas to retire)."""
    dtype: gl.constexpr = k_half.dtype
    col: gl.constexpr = gl.SliceLayout(0, s_layout)
    BLOCK_M: gl.constexpr = s_zero.shape[1]
    stage = g % NUM_STAGES
    if VEC_PTR:
        vec_layout: gl.constexpr = gl.BlockedLayout([1], [32], [4], [0])
        offs_m = vec_base + (g // n_m) * seqlen_q + (g % n_m) * BLOCK_M + gl.arange(0, BLOCK_M, layout=vec_layout)
        lse_c = gl.load(LSE + offs_m)
        delta_c = gl.load(DELTA + offs_m)
    mbarrier.wait(ready.index(stage), (g // NUM_STAGES) & 1)
    q = q_smem.index(stage)                                                  # (BLOCK_M, D) smem
    do = do_smem.index(stage)                                                # (BLOCK_M, D) smem
    s_tok = warpgroup_mma(k_half, q.permute((1, 0)), s_zero, use_acc=False, is_async=True)
    dp_tok = warpgroup_mma(v_half, do.permute((1, 0)), s_zero, use_acc=False, is_async=True)
    if not FIRST:
        # in flight: dV_{g-1}, dK_{g-1}, S^T_g, dP^T_g: retire the first two
        dv_tok, dk_tok, p16, ds16 = warpgroup_mma_wait(2, deps=[dv_tok, dk_tok, p16, ds16])
        mbarrier.arrive(empty.index((g - 1) % NUM_STAGES))                   # stage g - 1 no longer read
    s = warpgroup_mma_wait(1, deps=[s_tok])                                  # (HALF_N, BLOCK_M) fp32
    if VEC_PTR:
        lse_v = gl.convert_layout(lse_c, col)
    else:
        lse_v = lse_smem.index(stage).load(col)
    p = gl.exp2(s * qk_scale - gl.expand_dims(lse_v * LOG2E, 0))             # (HALF_N, BLOCK_M)
    p16 = gl.convert_layout(p.to(dtype), a_layout)
    dp = warpgroup_mma_wait(0, deps=[dp_tok])                                # (HALF_N, BLOCK_M) fp32
    dv_tok = warpgroup_mma(p16, do, dv_tok, is_async=True)
    if VEC_PTR:
        delta = gl.convert_layout(delta_c, col)
    else:
        delta = delta_smem.index(stage).load(col)
    ds16 = gl.convert_layout((p * (dp - gl.expand_dims(delta, 0))).to(dtype), a_layout)
    dk_tok = warpgroup_mma(ds16, q, dk_tok, is_async=True)
    return dk_tok, dv_tok, p16, ds16


@gluon.jit
def _dkdv_loop_overlap(n_tiles, n_m, k_half, v_half, q_smem, do_smem, lse_smem, delta_smem, ready, empty, dk, dv,
                       s_zero, qk_scale, LSE, DELTA, vec_base, seqlen_q, NUM_STAGES: gl.constexpr,
                       VEC_PTR: gl.constexpr, s_layout: gl.constexpr, a_layout: gl.constexpr):
    """OVERLAP (non-causal): _dkdv_tile's math with tile g's dV / dK wgmmas left in flight
    into tile g + 1: there S^T_{g+1} and dP^T_{g+1} are issued first, then the wait for all
    but those two groups retires dV_g / dK_g (groups retire in order) and releases stage g.
    Carried across the loop: the dK / dV accumulators as wgmma tokens and P^T_g / dS^T_g (the
    register A operands, which must stay untouched until their wgmmas are done). Tile 0 is
    peeled, so the loop carries wgmma results only."""
    p16 = gl.zeros(s_zero.shape, k_half.dtype, a_layout)
    ds16 = gl.zeros(s_zero.shape, k_half.dtype, a_layout)
    dk_tok, dv_tok, p16, ds16 = _overlap_step(0, n_m, k_half, v_half, q_smem, do_smem, lse_smem, delta_smem, ready,
                                              empty, dk, dv, p16, ds16, s_zero, qk_scale, LSE, DELTA, vec_base,
                                              seqlen_q, True, NUM_STAGES, VEC_PTR, s_layout, a_layout)
    for g in range(1, n_tiles):
        dk_tok, dv_tok, p16, ds16 = _overlap_step(g, n_m, k_half, v_half, q_smem, do_smem, lse_smem, delta_smem,
                                                  ready, empty, dk_tok, dv_tok, p16, ds16, s_zero, qk_scale, LSE,
                                                  DELTA, vec_base, seqlen_q, False, NUM_STAGES, VEC_PTR, s_layout,
                                                  a_layout)
    dv, dk, p16, ds16 = warpgroup_mma_wait(0, deps=[dv_tok, dk_tok, p16, ds16])
    mbarrier.arrive(empty.index((n_tiles - 1) % NUM_STAGES))
    return dk, dv


@gluon.jit
def _dkdv_skip(g, ready, empty, NUM_STAGES: gl.constexpr):
    """CAUSAL: ring tile g hidden from all this consumer's keys: waited for (so the stage
    holds the tile before the other consumer's arrival may free it) and released, unread."""
    stage = g % NUM_STAGES
    mbarrier.wait(ready.index(stage), (g // NUM_STAGES) & 1)
    mbarrier.arrive(empty.index(stage))


@gluon.jit
def _dkdv_consume(q_smem, do_smem, k_smem, v_smem, lse_smem, delta_smem, cols_smem, kv_bar, ready, empty, dk_desc,
                  dv_desc, LSE, DELTA, seqlen_q, seqlen_k, nheads, nheads_k, group, softmax_scale, qk_scale,
                  WG: gl.constexpr, HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
                  NUM_STAGES: gl.constexpr, CAUSAL: gl.constexpr, VEC_PTR: gl.constexpr, OVERLAP: gl.constexpr):
    HALF_N: gl.constexpr = BLOCK_N // 2
    dtype: gl.constexpr = k_smem.dtype
    # wgmma accumulators of one warpgroup: S^T / dP^T (HALF_N, BLOCK_M), dK / dV (HALF_N, D)
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, BLOCK_M, 16])
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, HEAD_DIM, 16])
    a_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    b, hk, n0, j0, n_m = _block_coords(gl.program_id(0), gl.program_id(1), seqlen_q, seqlen_k, nheads_k,
                                       BLOCK_M, BLOCK_N, CAUSAL)
    k_half = k_smem.index(WG)                                                # (HALF_N, D) smem
    v_half = v_smem.index(WG)                                                # (HALF_N, D) smem
    dk = gl.zeros([HALF_N, HEAD_DIM], gl.float32, o_layout)                  # (HALF_N, D)
    dv = gl.zeros([HALF_N, HEAD_DIM], gl.float32, o_layout)                  # (HALF_N, D)
    s_zero = gl.zeros([HALF_N, BLOCK_M], gl.float32, s_layout)               # (HALF_N, BLOCK_M), never read
    # VEC_PTR: ring tile g = hh * n_m + j reads lse / delta rows from vec_base + hh * Nq + j * BLOCK_M
    vec_base = (b * nheads + hk * group) * seqlen_q + j0 * BLOCK_M
    mbarrier.wait(kv_bar, 0)
    if CAUSAL:
        # per head the same split of its n_m tiles (module doc): rel of tile j is
        # (j0 + j) * BLOCK_M + Nk - Nq - kh; hidden iff rel + BLOCK_M - 1 < 0, fully visible
        # iff rel >= HALF_N - 1
        rel0 = j0 * BLOCK_M + seqlen_k - seqlen_q - (n0 + WG * HALF_N)
        n_skip = gl.minimum(gl.cdiv(gl.maximum(-(rel0 + BLOCK_M - 1), 0), BLOCK_M), n_m)
        n_mask = gl.minimum(gl.cdiv(gl.maximum(HALF_N - 1 - rel0, 0), BLOCK_M), n_m)
        # one loop over the group's heads x tiles, the class tested per tile (nested loops
        # per head keep more scalars live beside the ~230 registers of a tile: spill bytes)
        for g in range(group * n_m):
            j = g % n_m
            if j < n_skip:
                _dkdv_skip(g, ready, empty, NUM_STAGES)
            elif j < n_mask:
                dk, dv = _dkdv_tile(g, k_half, v_half, q_smem, do_smem, lse_smem, delta_smem, cols_smem, ready,
                                    empty, dk, dv, s_zero, qk_scale, rel0 + j * BLOCK_M, LSE, DELTA,
                                    vec_base + (g // n_m) * seqlen_q + j * BLOCK_M, NUM_STAGES, True, VEC_PTR,
                                    s_layout, a_layout)
            else:
                dk, dv = _dkdv_tile(g, k_half, v_half, q_smem, do_smem, lse_smem, delta_smem, cols_smem, ready,
                                    empty, dk, dv, s_zero, qk_scale, 0, LSE, DELTA,
                                    vec_base + (g // n_m) * seqlen_q + j * BLOCK_M, NUM_STAGES, False, VEC_PTR,
                                    s_layout, a_layout)
    elif OVERLAP:
        # stage g is released in tile g + 1 after the wait for stage g + 1: a one-stage ring
        # would wait for itself
        gl.static_assert(NUM_STAGES >= 2, "OVERLAP needs NUM_STAGES >= 2")
        dk, dv = _dkdv_loop_overlap(group * n_m, n_m, k_half, v_half, q_smem, do_smem, lse_smem, delta_smem, ready,
                                    empty, dk, dv, s_zero, qk_scale, LSE, DELTA, vec_base, seqlen_q, NUM_STAGES,
                                    VEC_PTR, s_layout, a_layout)
    else:
        for g in range(group * n_m):
            dk, dv = _dkdv_tile(g, k_half, v_half, q_smem, do_smem, lse_smem, delta_smem, cols_smem, ready, empty,
                                dk, dv, s_zero, qk_scale, 0, LSE, DELTA,
                                vec_base + (g // n_m) * seqlen_q + (g % n_m) * BLOCK_M, NUM_STAGES, False, VEC_PTR,
                                s_layout, a_layout)

    # epilogue: through this warpgroup's own K / V halves (its last wgmma reading them is done)
    row = b * seqlen_k + n0 + WG * HALF_N
    k_half.store((dk * softmax_scale).to(dtype))
    v_half.store(dv.to(dtype))
    fence_async_shared()
    tma.async_copy_shared_to_global(dk_desc, [row, hk * HEAD_DIM], k_half)
    tma.async_copy_shared_to_global(dv_desc, [row, hk * HEAD_DIM], v_half)
    tma.store_wait(0)


@gluon.jit
def attn_bwd_dkdv_gluon_kernel(
    q_desc, do_desc,           # host TensorDescriptors over (B * Nq, H * D) views, box (BLOCK_M, D)
    k_desc, v_desc,            # over (B * Nk, Hk * D), box (BLOCK_N / 2, D)
    dk_desc, dv_desc,          # over dk / dv (B * Nk, Hk * D) contiguous, box (BLOCK_N / 2, D)
    lse_desc, delta_desc,      # over lse / delta (B * H * Nq,) fp32, box (BLOCK_M,) (not read when VEC_PTR)
    LSE, DELTA,                # lse / delta (B, H, Nq) fp32 contiguous (read when VEC_PTR)
    seqlen_q, seqlen_k, nheads, nheads_k, group, softmax_scale, qk_scale,
    HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, NUM_STAGES: gl.constexpr,
    CAUSAL: gl.constexpr = False, VEC_PTR: gl.constexpr = False, OVERLAP: gl.constexpr = False,
):
    # grid (Nk / BLOCK_N, B * Hk): program_id(0) the key block, program_id(1) batch x KV head
    HALF_N: gl.constexpr = BLOCK_N // 2
    gl.static_assert(HALF_N == 64, "two consumer warpgroups of 64 keys each")
    dtype: gl.constexpr = q_desc.dtype
    q_smem = gl.allocate_shared_memory(dtype, [NUM_STAGES, BLOCK_M, HEAD_DIM], q_desc.layout)    # (S, BLOCK_M, D)
    do_smem = gl.allocate_shared_memory(dtype, [NUM_STAGES, BLOCK_M, HEAD_DIM], do_desc.layout)  # (S, BLOCK_M, D)
    k_smem = gl.allocate_shared_memory(dtype, [2, HALF_N, HEAD_DIM], k_desc.layout)             # (2, HALF_N, D)
    v_smem = gl.allocate_shared_memory(dtype, [2, HALF_N, HEAD_DIM], v_desc.layout)             # (2, HALF_N, D)
    lse_smem = gl.allocate_shared_memory(gl.float32, [NUM_STAGES, BLOCK_M], lse_desc.layout)     # (S, BLOCK_M)
    delta_smem = gl.allocate_shared_memory(gl.float32, [NUM_STAGES, BLOCK_M], delta_desc.layout)  # (S, BLOCK_M)
    # CAUSAL: the column indices 0 .. BLOCK_M - 1 of a masked tile (_dkdv_tile), written once here
    cols_smem = gl.allocate_shared_memory(gl.int32, [BLOCK_M], gl.SwizzledSharedLayout(1, 1, 1, [0]))   # (BLOCK_M,)
    if CAUSAL:
        cols_smem.store(gl.arange(0, BLOCK_M, layout=gl.BlockedLayout([1], [32], [4], [0])))
    kv_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    ready = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    mbarrier.init(kv_bar, count=1)
    for i in gl.static_range(NUM_STAGES):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=2)      # one arrival per consumer warpgroup
    fence_async_shared()

    WG0: gl.constexpr = 0
    WG1: gl.constexpr = 1
    gl.warp_specialize([
        (_dkdv_consume, (q_smem, do_smem, k_smem, v_smem, lse_smem, delta_smem, cols_smem, kv_bar, ready, empty,
                         dk_desc, dv_desc, LSE, DELTA, seqlen_q, seqlen_k, nheads, nheads_k, group, softmax_scale,
                         qk_scale, WG0, HEAD_DIM, BLOCK_M, BLOCK_N, NUM_STAGES, CAUSAL, VEC_PTR, OVERLAP)),
        (_dkdv_consume, (q_smem, do_smem, k_smem, v_smem, lse_smem, delta_smem, cols_smem, kv_bar, ready, empty,
                         dk_desc, dv_desc, LSE, DELTA, seqlen_q, seqlen_k, nheads, nheads_k, group, softmax_scale,
                         qk_scale, WG1, HEAD_DIM, BLOCK_M, BLOCK_N, NUM_STAGES, CAUSAL, VEC_PTR, OVERLAP)),
        (_dkdv_load, (q_desc, do_desc, k_desc, v_desc, lse_desc, delta_desc, q_smem, do_smem, k_smem, v_smem,
                      lse_smem, delta_smem, kv_bar, ready, empty, seqlen_q, seqlen_k, nheads, nheads_k, group,
                      HEAD_DIM, BLOCK_M, BLOCK_N, NUM_STAGES, CAUSAL, VEC_PTR)),
    ], [4, LOADER_WARPS], [CONSUMER_REGS, LOADER_REGS])

    mbarrier.invalidate(kv_bar)
    for i in gl.static_range(NUM_STAGES):
        mbarrier.invalidate(ready.index(i))
        mbarrier.invalidate(empty.index(i))
