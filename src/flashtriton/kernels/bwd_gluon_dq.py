"""The backward's dQ for Hopper written in Gluon, hand-scheduled (FlashAttention-2's
separate dQ pass).

Status (2026-12-01, Triton 3.6.0): written and compiled offline for sm_90a
(bench/gluon_bwd_dq_compile.py); its GPU tests pass on the H200 since session 25; not
routed: the fused backward (bwd_gluon_fused.py) supersedes it (host
side launchers/backward_gluon_dq.py; GPU tests tests/test_bwd_gluon_dq.py; smoke and A/B
bench/gpu/s25_gluon_dq_ab.py).

Why: the library's dQ kernel (kernels/bwd_ws.py attn_bwd_dq_ws_kernel) leaves its
schedule to Triton's automatic warp specialization, and a profile had it add 28-45% on
top of the dK/dV kernel's time in a D = 128 backward that runs at 0.82-0.88x cuDNN's.

What it computes: attn_bwd_dq_ws_kernel's dense case (no dropout, ALiBi, softcap, varlen,
window) and, CAUSAL, the library's bottom-right causal mask (query i sees key c iff
c <= i + Nk - Nq). Per query row block, over the key tiles it sees:
    S = Q K^T,  P = exp2(S * scale * log2(e) - lse * log2(e)),  dP = dO V^T,
    dS = P * (dP - delta),  dQ += dS K;    dQ *= scale at the end, stored in q's dtype
(lse the forward's natural-log logsumexp, (B, H, Nq) fp32, +inf for a row that sees no
key; delta = rowsum(dO * O), (B, H, Nq) fp32, the backward's preprocess). Each query head
has its own dQ rows (GQA shares only K / V), so dQ needs no fp32 accumulation buffer:
the library's dQ path stores q's dtype the same way. A row with lse = +inf gets
P = exp2(-inf) = 0 (and its delta is 0, O being 0), so dS = 0 and dQ = 0 with no special
case; masked scores are set to -inf before the exp2, so P = 0 there too.

Scope (the launcher checks it): dense q / dO (B, Nq, H, D), k / v (B, Nk, Hk, D), H % Hk
== 0, bf16 or fp16, D in {64, 128, 256}, Nq % BLOCK_M == 0, Nk % BLOCK_N == 0.

D = 256 (session 33, issue 4: the dQ pass of the split D = 256 backward, launchers/
backward_gluon_d256.bwd_into(..., split_dq=True), after kernels/bwd_gluon_d256.py's DKDV_ONLY; not
routed): the same kernel at DEFAULT_CONFIG[256] = (128, 32, 3, 3). Shared memory: Q and dO of 128
rows x 256 are 128 KB, leaving 96 KB for the K / V rings: 32-key tiles (16 KB) 3 / 3 deep (229,792
B compiled) or 64-key tiles 2 / 1 (229,728 B). Registers a consumer thread (setmaxnreg 240, the most
two consumer warpgroups and the loader leave): the 64 x 256 fp32 dQ accumulator is 128, S and dP
(64 x BLOCK_N fp32) 16 + 16 at 32 keys (32 + 32 at 64), dS as the register A operand 8 (16); at 32
keys the peak (dQ + P + dP around the exp2) is ~160 + addresses: 0 spills, plain and causal, bf16
and fp16; at 64 keys 192 + addresses spilled 216 B plain (13 LDL / STL a tile in one consumer's
loop) and 640 B causal. wgmmas: S = Q K^T and dP = dO V^T m64n32k16 (16 k-steps, A from shared
memory: 3 KB of operand reads a 65.5 kFLOP k-step, above the 128 B / clock port at peak: the S / dP
half of the pass is shared-memory bound at ~67% of the tensor peak), dQ += dS K m64n256k16 (2
k-steps, A in registers). Causal at 32 keys: a block's diagonal spans 4 K tiles per consumer,
the upper consumer's last two hidden from all its rows (masked to dS = 0, still waited for and
released). Untimed when written.
V_EARLY (default off; launcher v_early=True): V_j released (v_empty) as soon as dP_j retired, in
place of with K_{j-1} after dQ_{j-1}: with ONE V stage (64-key tiles at D = 256) V_{j+1} then loads
under dS_j, dQ_j and S_{j+1} instead of after them. Each consumer still releases every V tile once
(tile 0 after its peeled dP, tile j in step j, none in the epilogue); the loader's V waits depend on
dP of the previous V_STAGES tiles only. The existing variants (V_EARLY off) compile to the same
SASS as before (bench/d256_split_sass_hash.py).

Design: one CTA per (128-row query block, batch x head), grid (Nq / 128, B * H), query
block fastest (CAUSAL: heaviest first, pid_m reversed), three partitions
(gl.warp_specialize), as kernels/fwd_gluon.py:
  - two consumer warpgroups (the default partition, 4 warps, and a 4-warp worker), each
    owning BLOCK_M / 2 = 64 query rows: S and dP as 64 x BLOCK_N fp32 wgmma accumulators
    with A operands Q_half / dO_half from shared memory and B operands K^T / V^T (the
    (BLOCK_N, D) stage tiles .permute'd), dS converted to q's dtype in registers and used
    as the register A operand (DotOperandLayout, k_width 2) of dQ_half += dS K, whose B
    operand is the (BLOCK_N, D) K tile as it lies; dQ_half a 64 x D fp32 accumulator.
    lse * log2(e) and delta for the 64 rows live in registers (row slices of S's layout).
    setmaxnreg 240 each.
  - a load partition (1 warp, 24 registers): Q's two halves (q_bar), tile 0's K, dO's two
    halves (do_bar), tile 0's V, then K_j, V_j through two rings of K_STAGES and V_STAGES
    buffers (K_j is read until tile j + 1's step, V_j only in tile j's).
  Shared memory: Q 2 x 64 x D, dO 2 x 64 x D, K_STAGES + V_STAGES tiles of BLOCK_N x D:
  D = 128, BLOCK_N 128, 3 / 2 stages: 32 + 32 + 96 + 64 = 224 KB (causal 2 / 2: 192 KB);
  D = 64, 4 / 4: 160 KB. Registers (a consumer thread, D = BLOCK_N = 128): dQ, S -> P and
  dP 64 fp32 each, dS 32 (two bf16 a register).
  Schedule of a consumer (tile j >= 1, _dq_step): issue dQ += dS_{j-1} K_{j-1} (async),
  wait K_j, issue S_j = Q K_j^T (async); wait until only S_j is in flight (dQ_{j-1} done:
  groups retire in order), release tile j - 1's K and V stages; wait S_j; wait V_j, issue
  dP_j = dO V_j^T (async) and compute P_j = exp2(S_j qk_scale - lse2) under it; wait dP_j;
  dS_j = P_j (dP_j - delta) to q's dtype in the A-operand layout, carried into tile j + 1.
  Tile 0 is peeled (S_0, dP_0, dS_0, no dQ yet); after the last tile its dQ is issued and
  waited. At most dQ + dS + S (160 registers) live at the issue and dQ + P + dP (192)
  around the exp2; issuing dP_j next to dQ_{j-1} as well would hold dS_{j-1} with the
  three (224, too close to 240 with the addresses and the mask). While one warpgroup
  computes dS (its tensor-core queue empty) the other's wgmmas run; the SASS interleaves
  the MUFU.EX2 of P with the dP HGMMAs.
  CAUSAL: diag = pid_m * BLOCK_M + Nk - Nq (the last key the block's first row sees), the
  loader loads n_load = tiles the block's last row reaches (>= 1); each consumer runs
  tiles [1, n_full) unmasked (n_full: tiles fully visible to its first row, clamped to
  [1, n_load]; fwd_gluon._tile_coords computes both, in every partition) and [n_full,
  n_load) with the mask (score (r, c) of tile j kept iff c <= diag_wg - j * BLOCK_N + r,
  else -inf before the exp2); tile 0 is peeled and masked. A tile the lower half needs
  but the upper half does not see at all (BLOCK_N < BLOCK_M) is masked to dS = 0 by the
  upper consumer, which still waits for it and releases it. (An emulation of this tile
  plan in float64 on the CPU matched the reference dQ to 3e-15 for Nq <, =, > Nk, BLOCK_N
  64 / 128, blocks without any key included; 2026-12-01, not kept.)
  Epilogue: dQ * scale to q's dtype into this warpgroup's half of Q's buffer (Q is dead:
  its last S wgmma retired), fence, TMA store, store_wait.

Barriers (one arrival each unless said). Ring R (K or V, STAGES = K_STAGES or V_STAGES):
tile j uses stage j % STAGES, and R_ready / R_empty phase j // STAGES:
  - q_bar, do_bar: the loader's expect (2 boxes' bytes) is the one arrival; the TMA bytes
    complete phase 0; both consumers wait parity 0 (waits do not consume a phase).
  - k_ready[s], v_ready[s]: the loader's expect for tile j completes phase j // STAGES of
    stage s once the bytes land; consumers wait parity (j // STAGES) & 1. The loader
    re-arms stage s for tile j + STAGES only after both consumers released tile j, i.e.
    after both are done waiting for tile j's phase, so no consumer ever waits a phase
    behind or ahead.
  - k_empty[s], v_empty[s] (count 2): each consumer arrives on both once per tile j,
    after dQ_j (the last wgmma reading K_j; V_j's last reader, dP_j, retired before it)
    retired: in tile j + 1's step after its wait(1), or after the last dQ for the last
    tile. So every tile 0 .. n_load - 1 is released exactly once per consumer and ring
    (tile 0 in step 1, step j releases j - 1, the epilogue n_load - 1), in both loops
    alike. Phase j // STAGES of stage s completes on the two arrivals for tile j; the
    loader waits parity ((j' // STAGES) & 1) ^ 1 before loading tile j' = j + STAGES into
    it (phase j' // STAGES - 1 complete); for j' < STAGES parity 1 on a fresh barrier,
    which passes. A consumer cannot arrive twice in one phase: its next arrival on stage s
    is for tile j + STAGES, which the loader loads only after the phase completed.
  - No deadlock: the loader's waits for tile j' (K, then V) depend on the consumers'
    releases of tiles j' - K_STAGES and j' - V_STAGES <= j' - 1, made in their steps
    <= j'; a consumer's step j waits only for tile j's loads (and releases j - 1 after
    K_j arrived), so every wait depends on strictly earlier work. V_STAGES = 1 is legal
    (V_j then loads only after step j released V_{j-1}); K_STAGES >= 2 (dQ_{j-1} reads
    K_{j-1} while S_j reads K_j).
  - The register A operand dS_{j-1} is passed to warpgroup_mma_wait's deps with dQ's
    token (kept alive until the wgmma reading it retired), and dS_j is only computed after
    that wait.

Compiler facts (Triton 3.6.0, offline sm_90a, bench/gluon_bwd_dq_compile.py, 2026-12-01):
  - Default tiles, D = 128 and 64, bf16 and fp16, causal or not: 0 spill bytes (no
    STL / LDL in the SASS), 12 warps (.maxnreg 168), setmaxnreg 240 / 240 / 24, 224 KB of
    shared memory at D = 128 (causal 192), 160 KB at D = 64, HGMMA 96 (causal 144) at
    D = 128 = 2 consumers x (S, dP of tile 0 + S, dP, dQ in each loop + the last dQ) x 8
    k-steps, WARPGROUP.DEPBAR.LE gsb0, 0x1 once per consumer loop (the wait(1) leaving S_j
    in flight), no ptxas wgmma advisory, 16 UTMALDG (8 at D = 64), 2 UTMASTG.
  - The causal kernel sits at the 240-register edge. Three things each cost spills there
    (8-112 bytes, outside the loops but required to be 0): (1) block bookkeeping computed
    before gl.warp_specialize and passed in: the partitions now each call _tile_coords;
    (2) LLVM hoisting the loop-invariant, thread-dependent part of the mask (row iota +
    Nk - Nq + ...) out of the partitions' dispatch loop to the kernel's entry, where it
    lives across everything: the mask's row iota and the consumer's diag pass through
    gl.inline_asm_elementwise("mov.b32 $0, $1;", is_pure=False), which LLVM cannot hoist;
    (3) a 3-stage K ring (j % 3, j // 3): CAUSAL_CONFIG keeps 2 / 2 at D = 128. Computing
    the diagonal tiles' P before issuing their dP (no overlap) did not help; releasing V
    right after its dP (instead of with K) cost 8 bytes.
  - gl.inline_asm_elementwise takes a scalar (diag) as well as a tensor.
  - warpgroup_mma_wait(1, deps=[dq_tok, ds]) returns (dq, ds): a plain register tensor
    in deps is kept alive until the wait (the register A operand of the dQ wgmma).
"""
from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, tma, warpgroup_mma,
                                                               warpgroup_mma_wait)

