"""FlashAttention-2 backward in ONE pass for Hopper at head dim 256, in Gluon: dK / dV and dQ
(reduce-added in fp32 by TMA, as kernels/bwd_gluon_fused.py does at D = 64 / 128).

Status (2026-12-02, a session-32 helper): written and compiled offline for sm_90a
(bench/d256_bwd_gluon_compile.py), non-causal and CAUSAL, bf16 / fp16; first run on the H200 in
session 32 (s32/callC: its GPU tests passed, 1.07-1.20x the Triton route, 0.87-0.93x cuDNN) and
routed there (policy.gluon_bwd_d256, GLUON_BWD_D256_MIN_N: deterministic=False, plain and
causal from 512 since session 33). Host side launchers/backward_gluon_d256.py (prepare,
bwd_into); tests tests/test_bwd_gluon_d256.py. Design and the candidates weighed:
bench/wip/d256-bwd-gluon.md (candidate (c), V1); the compile probe it grew from:
bench/wip/d256-bwd-gluon-proto.py. NON-DETERMINISTIC dq (fp32 partial tiles reduce-added in
whatever order the key blocks reach L2); dk / dv deterministic. For deterministic=False only.

Why not kernels/bwd_gluon_fused.py's layout: at D = 256 dK + dV of 128 keys are 256 KB of fp32,
the whole register file, so a CTA owns 64 keys; two WGs of 32 keys each would make S^T / dP^T
m64 tiles of 32 keys (impossible: wgmma's M is 64), and two WGs each holding dK / dV of all 64
keys over half of D (128 registers) must both see S^T / dP^T, which cost 7 matmuls a tile or an
fp32 exchange that does not fit shared memory (the design note's (a1) - (a3)). Here:

  one CTA per (64 keys, batch x KV head), grid (Nk / 64, B * Hk); 4 partitions (13 warps):
  WG_S  (the default partition, 4 warps, 168 registers): per ring tile g (BLOCK_M = 64 queries
        of one query head of the group)
            S^T  = K Q^T                        (64 keys, 64 queries) fp32, A K, B Q^T (smem)
            dP^T = V dO^T                       (64, 64) fp32, A V, B dO^T (smem)
            P^T  = exp2(S^T * scale * log2(e) - lse * log2(e))   (CAUSAL: -inf above the diagonal first)
            dS^T = P^T (dP^T * scale - delta * scale)             (softmax_scale folded in here)
            P^T, dS^T (16-bit) -> p_smem / ds_smem; arrive pds_ready
            dQ[:, 64 c ..] = dS K[:, 64 c ..]   c = 0 .. 3: (64 queries, 64) fp32 each,
                                                A the permuted dS^T, B K's column chunk;
                                                staged (16 KB fp32) and TMA reduce-added into
                                                dq_accum (no scale: dS already carries it)
  WG_0 / WG_1 (workers, 4 warps each, 160 registers): D-half w = 128 w .. 128 w + 127
            dV[:, half w] += P^T dO[:, half w]  (64 keys, 128) fp32, both operands smem
            dK[:, half w] += dS^T Q[:, half w]  (64, 128) fp32
        then arrive empty (the ring stage) and pds_free (the P^T / dS^T buffer); 128 fp32
        accumulator registers a thread, only 4 async wgmmas a tile and their bookkeeping.
  loader (1 warp, 24 registers): K, V once (box (64, 256)), Q / dO into a ring of NUM_STAGES.
  dK / dV leave through K / V's column halves (TMA boxes (64, 128)) once WG_S's last dQ wgmma
  read K (kv_free). dK needs no epilogue scale (dS^T carries softmax_scale); dq_accum is cast
  to q's dtype on the host (kernels/dq_accum.py's cast_kernel), as the fused route does.

softmax_scale folded into dS^T (the design note's item 2): dS^T = P^T (dP^T - delta) scale is
computed as P^T (dP^T * scale - delta * scale), one FFMA an element where the subtraction was
(delta * scale once a column vector), so the 16-bit dS^T the dK and dQ wgmmas read is already
scaled: no dK epilogue multiply, no 128 FMUL a tile on dQ's staging. The math is the same; the
bits differ from the Triton route's (the rounding of dS^T to 16 bits happens after the scale).

Shared memory (bytes, BLOCK_M = BLOCK_N = 64, 2 stages; compiled: 229,752 of 232,448):
  K 32 KB + V 32 KB + ring 2 x (Q 32 KB + dO 32 KB) + P^T 8 KB + dS^T 8 KB + dq staging
  (64 x 64 fp32) 16 KB = 224 KB, plus barriers and layout-conversion scratch. A third stage
  (+64 KB), a second P^T / dS^T buffer plus the staging (+16 KB), or a 128-column staging
  (+16 KB) do not fit: the one P^T / dS^T buffer lets WG_S run at most one tile ahead of
  WG_0 / WG_1.

Barriers (counts; ring tile g uses stage g % NUM_STAGES, phase g // NUM_STAGES):
  kv_bar        count 1 (expect + TMA bytes)  K / V loaded: WG_S waits parity 0.
  ready[s]      count 1 (expect + TMA bytes)  Q / dO of a tile in stage s: WG_S, WG_0, WG_1
                wait parity (g // NUM_STAGES) & 1.
  empty[s]      count 3                       WG_S after S^T / dP^T retired, WG_0 / WG_1 after
                their dK / dV retired; the loader waits parity ((g // NUM_STAGES) & 1) ^ 1
                before refilling (a fresh barrier passes parity 1).
  pds_ready     count 1                       WG_S after P^T / dS^T of tile g stored and fenced
                (the arrive is a bar.sync of the WG, then one thread's arrival, so all 128
                threads' stores and fences precede it); WG_0 / WG_1 wait parity g & 1.
  pds_free      count 2                       WG_0 / WG_1 after their dK / dV wgmmas of tile g
                (the readers of P^T / dS^T) retired; WG_S waits parity (g & 1) ^ 1 before
                storing tile g's P^T / dS^T (phase g - 1 complete; fresh: passes). WG_S's own
                dQ reads of dS^T of tile g - 1 are waited (warpgroup_mma_wait) before its
                store of tile g in program order.
  kv_free       count 1                       WG_S after its last dQ wgmma retired (K no longer
                read; V's last read, dP^T, retired before); WG_0 / WG_1 wait parity 0 before
                overwriting their K / V column halves with dK / dV.
  No phase completes twice before its waiter looks: ready[s]'s next phase needs empty[s]'s
  arrival of the very waiter; pds_ready's phase g + 1 needs pds_free's phase g, i.e. both WG_w
  past their pds_ready wait of g; pds_free's phase g needs pds_ready's phase g, which WG_S
  makes after its pds_free wait of g. No cycle: each wait of tile g depends on arrivals of
  earlier tiles, or on WG_S's arrival of tile g, made after WG_S's waits of tile g only.
  Every partition visits every ring tile (CAUSAL too): every barrier gets all its arrivals.

ROTATE (non-causal; bwd_gluon_fused.py's): key block pid_n starts its walk over each head's
query tiles at (pid_n * n_m) // (Nk / 64), so the ~132 resident CTAs reduce into different
rows of dq_accum; the loader and WG_S take the same order (_tile_row), WG_0 / WG_1 need no
coordinates.

CAUSAL (the library's bottom-right mask: query i sees key c iff c <= i + Nk - Nq): the
partitions walk each head's tiles from j0, the first whose last row sees the block's first
key (bwd_gluon._block_coords with BLOCK_N = 64); no ROTATE. With BLOCK_M = BLOCK_N = 64 and
Nq, Nk multiples of 64, rel = (tile's first row) + Nk - Nq - n0 is a multiple of 64: only the
first tile of each head (rel = 0, the diagonal) is masked, in WG_S only (x = -inf above the
diagonal, before exp2; the select under a run-time branch, as bwd_gluon_fused.py's). WG_0 /
WG_1 are the plain kernel's. Rows that see no key (Nq > Nk): lse = +inf, P = 0, dS = 0; query
tiles no key block loads keep dq_accum's zeros: dq = 0.

DQ_ATOMIC (the design note's V2, for the A/B; host prepare(..., dq_atomic=True), default off): dQ
added from the registers by red.global.add.v2.f32 (_d256_dq_red: 2 chunks of 128 columns,
m64n128k16, 64 registers) instead of 4 staged TMA reduces: no staging buffer, so P^T / dS^T get
two buffers (pds_ready / pds_free a pair, buffer g % 2, parities (g // 2) & 1: WG_S may run two
tiles ahead of WG_0 / WG_1), and 128 KB a tile less shared-memory traffic (the staging's
st.shared and the reduce's read), for 8-byte L2 requests in place of bulk reduces: the A/B says
whether shared memory (V1's bound by the note's count) or L2 binds. The same barrier protocol
with NUM_PDS = 2 (the arguments above hold with tile g - 2 in place of g - 1).

DKDV_ONLY (session 33, issue 4; host prepare / bwd_into(..., split_dq=True), default off: the
routed variants' SASS byte-identical, bench/d256_split_sass_hash.py): FlashAttention-2's split. WG_S
computes S^T, dP^T, P^T, dS^T and hands P^T / dS^T over as before but issues no dQ wgmma and no
reduce: no staging buffer, so P^T / dS^T get two buffers (NUM_PDS = 2, DQ_ATOMIC's protocol; WG_S may
run two tiles ahead of WG_0 / WG_1), and dq_desc / DQ are unread (the host passes a (64, 64)
stand-in). dK / dV are bitwise the routed kernel's (WG_0 / WG_1's arithmetic and tile order
unchanged); dQ comes from kernels/bwd_gluon_dq.py at D = 256 (each query block writes its own rows
in q's dtype: the whole split backward is deterministic). s33/callA's probe-nodq (no dQ on a
p_early / dq_rs variant of this kernel) ran 2,020-2,060 us at N = 4k, B = 4, H = 8 against the
routed kernel's 4,250-4,324. Offline (sm_90a): 0 spills, 229,752 B, setmaxnreg 168 / 160 / 160 /
24, HGMMA 32 x 64x64x16 + 16 x 64x128x16.tnspB, no UTMAREDG; WG_S's tile loop 413 instructions a
warp (causal 469; 32 HGMMA, 32 EX2, 6 BAR), WG_0 / WG_1 83 / 85 (8 HGMMA).

GQA: the ring walks group x n_m tiles (the group's query heads one after the other), dK / dV
summed over the group in the registers, dQ reduce-added into each query head's own rows.

Offline (bench/d256_bwd_gluon_compile.py, sm_90a, Triton 3.6.0; bf16 / fp16; also through the JIT
binder with the launcher's arguments): 13 warps, setmaxnreg 168 / 160 / 160 / 24; shared memory
229,752 B; HGMMA S^T / dP^T 32 x 64x64x16 (K-major A and B), dK / dV 16 x 64x128x16 .tnspB, dQ 16 x
64x64x16 .tnspA.tnspB (V2: 8 x 64x128x16 .tnspA.tnspB); no wgmma-serialisation advisory.
  | variant | spill B | WG_S tile loop (instr a warp; HGMMA, EX2, BAR) | WG_0 / WG_1 loops |
  | V1 plain | 0 | 626 (48, 32, 15; 4 UTMAREDG) | 61 / 63 |
  | V1 causal | 0 | 684 (48, 32, 15; 4 UTMAREDG) | 61 / 63 |
  | V2 plain | 0 | 672 (40, 32, 7; 64 REDG.E.ADD.F32x2) | 83 / 85 |
  | V2 causal | 8 (1 STL + 1 LDL a tile in WG_S's loop) | 748 | 83 / 85 |
  | V1, dK / dV WGs at 152 | 2,560 (ptxas serialises the wgmmas) | | |

Written before any run (the barrier protocol above, the (64, 128) TMA stores of dK / dV from K /
V's column halves, the 128-column slices of the 128-byte-swizzled Q / dO tiles as wgmma B
operands, .tnspB); since session 32 all checked on the H200 by tests/test_bwd_gluon_d256.py's GPU
tests (float64 reference, V1 and DQ_ATOMIC).
"""
from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, tma, warpgroup_mma,
                                                               warpgroup_mma_wait)