from .fwd_gluon import _tile_coords

LOG2E: gl.constexpr = gl.constexpr(1.4426950408889634)

# (BLOCK_M, BLOCK_N, K_STAGES, V_STAGES) per head dim: the depths of the K ring and the V
# ring. Shared memory: Q and dO (BLOCK_M x D each) plus K_STAGES K and V_STAGES V tiles
# (BLOCK_N x D each) within 227 KB. D = 128: BLOCK_N 128 with 3 K and 2 V stages takes
# 224 KB (2 / 2: 192 KB; 3 / 3 would be 256); BLOCK_N 64 with 4 / 4 192 KB, 5 / 5 224 KB
# (the A/B's alternatives: bench/gpu/s25_gluon_dq_ab.py). D = 64: BLOCK_N 128 with 4 / 4
# stages 160 KB (6 / 6: 224 KB). Why 3 K stages: K_{j+K_STAGES} loads once tile j's dQ
# retired (tile j + 1's step), so with 2 it has under one step to land. CAUSAL_CONFIG:
# the causal kernel at D = 128 keeps 2 / 2, where 3 / 2 spilled 112 bytes (offline sm_90a:
# the j % 3 and j // 3 of the ring's index on top of the mask's registers; 4 / 2 compiles
# clean but needs 256 KB). Offline only (2026-12-01): untimed.
DEFAULT_CONFIG = {64: (128, 128, 4, 4), 128: (128, 128, 3, 2), 256: (128, 32, 3, 3)}
CAUSAL_CONFIG = {128: (128, 128, 2, 2)}
# D = 256 (session 33, issue 4: the split backward's dQ pass, launchers/backward_gluon_d256 split_dq):
# Q and dO of 128 rows take 128 KB, so the K / V rings get 96 KB: BLOCK_N 32 with 3 / 3 stages
# (229,792 B compiled) or BLOCK_N 64 with 2 / 1 (229,728 B). Registers of a consumer: dQ 64 x 256
# fp32 = 128, S and dP 64 x BLOCK_N fp32 16 + 16 at BLOCK_N 32 (32 + 32 at 64), dS 8 (16): offline
# (sm_90a, Triton 3.6.0) BLOCK_N 32 compiles with 0 spill bytes plain and causal, bf16 and fp16;
# BLOCK_N 64 spills 216 B plain (13 LDL / STL a tile in one consumer's loop) and 640 B causal at the
# 240-register ceiling (2 x 240 x 128 + the loader fill the register file), so it stays an A/B
# alternative (block_n=64, num_stages=2, v_stages=1, v_early=True). Untimed before session 34.


def default_config(head_dim: int, causal: bool):
    """(BLOCK_M, BLOCK_N, K_STAGES, V_STAGES) for a head dim in DEFAULT_CONFIG."""
    return (CAUSAL_CONFIG if causal else {}).get(head_dim, DEFAULT_CONFIG[head_dim])


CONSUMER_REGS: gl.constexpr = gl.constexpr(240)  # consumer worker's setmaxnreg (the default partition gets 240 too)
LOADER_REGS: gl.constexpr = gl.constexpr(24)     # setmaxnreg's minimum
LOADER_WARPS: gl.constexpr = gl.constexpr(1)


# ---------------------------------------------------------------------------------------
# Partitions
# ---------------------------------------------------------------------------------------
@gluon.jit
def _load_tile(desc, smem, ready, empty, j, offs_n, kv_col, STAGES: gl.constexpr):
    """Loader: tile j of one ring (K or V) into stage j % STAGES, once both consumers
    released the stage's previous tile j - STAGES (phase (j // STAGES) - 1 of empty; a
    fresh barrier passes the parity 1 the first STAGES tiles wait for)."""
    stage = j % STAGES
    mbarrier.wait(empty.index(stage), ((j // STAGES) & 1) ^ 1)
    mbarrier.expect(ready.index(stage), desc.block_type.nbytes)
    tma.async_copy_global_to_shared(desc, [offs_n, kv_col], ready.index(stage), smem.index(stage))


@gluon.jit
def _dq_load(q_desc, k_desc, v_desc, do_desc, q_smem, do_smem, k_smem, v_smem, q_bar, do_bar, k_ready, v_ready,
             k_empty, v_empty, pid_m, pid_bh, seqlen_q, seqlen_k, nheads, group,
             HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, K_STAGES: gl.constexpr,
             V_STAGES: gl.constexpr, CAUSAL: gl.constexpr):
    """The load partition: Q, K_0, dO, V_0 (in the order the consumers need them), then
    K_j, V_j for j = 1 .. n_tiles - 1 through the two rings (n_tiles: _tile_coords'
    n_load)."""
    HALF_M: gl.constexpr = BLOCK_M // 2
    # WINDOW off: n_left0 / n_left1 are the constexpr 1 (only tile 0 peeled), tiles start at 0
    q_row, q_col, kv_row, kv_col, n_tiles, _nl0, _nl1, n_full0, n_full1, diag, lse_off = _tile_coords(
        pid_m, pid_bh, seqlen_q, seqlen_k, nheads, group, 0, 0, HEAD_DIM, BLOCK_M, BLOCK_N, CAUSAL, False)
    mbarrier.expect(q_bar, 2 * q_desc.block_type.nbytes)
    tma.async_copy_global_to_shared(q_desc, [q_row, q_col], q_bar, q_smem.index(0))
    tma.async_copy_global_to_shared(q_desc, [q_row + HALF_M, q_col], q_bar, q_smem.index(1))
    _load_tile(k_desc, k_smem, k_ready, k_empty, 0, kv_row, kv_col, K_STAGES)
    mbarrier.expect(do_bar, 2 * do_desc.block_type.nbytes)
    tma.async_copy_global_to_shared(do_desc, [q_row, q_col], do_bar, do_smem.index(0))
    tma.async_copy_global_to_shared(do_desc, [q_row + HALF_M, q_col], do_bar, do_smem.index(1))
    _load_tile(v_desc, v_smem, v_ready, v_empty, 0, kv_row, kv_col, V_STAGES)
    for j in range(1, n_tiles):
        offs_n = kv_row + j * BLOCK_N
        _load_tile(k_desc, k_smem, k_ready, k_empty, j, offs_n, kv_col, K_STAGES)
        _load_tile(v_desc, v_smem, v_ready, v_empty, j, offs_n, kv_col, V_STAGES)


@gluon.jit
def _dq_p(s, lse2, qk_scale, lim0, MASKED: gl.constexpr, s_layout: gl.constexpr):
    """P (HALF_M, BLOCK_N) fp32 of one tile from S (the raw wgmma accumulator):
    exp2(S * qk_scale - lse2), the normalised probabilities (lse2 = lse * log2(e); +inf
    for a row that sees no key: P = 0). MASKED: score (r, c) kept iff c <= lim0 + r, else
    -inf before the exp2, so P = 0 there."""
    HALF_M: gl.constexpr = s.shape[0]
    BLOCK_N: gl.constexpr = s.shape[1]
    x = s * qk_scale - gl.expand_dims(lse2, 1)                                  # log2 units
    if MASKED:
        # the row index made opaque (a mov with side effects; so is the consumer's diag):
        # otherwise LLVM hoists the mask's thread-dependent part out of the partitions'
        # dispatch loop to the kernel's entry, where it lives across every loop, and it
        # spilled (offline sm_90a, causal D = 128, 8-16 bytes; 2026-12-01)
        r = gl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r",
                                      [gl.arange(0, HALF_M, layout=gl.SliceLayout(1, s_layout))],
                                      dtype=gl.int32, is_pure=False, pack=1)
        rows = lim0 + r                                                         # (HALF_M,) last visible column
        cols = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))        # (BLOCK_N,)
        visible = gl.expand_dims(cols, 0) <= gl.expand_dims(rows, 1)            # (HALF_M, BLOCK_N)
        x = gl.where(visible, x, float("-inf"))
    return gl.exp2(x)