from .bwd_gluon import LOADER_REGS, LOADER_WARPS, LOG2E, _block_coords
from .bwd_gluon_fused import _rotation, _tile_row, async_reduce_add

# (BLOCK_M, BLOCK_N, NUM_STAGES) at D = 256: 64 queries a ring tile, 64 keys a CTA, 2 stages
# (shared memory in the module doc: 229,752 B compiled; 3 stages need 288 KB)
D256_CONFIG = (64, 64, 2)
# the dQ chunk: 64 columns (a (64, 64) fp32 accumulator, 32 registers; staging 16 KB). 128
# columns need a 32 KB staging: 246 KB, no (the design note's table)
DQ_CHUNK: gl.constexpr = gl.constexpr(64)
# DQ_ATOMIC's chunk (V2: no staging, so 128 columns fit; m64n128k16, 64 registers a thread)
DQ_CHUNK_ATOMIC: gl.constexpr = gl.constexpr(128)
# setmaxnreg of WG_0 / WG_1 (WG_S takes what is left of 512 x 4 warps' worth: 168; the loader
# 24). Offline: 160 spills nothing; 152 spills 2,560 bytes here (384 local accesses, the wgmmas
# serialised; the design note's probe: 2,624 at 152, 2,752 at 144)
DKDV_REGS = 160
W0: gl.constexpr = gl.constexpr(0)
W1: gl.constexpr = gl.constexpr(1)