@gluon.jit
def _dq_ds(p, dp, delta, dtype: gl.constexpr, ds_layout: gl.constexpr):
    """dS = P * (dP - delta) (HALF_M, BLOCK_N) in fp32, rounded to the operands' dtype and
    moved to the A-operand layout of the dS K wgmma (in registers)."""
    ds = p * (dp - gl.expand_dims(delta, 1))
    return gl.convert_layout(ds.to(dtype), ds_layout)


@gluon.jit
def _dq_step(j, q, do, k_smem, v_smem, k_ready, v_ready, k_empty, v_empty, s_zero, ds, dq, lse2, delta, qk_scale,
             diag, BLOCK_N: gl.constexpr, K_STAGES: gl.constexpr, V_STAGES: gl.constexpr, MASKED: gl.constexpr,
             s_layout: gl.constexpr, ds_layout: gl.constexpr, V_EARLY: gl.constexpr = False):
    """Tile j >= 1 of one consumer: dQ += dS_{j-1} K_{j-1} and S_j = Q K_j^T in flight
    together, K_{j-1} and V_{j-1} released once the first retired, then dP_j = dO V_j^T
    with P_j's exp2 under it, then dS_j (MASKED: the causal mask). Returns (dS_j as the A
    operand, dQ)."""
    dtype: gl.constexpr = q.dtype
    ks = j % K_STAGES
    k_prev = (j - 1) % K_STAGES
    vs = j % V_STAGES
    dq_tok = warpgroup_mma(ds, k_smem.index(k_prev), dq, is_async=True)           # (HALF_M, HEAD_DIM)
    mbarrier.wait(k_ready.index(ks), (j // K_STAGES) & 1)
    s_tok = warpgroup_mma(q, k_smem.index(ks).permute((1, 0)), s_zero, use_acc=False, is_async=True)
    # dQ_{j-1} retired (groups retire in order; S_j may still run): tile j - 1's K and V
    # are free (V_{j-1}'s dP retired in the previous step; released here with K, one
    # release point a tile: releasing V right after its dP spilled 8 bytes in the causal
    # kernel at 2 / 2 stages, offline)
    dq, ds = warpgroup_mma_wait(1, deps=[dq_tok, ds])
    mbarrier.arrive(k_empty.index(k_prev))
    if not V_EARLY:
        mbarrier.arrive(v_empty.index((j - 1) % V_STAGES))
    s = warpgroup_mma_wait(0, deps=[s_tok])                                        # (HALF_M, BLOCK_N)
    mbarrier.wait(v_ready.index(vs), (j // V_STAGES) & 1)
    dp_tok = warpgroup_mma(do, v_smem.index(vs).permute((1, 0)), s_zero, use_acc=False, is_async=True)
    p = _dq_p(s, lse2, qk_scale, diag - j * BLOCK_N, MASKED, s_layout)            # under dP_j
    dp = warpgroup_mma_wait(0, deps=[dp_tok])                                      # (HALF_M, BLOCK_N)
    if V_EARLY:
        # V_j's only reader (dP_j) retired: released now, so that V_{j+1} loads under dS_j,
        # dQ_j and S_{j+1} (with V_STAGES = 1 the load would otherwise start only after
        # dQ_j retired in the next step, right before its dP waits for it)
        mbarrier.arrive(v_empty.index(vs))
    return _dq_ds(p, dp, delta, dtype, ds_layout), dq


@gluon.jit
def _dq_consume(q_smem, do_smem, k_smem, v_smem, q_bar, do_bar, k_ready, v_ready, k_empty, v_empty, dq_desc, LSE,
                DELTA, pid_m, pid_bh, seqlen_q, seqlen_k, nheads, group, qk_scale, softmax_scale,
                WG: gl.constexpr, HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
                K_STAGES: gl.constexpr, V_STAGES: gl.constexpr, CAUSAL: gl.constexpr, V_EARLY: gl.constexpr = False):
    """One consumer warpgroup: rows WG * HALF_M .. of the block, n_tiles K / V tiles (the
    loader's count), tiles [1, n_full) unmasked and (CAUSAL) [n_full, n_tiles) masked;
    tile 0 peeled (masked when CAUSAL). diag: the last key the block's first row sees.
    The block's bookkeeping is computed here, in the partition (_tile_coords; the loader
    does the same): computed before gl.warp_specialize and passed in, the causal kernel's
    mask offset was hoisted to the kernel's entry and spilled across the partitions'
    setmaxnreg (8 bytes at D = 128, offline, 2026-12-01)."""
    dtype: gl.constexpr = q_smem.dtype
    HALF_M: gl.constexpr = BLOCK_M // 2
    # WINDOW off: n_left0 / n_left1 are the constexpr 1 (only tile 0 peeled), tiles start at 0
    q_row, q_col, kv_row, kv_col, n_tiles, _nl0, _nl1, n_full0, n_full1, diag, lse_off = _tile_coords(
        pid_m, pid_bh, seqlen_q, seqlen_k, nheads, group, 0, 0, HEAD_DIM, BLOCK_M, BLOCK_N, CAUSAL, False)
    if WG == 0:
        n_full = n_full0
    else:
        n_full = n_full1
    # wgmma accumulators of one warpgroup: S / dP (HALF_M, BLOCK_N), dQ (HALF_M, HEAD_DIM)
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, BLOCK_N, 16])
    dq_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                        instr_shape=[16, HEAD_DIM, 16])
    ds_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=dq_layout, k_width=2)
    row_s: gl.constexpr = gl.SliceLayout(1, s_layout)

    q = q_smem.index(WG)                                                     # (HALF_M, HEAD_DIM) smem
    do = do_smem.index(WG)                                                   # (HALF_M, HEAD_DIM) smem
    offs_m = lse_off + WG * HALF_M + gl.arange(0, HALF_M, layout=row_s)
    lse2 = gl.load(LSE + offs_m) * LOG2E                                     # (HALF_M,), +inf: no key
    delta = gl.load(DELTA + offs_m)                                          # (HALF_M,)
    s_zero = gl.zeros([HALF_M, BLOCK_N], gl.float32, s_layout)               # (HALF_M, BLOCK_N), never read
    dq = gl.zeros([HALF_M, HEAD_DIM], gl.float32, dq_layout)                 # (HALF_M, HEAD_DIM)
    diag = diag + WG * HALF_M                                                # this warpgroup's first row's
    # opaque (see _dq_p): LLVM hoisted its invariant part to the kernel's entry (a spill)
    diag = gl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [diag], dtype=gl.int32, is_pure=False, pack=1)

    # tile 0: S_0, dP_0 (P_0's exp2 under it), dS_0; no dQ in flight yet
    mbarrier.wait(q_bar, 0)
    mbarrier.wait(k_ready.index(0), 0)
    s_tok = warpgroup_mma(q, k_smem.index(0).permute((1, 0)), s_zero, use_acc=False, is_async=True)
    s = warpgroup_mma_wait(0, deps=[s_tok])
    mbarrier.wait(do_bar, 0)
    mbarrier.wait(v_ready.index(0), 0)
    dp_tok = warpgroup_mma(do, v_smem.index(0).permute((1, 0)), s_zero, use_acc=False, is_async=True)
    p = _dq_p(s, lse2, qk_scale, diag, CAUSAL, s_layout)                    # under dP_0
    dp = warpgroup_mma_wait(0, deps=[dp_tok])
    if V_EARLY:
        mbarrier.arrive(v_empty.index(0))                                    # V_0's dP retired
    ds = _dq_ds(p, dp, delta, dtype, ds_layout)                              # (HALF_M, BLOCK_N) A operand

    # the fully visible tiles: no mask work
    for j in range(1, n_full):
        ds, dq = _dq_step(j, q, do, k_smem, v_smem, k_ready, v_ready, k_empty, v_empty, s_zero, ds, dq, lse2,
                          delta, qk_scale, diag, BLOCK_N, K_STAGES, V_STAGES, False, s_layout, ds_layout, V_EARLY)
    if CAUSAL:
        # the diagonal tiles (and, for the upper warpgroup, tiles hidden from all its rows
        # that the lower one needs: dS = 0, still waited for and released)
        for j in range(n_full, n_tiles):
            ds, dq = _dq_step(j, q, do, k_smem, v_smem, k_ready, v_ready, k_empty, v_empty, s_zero, ds, dq, lse2,
                              delta, qk_scale, diag, BLOCK_N, K_STAGES, V_STAGES, True, s_layout, ds_layout,
                              V_EARLY)

    # the last tile's dQ
    last = (n_tiles - 1) % K_STAGES
    dq_tok = warpgroup_mma(ds, k_smem.index(last), dq, is_async=True)
    dq, ds = warpgroup_mma_wait(0, deps=[dq_tok, ds])
    mbarrier.arrive(k_empty.index(last))
    if not V_EARLY:
        mbarrier.arrive(v_empty.index((n_tiles - 1) % V_STAGES))

    # epilogue: dQ * scale through TMA from this warpgroup's half of Q's buffer (its last
    # reader, S of the last tile, retired)
    q.store((dq * softmax_scale).to(dtype))
    fence_async_shared()
    tma.async_copy_shared_to_global(dq_desc, [q_row + WG * HALF_M, q_col], q)
    tma.store_wait(0)


@gluon.jit
def attn_bwd_dq_gluon_kernel(
    q_desc, k_desc, v_desc, do_desc, dq_desc,  # host TensorDescriptors over (B * N, heads * D) views;
                                               # boxes q / do / dq (HALF_M, D), k / v (BLOCK_N, D)
    LSE, DELTA,                                # (B, H, Nq) fp32 contiguous: lse (natural log), delta
    seqlen_q, seqlen_k, nheads, group, qk_scale, softmax_scale,
    HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, K_STAGES: gl.constexpr,
    V_STAGES: gl.constexpr, CAUSAL: gl.constexpr = False, V_EARLY: gl.constexpr = False, BAND: gl.constexpr = 0,
):
    gl.static_assert(K_STAGES >= 2, "the K ring needs 2 stages at least (K_j is read in tile j + 1's step)")
    gl.static_assert(V_STAGES >= 1, "the V ring needs a stage")
    HALF_M: gl.constexpr = BLOCK_M // 2
    dtype: gl.constexpr = q_desc.dtype
    # grid (n_m, B * H): query block fastest (one head's blocks share K / V in L2); CAUSAL:
    # the last blocks see the most key tiles and go first
    # BAND > 0 (session 35, an A/B, not routed): grid (n_m * B * H,), bands of BAND batch x heads
    # (B * H a multiple of BAND); inside a band, rank-major: every head's block of rank 0 (CAUSAL:
    # the heaviest), then rank 1, ... - heaviest first across BAND heads instead of one head's blocks
    # in a row. BAND = B * H: heaviest first over the whole grid.
    if BAND:
        n_m = seqlen_q // BLOCK_M
        pid = gl.program_id(0)
        band_idx = pid // (n_m * BAND)
        r = pid - band_idx * (n_m * BAND)
        if CAUSAL:
            pid_m = n_m - 1 - r // BAND
        else:
            pid_m = r // BAND
        pid_bh = band_idx * BAND + r % BAND
    else:
        if CAUSAL:
            pid_m = gl.num_programs(0) - 1 - gl.program_id(0)
        else:
            pid_m = gl.program_id(0)
        pid_bh = gl.program_id(1)                # batch * nheads + head

    q_smem = gl.allocate_shared_memory(dtype, [2, HALF_M, HEAD_DIM], q_desc.layout)             # (2, HALF_M, D)
    do_smem = gl.allocate_shared_memory(dtype, [2, HALF_M, HEAD_DIM], do_desc.layout)           # (2, HALF_M, D)
    k_smem = gl.allocate_shared_memory(dtype, [K_STAGES, BLOCK_N, HEAD_DIM], k_desc.layout)     # (KS, BLOCK_N, D)
    v_smem = gl.allocate_shared_memory(dtype, [V_STAGES, BLOCK_N, HEAD_DIM], v_desc.layout)     # (VS, BLOCK_N, D)
    q_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    do_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    k_ready = gl.allocate_shared_memory(gl.int64, [K_STAGES, 1], mbarrier.MBarrierLayout())
    k_empty = gl.allocate_shared_memory(gl.int64, [K_STAGES, 1], mbarrier.MBarrierLayout())
    v_ready = gl.allocate_shared_memory(gl.int64, [V_STAGES, 1], mbarrier.MBarrierLayout())
    v_empty = gl.allocate_shared_memory(gl.int64, [V_STAGES, 1], mbarrier.MBarrierLayout())
    mbarrier.init(q_bar, count=1)
    mbarrier.init(do_bar, count=1)
    for i in gl.static_range(K_STAGES):
        mbarrier.init(k_ready.index(i), count=1)
        mbarrier.init(k_empty.index(i), count=2)     # one arrival per consumer warpgroup
    for i in gl.static_range(V_STAGES):
        mbarrier.init(v_ready.index(i), count=1)
        mbarrier.init(v_empty.index(i), count=2)
    fence_async_shared()

    WG0: gl.constexpr = 0
    WG1: gl.constexpr = 1
    gl.warp_specialize([
        (_dq_consume, (q_smem, do_smem, k_smem, v_smem, q_bar, do_bar, k_ready, v_ready, k_empty, v_empty, dq_desc,
                       LSE, DELTA, pid_m, pid_bh, seqlen_q, seqlen_k, nheads, group, qk_scale, softmax_scale, WG0,
                       HEAD_DIM, BLOCK_M, BLOCK_N, K_STAGES, V_STAGES, CAUSAL, V_EARLY)),
        (_dq_consume, (q_smem, do_smem, k_smem, v_smem, q_bar, do_bar, k_ready, v_ready, k_empty, v_empty, dq_desc,
                       LSE, DELTA, pid_m, pid_bh, seqlen_q, seqlen_k, nheads, group, qk_scale, softmax_scale, WG1,
                       HEAD_DIM, BLOCK_M, BLOCK_N, K_STAGES, V_STAGES, CAUSAL, V_EARLY)),
        (_dq_load, (q_desc, k_desc, v_desc, do_desc, q_smem, do_smem, k_smem, v_smem, q_bar, do_bar, k_ready,
                    v_ready, k_empty, v_empty, pid_m, pid_bh, seqlen_q, seqlen_k, nheads, group, HEAD_DIM, BLOCK_M,
                    BLOCK_N, K_STAGES, V_STAGES, CAUSAL)),
    ], [4, LOADER_WARPS], [CONSUMER_REGS, LOADER_REGS])

    mbarrier.invalidate(q_bar)
    mbarrier.invalidate(do_bar)
    for i in gl.static_range(K_STAGES):
        mbarrier.invalidate(k_ready.index(i))
        mbarrier.invalidate(k_empty.index(i))
    for i in gl.static_range(V_STAGES):
        mbarrier.invalidate(v_ready.index(i))
        mbarrier.invalidate(v_empty.index(i))