@gluon.jit
def _d256_load(q_desc, do_desc, k_desc, v_desc, q_smem, do_smem, k_smem, v_smem, kv_bar, ready, empty, seqlen_q,
               seqlen_k, nheads_k, group, HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
               NUM_STAGES: gl.constexpr, CAUSAL: gl.constexpr, ROTATE: gl.constexpr):
    """The loader warp: K, V of the block once; Q / dO of every ring tile (the group's heads in
    turn, each from its tile j0, in ROTATE's order) into stage g % NUM_STAGES."""
    b, hk, n0, j0, n_m = _block_coords(gl.program_id(0), gl.program_id(1), seqlen_q, seqlen_k, nheads_k, BLOCK_M,
                                       BLOCK_N, CAUSAL)
    rot = _rotation(n_m, ROTATE, CAUSAL)
    kv_row = b * seqlen_k + n0
    # K and V (BLOCK_N, D) each: one arrival (the expect) plus the copies' bytes
    mbarrier.expect(kv_bar, 2 * k_desc.block_type.nbytes)
    tma.async_copy_global_to_shared(k_desc, [kv_row, hk * HEAD_DIM], kv_bar, k_smem)
    tma.async_copy_global_to_shared(v_desc, [kv_row, hk * HEAD_DIM], kv_bar, v_smem)
    STAGE_BYTES: gl.constexpr = 2 * q_desc.block_type.nbytes                   # Q, dO
    for g in range(group * n_m):
        hh, j = _tile_row(g, n_m, rot)
        h = hk * group + hh
        m = (j0 + j) * BLOCK_M                                                 # the tile's first query row
        stage = g % NUM_STAGES
        # all three consumers released the stage's previous use (tile g - NUM_STAGES)
        mbarrier.wait(empty.index(stage), ((g // NUM_STAGES) & 1) ^ 1)
        bar = ready.index(stage)
        mbarrier.expect(bar, STAGE_BYTES)
        tma.async_copy_global_to_shared(q_desc, [b * seqlen_q + m, h * HEAD_DIM], bar, q_smem.index(stage))
        tma.async_copy_global_to_shared(do_desc, [b * seqlen_q + m, h * HEAD_DIM], bar, do_smem.index(stage))


@gluon.jit
def _d256_softmax(q_smem, do_smem, k_smem, v_smem, p_smem, ds_smem, dq_stage, kv_bar, ready, empty, pds_ready,
                  pds_free, kv_free, dq_desc, DQ, LSE, DELTA, seqlen_q, seqlen_k, nheads, nheads_k, group,
                  softmax_scale, qk_scale, HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
                  NUM_STAGES: gl.constexpr, CAUSAL: gl.constexpr, ROTATE: gl.constexpr, DQ_ATOMIC: gl.constexpr,
                  NUM_PDS: gl.constexpr, DKDV_ONLY: gl.constexpr = False):
    """WG_S: S^T, dP^T, P^T, dS^T (scaled) of every ring tile, P^T / dS^T handed to WG_0 / WG_1
    through shared memory (buffer g % NUM_PDS), and dQ = dS K in D / DQ_CHUNK chunks, TMA
    reduce-added (DQ_ATOMIC: D / DQ_CHUNK_ATOMIC chunks by red.global.add.v2.f32, _d256_dq_red)."""
    dtype: gl.constexpr = k_smem.dtype
    # accumulators: S^T / dP^T (BLOCK_N keys, BLOCK_M queries), a dQ chunk (BLOCK_M, DQ_CHUNK)
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, BLOCK_M, 16])
    q_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, DQ_CHUNK, 16])
    col: gl.constexpr = gl.SliceLayout(0, s_layout)                            # the query axis of S^T
    vec_layout: gl.constexpr = gl.BlockedLayout([1], [32], [4], [0])           # one row a thread
    b, hk, n0, j0, n_m = _block_coords(gl.program_id(0), gl.program_id(1), seqlen_q, seqlen_k, nheads_k, BLOCK_M,
                                       BLOCK_N, CAUSAL)
    rot = _rotation(n_m, ROTATE, CAUSAL)
    s_zero = gl.zeros([BLOCK_N, BLOCK_M], gl.float32, s_layout)                # never read (use_acc=False)
    dq_zero = gl.zeros([BLOCK_M, DQ_CHUNK], gl.float32, q_layout)              # never read (use_acc=False)
    # lse / delta (B, H, Nq) flat: ring tile g reads rows vec_base + hh * Nq + m ..
    vec_base = (b * nheads + hk * group) * seqlen_q
    # CAUSAL: rel of the head's first tile j0 (tile j: + j * BLOCK_M); key c, query r of the
    # tile kept iff c <= r + rel
    rel0 = j0 * BLOCK_M + (seqlen_k - seqlen_q) - n0
    mbarrier.wait(kv_bar, 0)
    n_tiles = group * n_m
    for g in range(n_tiles):
        hh, j = _tile_row(g, n_m, rot)
        h = hk * group + hh
        m = (j0 + j) * BLOCK_M                                                 # the tile's first query row
        stage = g % NUM_STAGES
        buf = g % NUM_PDS                                                      # P^T / dS^T buffer
        # lse / delta: one value a thread, issued before the stage's wait
        offs_m = vec_base + hh * seqlen_q + m + gl.arange(0, BLOCK_M, layout=vec_layout)    # (BLOCK_M,)
        lse_c = gl.load(LSE + offs_m)
        delta_c = gl.load(DELTA + offs_m)
        mbarrier.wait(ready.index(stage), (g // NUM_STAGES) & 1)
        q = q_smem.index(stage)                                                # (BLOCK_M, D) smem
        do = do_smem.index(stage)                                              # (BLOCK_M, D) smem
        s_tok = warpgroup_mma(k_smem, q.permute((1, 0)), s_zero, use_acc=False, is_async=True)
        dp_tok = warpgroup_mma(v_smem, do.permute((1, 0)), s_zero, use_acc=False, is_async=True)
        s = warpgroup_mma_wait(1, deps=[s_tok])                                # (BLOCK_N, BLOCK_M) fp32
        lse_v = gl.convert_layout(lse_c, col)                                  # (BLOCK_M,)
        x = s * qk_scale - gl.expand_dims(lse_v * LOG2E, 0)                    # (BLOCK_N, BLOCK_M) log2 units
        if CAUSAL:
            # only the diagonal tile (rel = 0) hides keys: rel is a multiple of 64 (module doc);
            # the select under a run-time branch keeps it out of the other tiles
            rel = rel0 + j * BLOCK_M
            if rel < BLOCK_N - 1:
                offs_c = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, s_layout))    # key in the block
                offs_r = gl.arange(0, BLOCK_M, layout=col)                           # query in the tile
                x = gl.where(gl.expand_dims(offs_c - rel, 1) <= gl.expand_dims(offs_r, 0), x, float("-inf"))
        p = gl.exp2(x)                                                         # (BLOCK_N, BLOCK_M) P^T
        dp = warpgroup_mma_wait(0, deps=[dp_tok])                              # (BLOCK_N, BLOCK_M) dP^T
        # Q and dO of this stage no longer read by WG_S (one of empty's 3 arrivals)
        mbarrier.arrive(empty.index(stage))
        delta = gl.convert_layout(delta_c, col)                                # (BLOCK_M,)
        # dS^T = P^T (dP^T - delta) * scale, as P^T (dP^T * scale - delta * scale): an FFMA an
        # element, and the 16-bit dS^T carries softmax_scale for both dK and dQ
        ds = (p * (dp * softmax_scale - gl.expand_dims(delta * softmax_scale, 0))).to(dtype)
        # P^T / dS^T's buffer `buf` free: WG_0 / WG_1 retired their dK / dV wgmmas of tile
        # g - NUM_PDS (phase g // NUM_PDS - 1 of pds_free[buf]; a fresh barrier passes parity 1 for
        # g < NUM_PDS). WG_S's own dQ wgmmas of that tile were waited in its program order.
        mbarrier.wait(pds_free.index(buf), ((g // NUM_PDS) & 1) ^ 1)
        pb = p_smem.index(buf)                                                 # (BLOCK_N, BLOCK_M) smem
        db = ds_smem.index(buf)                                                # (BLOCK_N, BLOCK_M) smem
        pb.store(p.to(dtype))
        db.store(ds)
        fence_async_shared()                                                   # generic writes -> wgmma reads
        mbarrier.arrive(pds_ready.index(buf))                                  # bar.sync of the WG, one arrival
        dq_row = b * seqlen_q + m
        if DKDV_ONLY:
            pass                                                               # dQ by the separate pass
        elif DQ_ATOMIC:
            _d256_dq_red(db, k_smem, DQ, dq_row, h * HEAD_DIM, nheads * HEAD_DIM, HEAD_DIM, BLOCK_M)
        else:
            # dQ = dS K in chunks of DQ_CHUNK columns: A the permuted dS^T (queries x keys), B K's
            # column chunk (whole 128-byte swizzle blocks of K's (64, 256) tile)
            for c in gl.static_range(HEAD_DIM // DQ_CHUNK):
                tok = warpgroup_mma(db.permute((1, 0)), k_smem.slice(c * DQ_CHUNK, DQ_CHUNK, dim=1), dq_zero,
                                    use_acc=False, is_async=True)
                dq = warpgroup_mma_wait(0, deps=[tok])                         # (BLOCK_M, DQ_CHUNK) fp32
                # the previous reduce has finished reading the staging (bulk group wait of the issuing
                # thread), then the whole WG past that point before anyone overwrites it
                tma.store_wait(0)
                gl.thread_barrier()
                dq_stage.store(dq)                                             # (already scaled: dS^T is)
                fence_async_shared()
                async_reduce_add(dq_desc, [dq_row, h * HEAD_DIM + c * DQ_CHUNK], dq_stage)
    # K no longer read by WG_S (its last dQ wgmma waited above): WG_0 / WG_1 may overwrite K / V
    mbarrier.arrive(kv_free)
    tma.store_wait(0)                                                          # the last reduce's read of dq_stage


@gluon.jit
def _d256_dq_red(db, k_smem, DQ, dq_row, dq_col, stride_dqm, HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr):
    """DQ_ATOMIC (V2 of the design note): dQ = dS K in D / DQ_CHUNK_ATOMIC chunks of 128 columns
    (m64n128k16, a (BLOCK_M, 128) fp32 accumulator: 64 registers), each added straight from the
    registers into dq_accum[dq_row + r, dq_col + 128 c + col] by red.global.add.v2.f32 (no staging,
    no bulk-group wait: the 128 KB a tile of staging traffic V1 pays goes; L2 gets 8-byte requests
    instead of bulk reduces). The v2 form relies on inline_asm_elementwise's pack = 2 handing each
    call two register-adjacent elements of the wgmma accumulator, which are one row's columns 2t,
    2t + 1 (NVMMA v3: a thread's registers go (r, c), (r, c + 1), (r + 8, c), ...): an 8-byte aligned
    address, the second element at + 4 bytes. Checked numerically only by the GPU tests (dq
    against float64). int32 offsets: the launcher refuses B * Nq * H * D >= 2^31."""
    qa_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                        instr_shape=[16, DQ_CHUNK_ATOMIC, 16])
    dq_zero = gl.zeros([BLOCK_M, DQ_CHUNK_ATOMIC], gl.float32, qa_layout)      # never read (use_acc=False)
    offs_r = gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, qa_layout))       # query row in the tile
    offs_c = gl.arange(0, DQ_CHUNK_ATOMIC, layout=gl.SliceLayout(0, qa_layout))
    for c in gl.static_range(HEAD_DIM // DQ_CHUNK_ATOMIC):
        tok = warpgroup_mma(db.permute((1, 0)), k_smem.slice(c * DQ_CHUNK_ATOMIC, DQ_CHUNK_ATOMIC, dim=1), dq_zero,
                            use_acc=False, is_async=True)
        dq = warpgroup_mma_wait(0, deps=[tok])                                 # (BLOCK_M, 128) fp32, scaled
        ptrs = DQ + gl.expand_dims((dq_row + offs_r) * stride_dqm, 1) \
            + gl.expand_dims(dq_col + c * DQ_CHUNK_ATOMIC + offs_c, 0)          # (BLOCK_M, 128)
        gl.inline_asm_elementwise(
            "{ red.global.add.v2.f32 [$2], {$4, $5}; mov.b32 $0, 0; mov.b32 $1, 0; }",
            "=r,=r,l,l,r,r", [ptrs.to(gl.int64, bitcast=True), dq.to(gl.int32, bitcast=True)],
            dtype=gl.int32, is_pure=False, pack=2)


@gluon.jit
def _d256_dkdv(q_smem, do_smem, k_smem, v_smem, p_smem, ds_smem, ready, empty, pds_ready, pds_free, kv_free, dk_desc,
               dv_desc, seqlen_q, seqlen_k, nheads_k, group, WG: gl.constexpr, HEAD_DIM: gl.constexpr,
               BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, NUM_STAGES: gl.constexpr, CAUSAL: gl.constexpr,
               NUM_PDS: gl.constexpr):
    """WG_w: dV[:, half w] += P^T dO[:, half w], dK[:, half w] += dS^T Q[:, half w] over every
    ring tile (P^T / dS^T from WG_S, Q / dO from the ring: all operands in shared memory), then
    dK / dV (16-bit) out through K / V's column half w."""
    dtype: gl.constexpr = k_smem.dtype
    HALF_D: gl.constexpr = HEAD_DIM // 2
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, HALF_D, 16])
    b, hk, n0, j0, n_m = _block_coords(gl.program_id(0), gl.program_id(1), seqlen_q, seqlen_k, nheads_k, BLOCK_M,
                                       BLOCK_N, CAUSAL)
    dk = gl.zeros([BLOCK_N, HALF_D], gl.float32, o_layout)                     # (BLOCK_N, D / 2)
    dv = gl.zeros([BLOCK_N, HALF_D], gl.float32, o_layout)                     # (BLOCK_N, D / 2)
    for g in range(group * n_m):
        stage = g % NUM_STAGES
        buf = g % NUM_PDS
        mbarrier.wait(ready.index(stage), (g // NUM_STAGES) & 1)
        mbarrier.wait(pds_ready.index(buf), (g // NUM_PDS) & 1)               # P^T / dS^T of tile g stored
        q = q_smem.index(stage).slice(WG * HALF_D, HALF_D, dim=1)             # (BLOCK_M, D / 2) smem
        do = do_smem.index(stage).slice(WG * HALF_D, HALF_D, dim=1)           # (BLOCK_M, D / 2) smem
        dv_tok = warpgroup_mma(p_smem.index(buf), do, dv, is_async=True)      # dV += P^T dO
        dk_tok = warpgroup_mma(ds_smem.index(buf), q, dk, is_async=True)      # dK += dS^T Q (dS^T scaled)
        dv = warpgroup_mma_wait(1, deps=[dv_tok])
        dk = warpgroup_mma_wait(0, deps=[dk_tok])
        mbarrier.arrive(empty.index(stage))                                    # one of empty's 3 arrivals
        mbarrier.arrive(pds_free.index(buf))                                   # one of pds_free[buf]'s 2
    # dK / dV leave through K / V's column halves once WG_S's last dQ read K (kv_free)
    mbarrier.wait(kv_free, 0)
    k_half = k_smem.slice(WG * HALF_D, HALF_D, dim=1)                          # (BLOCK_N, D / 2) smem
    v_half = v_smem.slice(WG * HALF_D, HALF_D, dim=1)
    k_half.store(dk.to(dtype))                                                 # (no scale: dS^T carries it)
    v_half.store(dv.to(dtype))
    fence_async_shared()
    row = b * seqlen_k + n0
    tma.async_copy_shared_to_global(dk_desc, [row, hk * HEAD_DIM + WG * HALF_D], k_half)
    tma.async_copy_shared_to_global(dv_desc, [row, hk * HEAD_DIM + WG * HALF_D], v_half)
    tma.store_wait(0)


@gluon.jit
def attn_bwd_d256_gluon_kernel(
    q_desc, do_desc,           # host TensorDescriptors over (B * Nq, H * D) views, box (BLOCK_M, D)
    k_desc, v_desc,            # over (B * Nk, Hk * D), box (BLOCK_N, D)
    dk_desc, dv_desc,          # over dk / dv (B * Nk, Hk * D) contiguous, box (BLOCK_N, D / 2)
    dq_desc,                   # over dq_accum (B * Nq, H * D) fp32, zeroed, box (BLOCK_M, DQ_CHUNK)
    DQ,                        # dq_accum itself (DQ_ATOMIC's red.global.add target; unread otherwise)
    LSE, DELTA,                # lse / delta (B, H, Nq) fp32 contiguous
    seqlen_q, seqlen_k, nheads, nheads_k, group, softmax_scale, qk_scale,
    HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, NUM_STAGES: gl.constexpr,
    CAUSAL: gl.constexpr = False, ROTATE: gl.constexpr = True, DKDV_REGS: gl.constexpr = 160,
    DQ_ATOMIC: gl.constexpr = False, DKDV_ONLY: gl.constexpr = False,
):
    # grid (Nk / BLOCK_N, B * Hk): program_id(0) the key block, program_id(1) batch x KV head
    gl.static_assert(HEAD_DIM == 256, "the D = 256 kernel (kernels/bwd_gluon_fused.py: D = 64 / 128)")
    gl.static_assert(BLOCK_N == 64, "64 keys a CTA: dK + dV of 64 x 256 fp32 take half the register file")
    gl.static_assert(BLOCK_M == 64, "S^T / dP^T m64n64k16 (the shared-memory port's balance point)")
    dtype: gl.constexpr = q_desc.dtype
    # P^T / dS^T buffers: 1 (V1: the 16 KB dq staging takes the second's place), 2 with DQ_ATOMIC
    # (DKDV_ONLY: no staging either, so 2 as well)
    NUM_PDS: gl.constexpr = 2 if (DQ_ATOMIC or DKDV_ONLY) else 1
    pds_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_N, BLOCK_M], dtype)
    q_smem = gl.allocate_shared_memory(dtype, [NUM_STAGES, BLOCK_M, HEAD_DIM], q_desc.layout)    # (S, BLOCK_M, D)
    do_smem = gl.allocate_shared_memory(dtype, [NUM_STAGES, BLOCK_M, HEAD_DIM], do_desc.layout)  # (S, BLOCK_M, D)
    k_smem = gl.allocate_shared_memory(dtype, [BLOCK_N, HEAD_DIM], k_desc.layout)               # (BLOCK_N, D)
    v_smem = gl.allocate_shared_memory(dtype, [BLOCK_N, HEAD_DIM], v_desc.layout)               # (BLOCK_N, D)
    p_smem = gl.allocate_shared_memory(dtype, [NUM_PDS, BLOCK_N, BLOCK_M], pds_layout)          # P^T
    ds_smem = gl.allocate_shared_memory(dtype, [NUM_PDS, BLOCK_N, BLOCK_M], pds_layout)         # dS^T (scaled)
    if DQ_ATOMIC or DKDV_ONLY:
        dq_stage = gl.allocate_shared_memory(gl.float32, [8, 16], dq_desc.layout)               # (never used)
    else:
        dq_stage = gl.allocate_shared_memory(gl.float32, [BLOCK_M, DQ_CHUNK], dq_desc.layout)   # (BLOCK_M, 64) fp32
    kv_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    kv_free = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    pds_ready = gl.allocate_shared_memory(gl.int64, [NUM_PDS, 1], mbarrier.MBarrierLayout())
    pds_free = gl.allocate_shared_memory(gl.int64, [NUM_PDS, 1], mbarrier.MBarrierLayout())
    ready = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    mbarrier.init(kv_bar, count=1)
    mbarrier.init(kv_free, count=1)                  # WG_S, after its last dQ
    for i in gl.static_range(NUM_PDS):
        mbarrier.init(pds_ready.index(i), count=1)   # WG_S, a tile using buffer i
        mbarrier.init(pds_free.index(i), count=2)    # WG_0, WG_1, a tile using buffer i
    for i in gl.static_range(NUM_STAGES):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=3)       # WG_S, WG_0, WG_1, a tile
    fence_async_shared()

    gl.warp_specialize([
        (_d256_softmax, (q_smem, do_smem, k_smem, v_smem, p_smem, ds_smem, dq_stage, kv_bar, ready, empty,
                         pds_ready, pds_free, kv_free, dq_desc, DQ, LSE, DELTA, seqlen_q, seqlen_k, nheads,
                         nheads_k, group, softmax_scale, qk_scale, HEAD_DIM, BLOCK_M, BLOCK_N, NUM_STAGES, CAUSAL,
                         ROTATE, DQ_ATOMIC, NUM_PDS, DKDV_ONLY)),
        (_d256_dkdv, (q_smem, do_smem, k_smem, v_smem, p_smem, ds_smem, ready, empty, pds_ready, pds_free, kv_free,
                      dk_desc, dv_desc, seqlen_q, seqlen_k, nheads_k, group, W0, HEAD_DIM, BLOCK_M, BLOCK_N,
                      NUM_STAGES, CAUSAL, NUM_PDS)),
        (_d256_dkdv, (q_smem, do_smem, k_smem, v_smem, p_smem, ds_smem, ready, empty, pds_ready, pds_free, kv_free,
                      dk_desc, dv_desc, seqlen_q, seqlen_k, nheads_k, group, W1, HEAD_DIM, BLOCK_M, BLOCK_N,
                      NUM_STAGES, CAUSAL, NUM_PDS)),
        (_d256_load, (q_desc, do_desc, k_desc, v_desc, q_smem, do_smem, k_smem, v_smem, kv_bar, ready, empty,
                      seqlen_q, seqlen_k, nheads_k, group, HEAD_DIM, BLOCK_M, BLOCK_N, NUM_STAGES, CAUSAL, ROTATE)),
    ], [4, 4, LOADER_WARPS], [DKDV_REGS, DKDV_REGS, LOADER_REGS])

    mbarrier.invalidate(kv_bar)
    mbarrier.invalidate(kv_free)
    for i in gl.static_range(NUM_PDS):
        mbarrier.invalidate(pds_ready.index(i))
        mbarrier.invalidate(pds_free.index(i))
    for i in gl.static_range(NUM_STAGES):
        mbarrier.invalidate(ready.index(i))
        mbarrier.invalidate(empty.index(i))
