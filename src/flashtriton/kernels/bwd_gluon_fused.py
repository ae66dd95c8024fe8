"""FlashAttention-2 backward in ONE pass for Hopper, in Gluon: dK / dV as kernels/bwd_gluon.py
plus dQ, reduce-added into an fp32 buffer by TMA (the fused backward).

Status (2026-12-01, session 25, Triton 3.6.0): written and compiled offline for sm_90a
(bench/gluon_bwd_compile.py --fused) in session 24, non-causal and CAUSAL; right on its
first H200 run (session 25) and routed for deterministic=False calls
(launchers/policy.gluon_bwd_fused, launchers/backward_gluon.fused_into).
Host side: launchers/backward_gluon.py (prepare_fused, fused_gluon); GPU tests
tests/test_bwd_gluon.py (test_fused_*); first GPU run and A/B bench/gpu/s25_gluon_fused_ab.py.
NON-DETERMINISTIC: dQ is a sum over key blocks of fp32 partial tiles whose order of arrival
in L2 varies from run to run (dK / dV are deterministic and bitwise those of
attn_bwd_dkdv_gluon_kernel's schedule). For deterministic=False only.

Why: the library's backward is 7 matmuls a (query tile, key block) pair (4 in the dK/dV
kernel, 3 in the separate dQ kernel, 2 of them recomputing S and dP); near their ceilings
(~600 / ~690 TFLOP/s, session 24) the whole backward is 447 TFLOP/s by the FA2 count
(5 matmuls) against cuDNN's 539 at 16k. Fused: 5 matmuls, the 5th dQ_partial = dS K.

What it computes (the dense dK/dV pass of bwd_gluon.py, causal or not, its VEC_PTR
variant: lse / delta by pointer loads) plus, for every query tile of every head of the group,
    dq_accum[b, m.., h, :] += softmax_scale * dS_tile K_block
(dS_tile the tile's BLOCK_M x BLOCK_N = 64 x 128 slice of dS = P * (dP - delta)), by TMA
bulk reduce-add (cp.reduce.async.bulk.tensor.2d...add) into dq_accum (B, Nq, H, D) fp32,
zeroed by the host before the launch. The host then casts dq = dq_accum to q's dtype (the
scale is already applied here, so the convert is one torch copy_: launchers/backward_gluon.py).

Design choice: (b) "split D" (the brief's option (b)); (a) was weighed and rejected.
  (a) each consumer warpgroup (WG) computes dQ for its own 64 keys over the full D,
      dQ_w = dS[:, keys of w] K_w (64 x D): a 64 x D fp32 accumulator (64 registers a
      thread at D = 128, beside dK + dV's 128) and two reduce-adds of 64 x D fp32 a tile
      (2 x 32 KB at D = 128), no cross-WG sync.
  (b) both WGs store their dS^T halves (64 keys x 64 queries, 16-bit) to shared memory, a
      cross-WG mbarrier (ds_ready) says both are there, then WG w computes the
      dQ[:, D-half w] = dS (64 x 128 keys) K[:, D-half w] (two chained wgmmas, one per
      K row half, each 64 x 64 x 64 at D = 128) into a 64 x D/2 fp32 accumulator (32
      registers at D = 128, 16 at D = 64) and reduce-adds 64 x D/2 fp32 (16 KB at D = 128):
      one reduce of the tile's total size per tile.
  Reduce traffic, one backward, bf16, non-causal, 16k tokens: tiles = (N / 128 key blocks)
  x (N / 64 query tiles) x B x H; a tile adds BLOCK_M x D fp32 = 32 KB (b) or 64 KB (a)
  at D = 128: N = 16k, H = 16, B = 1: 128 x 256 x 16 = 524,288 tiles: (b) 17.2 GB, (a)
  34.4 GB; at 9 ms that is 1.9 / 3.8 TB/s of L2 reduce traffic, (a) at or above what L2
  serves. D = 64, H = 32: 1,048,576 tiles x 16 KB (b) = 17.2 GB, (a) 34.4 GB. Registers:
  (b)'s 32 against (a)'s 64 beside the 128 of dK / dV at D = 128 (the dK/dV kernel sits at
  the 240 limit in its S^T / dP^T phase already). Cost of (b): a cross-WG wait per tile
  (the two WGs run the same ring in step anyway: each stage is released only when both
  are done with it) and 2 x 16 KB of dS^T double buffer. (b) it is.
  dK's A operand is now the WG's own dS^T half in shared memory (written for dQ anyway),
  not registers: 16 registers less across the dK wgmma.

Why a sibling kernel, not a FUSED_DQ constexpr in bwd_gluon.py: the tile body changes
throughout (dS^T to shared memory, two new mbarrier families, the staging buffer and its
wait, the epilogue's extra wait before K's halves are reused), the shared-memory budget
differs, and the dK/dV kernel was verified bitwise on the H200 this session: leaving its
file untouched keeps that result valid. The dK / dV arithmetic is the same sums in the
same order (S^T, dP^T, P^T, dV += P^T dO, dS^T, dK += dS^T Q), so dk / dv are expected
bitwise equal (the tests check it); _block_coords and the shared constants come from there.

Layout: one CTA per (BLOCK_N = 128 keys, batch x KV head), grid (Nk / 128, B * Hk),
partitions as bwd_gluon.py: two consumer WGs (64 keys each, 240 registers), a 1-warp
loader (24 registers) streaming Q / dO 64-row tiles through a ring of NUM_STAGES.
  Shared memory (D = 128, 2 stages): K, V 64 KB; ring 2 x (Q + dO) 64 KB; dS^T 2 buffers
  x 2 halves x 64 x 64 x 2 B = 32 KB; dQ staging 2 WGs x 64 x 64 x 4 B = 32 KB; total
  192 KB + barriers (227 KB the limit; a 3rd stage, +32 KB, fits at 225 KB but ptxas
  then spills: A/B only). D = 64 (4 stages): 32 + 64 + 32 + 16 = 144 KB.
  Per ring tile g (queries m.. of head h), in consumer WG w (keys kh = n0 + 64 w ..):
      S^T = K_w Q^T, dP^T = V_w dO^T        async together; P^T (fp32) while dP^T runs
      dS^T = P^T (dP^T - delta)             16-bit, (64 keys, 64 queries)
      dV += P^T dO                          register A (P^T in 16 bits), async
      wait ds_free[g % 2] (both WGs' dQ of tile g - 2 read that buffer: done)
      ds_smem[g % 2][w] = dS^T; fence; arrive ds_ready[g % 2]
      dK += dS^T Q                          A: ds_smem[g % 2][w] (shared), async
      wait dV (P^T's registers free); wait ds_ready[g % 2] (the other WG's half is there)
      dQ_w = dS[:, 0:64] K_0[:, Dw] + dS[:, 64:128] K_1[:, Dw]
             (A: ds_smem[g % 2][0 / 1] permuted (queries x keys), B: K halves' column
             slice D-half w; two async wgmmas on one accumulator)
      wait all but the two dQ groups -> dK done: arrive empty[stage]
      wait the dQ groups -> arrive ds_free[g % 2]
      tma.store_wait(0) (the previous tile's reduce has read dq_stage[w]) + a WG barrier
      dq_stage[w] = dQ_w * softmax_scale; fence; reduce-add into dq_accum[rows m.., cols
      h * D + w * D / 2 ..]
  ROTATE (default): key block pid_n walks each head's query tiles starting at tile
  (pid_n * n_m) // n_blocks (cyclically), so the ~132 CTAs resident at once (mostly the
  key blocks of one head) reduce into different query rows instead of all hitting the
  same 32 KB of dq_accum together; the ring order and all barrier phases are those of g
  alone, only the tile's row changes (loader and consumers use the same _tile_row).

Barriers (counts, parities), beyond bwd_gluon.py's kv_bar / ready / empty (unchanged: ring
tile g uses stage g % NUM_STAGES, ready parity (g // NUM_STAGES) & 1, the loader waits
empty with the opposite parity, every consumer arrives on empty once per ring tile):
  ds_ready[i] (i = 0, 1; count 2): WG w arrives once per ring tile g with g % 2 == i,
    after its dS^T half is stored and fenced (the arrive is a bar.sync of the WG, then one
    thread's arrival, so all 128 threads' stores precede it). Phase number g // 2 of
    ds_ready[g % 2] completes when both halves of tile g are there; each WG waits parity
    (g // 2) & 1. No phase can complete twice before a waiter looks: the next completion
    (tile g + 2) needs both WGs' arrivals for tile g + 2, which come after both passed
    ds_free's wait for tile g + 2, which needs both WGs' ds_free arrivals of tile g, each
    made after that WG's ds_ready wait of tile g.
  ds_free[i] (count 2): WG w arrives once per ring tile g with g % 2 == i, after its dQ
    wgmmas of tile g (the readers of both halves of buffer i) are complete. Before
    writing its half of buffer i for tile g, a WG waits the completion of phase
    g // 2 - 1 (tile g - 2): parity ((g // 2) & 1) ^ 1; for g < 2 a fresh barrier passes
    parity 1 at once (as empty for the loader). A WG overwrites buffer i only after both
    WGs' dQ reads of tile g - 2 are done; it reads buffer i (dK: own half; dQ: both) only
    after ds_ready's phase for tile g: no half is read before written or written while read.
  No cycle: a WG's waits in tile g (ready: the loader, which needs both WGs' empty
  arrivals of tile g - NUM_STAGES; ds_free: both WGs' arrivals of tile g - 2; ds_ready:
  the other WG's arrival of tile g, which needs only ready and ds_free of tile g, i.e.
  events of earlier tiles) depend only on arrivals both WGs make in earlier tiles or
  before their own ds_ready wait of tile g. Both WGs visit every ring tile in the same
  order (CAUSAL too: a tile hidden from a WG's keys is computed with P^T = 0, below), so
  every barrier gets exactly its 2 arrivals a use, whatever the group / tile counts.
  Epilogue: dK / dV leave through the WG's own K / V halves (bwd_gluon.py), but now the
  other WG's dQ wgmmas read both K halves: before overwriting K_w (and V_w, stored with
  it), a WG waits the completion of ds_free's phase of the last tile T - 1 (parity
  ((T - 1) // 2) & 1 on ds_free[(T - 1) % 2]; T >= 1): both WGs' last dQ reads of K are
  done. This WG made its own arrival on that phase already, and no later arrival exists,
  so the wait cannot see a later phase.
  The dq staging: the reduce of tile g reads dq_stage[w] asynchronously (bulk async
  group, issued by one thread); tma.store_wait(0) (cp.async.bulk.wait_group.read 0) in
  tile g + 1 before the next store, then a warpgroup barrier (gl.thread_barrier(): the wait
  holds only the issuing thread; the barrier holds the other 127 until it has passed),
  and a final store_wait(0) before the CTA exits.

CAUSAL (the library's bottom-right mask: query i sees key j iff j <= i + Nk - Nq): the
  loader walks each head's tiles from j0, the first whose last row sees the block's first
  key (bwd_gluon._block_coords; no ROTATE). Unlike bwd_gluon.py, where a WG releases a
  tile hidden from all its keys unread, here both WGs compute every ring tile: the other
  WG's dQ needs this WG's dS^T half of every tile, which for a hidden tile is all zeros.
  So one tile body: P^T masked (x = -inf, as bwd_gluon._dkdv_tile) wherever the tile's rel
  ((first row) + Nk - Nq - (the WG's first key)) is below HALF_N - 1, i.e. some key of the
  half is hidden from some row of the tile (the diagonal tile; and the upper WG's first
  tile, hidden from all its keys when Nk - Nq is a multiple of 64: computed with P^T = 0,
  about 1 / n_m of its work wasted); fully visible tiles skip the select at run time. dK /
  dV get exact zeros added from a hidden tile (the same values as bwd_gluon.py's skip).
  Rows that see no key: lse = +inf, so P = 0 and dS = 0 (exp2(-inf)); query tiles no key
  block loads keep dq_accum's zeros: dq = 0. Every WG still arrives once per ring tile on
  empty, ds_ready and ds_free: the barrier protocol above is unchanged.

DROPOUT (session 26, 2026-12-01; host prepare_fused(..., dropout_p=, keys=); routed for
  the head dims in policy.GLUON_BWD_FUSED_DROPOUT after the GPU A/B,
  bench/gpu/s26_gluon_fused_dropout_ab.py, s26/call1). The backward of the library's
  dropout forward, bwd_ws.py's math (its HAS_DROPOUT dK/dV and dQ loops are the reference):
  with Z the keep mask of the call's key table and kf = 1 - p,
      dV += (P^T Z) dO,   dS^T = (P^T Z) dP^T - P^T (kf delta)   (bwd_ws.py's dK/dV form;
      its dQ form P (Z dP - kf delta) is the same sum), then dK, dV / kf in the epilogue
      and dQ's tile scale softmax_scale / kf (bwd_ws.py: dk, dv, dq / kf once), delta =
      rowsum(dO * O) of the dropped output O (the library's preprocess).
  The mask is the library's, regenerated from the table (kernels/dropout_keys.py:
  [ck of key j | rk of (query head h, b * Nq + row), head-major | cs_mult]): in the
  transposed tile the ROW axis is keys, so the WG's 64 column keys ck = KEYS[n0 + 64 WG ..]
  are loaded once (SliceLayout(1, s_layout): 2 registers), and the COLUMN axis is queries:
  the tile's 64 row keys rk = KEYS[Nk + h * (B * Nq) + b * Nq + m ..] (h the QUERY head
  hk * group + hh of the ring tile; fused_rk_at) are loaded a tile like lse, one a thread,
  and converted to the column slice layout; mk = dropout_group_mult(KEYS[Nk + H B Nq],
  n0) once (the 128-key block is one DROPOUT_GROUP); keep iff ((rk ^ ck) * mk) >= the top
  23 bits of the threshold (dropout_keep_keys' test as one unsigned compare, fused_keep_t).
  Registers: the mask is folded into P^T's sign bit as soon as P^T exists (fused_signed_p:
  p kept, -p dropped), so no mask tensor is live: P^T = |pz| (an operand modifier), P^T Z =
  max(pz, 0) (the dV operand and dS^T's first product). The index / keep arithmetic is
  @triton.jit (fused_group_mult, fused_rk_at, fused_keep_t, fused_signed_p: Gluon calls
  them), so tests/test_bwd_gluon.py runs the very functions under TRITON_INTERPRET=1 in a
  mirror of the kernel's loops and checks them against the library's mask (GQA heads,
  Nq != Nk, ROTATE's tile order). Without DROPOUT the launcher passes KEYS, rng_rows and
  dropout_p as None (constexprs, no parameters): the kernel compiles to the PTX / SASS of
  before (offline diff, debug line info aside, all 12 variants of the table).
  Offline (sm_90a, consumers' tile loop, instructions a thread a tile): D = 128 483 ->
  676 (~6 an element: LOP3, IMAD, ISETP, the sign, FMNMX, FMUL), causal 556 -> 753; spills
  D = 128 104 bytes (1 LDL a tile in one consumer's loop, the rest prologue / epilogue),
  causal 160 (7 local accesses a tile in one consumer), D = 64 0; first tries: a 1.0 / 0.0
  mask tensor (dropout_keep_scale) 268 / 440 bytes, the sign trick with where(pz > 0, dP^T,
  0) 120 / 144 and 774 instructions.

WINDOW (session 28, 2026-12-01; host prepare_fused(..., window=(left, right)) and
  fused_into(..., window=); written and compiled offline, then run and timed on the H200
  in session 28 (bench/gpu/s28_gluon_bwd_window_ab.py: 1.27-1.50x the Triton kernels from
  2k) and routed by policy.GLUON_BWD_FUSED_MIN_N["window"] from 2k at D = 128 / 64).
  flash-attn's sliding window: query i sees key c iff i + Nk - Nq -
  win_left <= c <= i + Nk - Nq + win_right; runtime win_left / win_right >= 0 (Nq + Nk for
  an unbounded side: forward_gluon.window_args' reduction, so (-1, -1) stays the plain and
  (-1, 0) the CAUSAL kernel), not specialised (one compiled kernel for every window).
  A separate constexpr, CAUSAL's loop generalised: the CTA of key block n0 visits, for each
  head of its group, the query tiles [j0, j0 + n_m) of the band's rows (fused_window_tiles:
  rows n0 - (Nk - Nq) - win_right .. n0 + BLOCK_N - 1 - (Nk - Nq) + win_left), the loader
  and both consumers alike (no ROTATE: the blocks start at different rows anyway); the
  cost is N x (window + BLOCK_N + BLOCK_M) a head, not N^2. The tile body is CAUSAL's one
  body (MASKED) with rel now the band's upper edge (rel0 includes + win_right) and the
  lower one rel - wspan (wspan = win_left + win_right): fused_window_edge selects only on
  a (WG half, tile) crossing either edge (the -inf select by fused_window_keep, one
  unsigned compare an element), so at (1024, 0) and Nq = Nk 3 of a WG's 18 tiles are
  masked (WG 0: its diagonal tile and 2 at the left edge; WG 1: 2 at the diagonal, the
  first hidden from all its keys, computed with P^T = 0 as CAUSAL's, and 1 at the left
  edge). Both WGs still visit every ring tile: the barrier protocol is CAUSAL's, unchanged.
  A key block no row sees (its last key below Nk - Nq - win_left: only where Nk > Nq +
  win_left; the band never leaves a block unseen at the other end, lo < Nq always)
  visits one tile, masked whole: dK = dV = 0, dq_accum += 0 (T >= 1 for the epilogue's
  ds_free wait). Rows that see no key: lse = +inf and every tile holding them is masked
  there: P = 0, dS = 0, their dq stays dq_accum's zeros or adds zeros (no NaN: the select
  replaces x before exp2). Not with DROPOUT (static_assert; the launcher and the policy
  refuse it): not compiled or measured. Kernels without WINDOW get win_left / win_right as
  None from the launcher (constexprs) and ZERO inside: their SASS is byte-identical to
  before (all 20 variants of bench/gluon_bwd_compile.py --fused; the PTX differs only in
  debug line info), and the --fused --jit rows unchanged.
  The index arithmetic is @triton.jit (fused_window_tiles, fused_window_edge,
  fused_window_keep): tests/test_bwd_gluon_window.py runs them under TRITON_INTERPRET=1 in
  a mirror of the loops and checks the schedule against the dense band (every band pair
  visited once and kept, no tile without band pairs visited but a no-row block's lone
  masked one, unmasked tiles wholly inside, masked ones crossing an edge) and a float64
  emulation of the tile math through it against reference.attention_grad.
  Offline (--fused --window; 12 warps, setmaxnreg 240 / 240 / 24):
  | D | dtype | stages | spill B | smem KB | HGMMA | tile loops (instr, masked region, LDL+STL in loop) |
  | 128 | bf16 / fp16 | 2 | 20 | 193 | 64 | 580 (106) / 575 (107), 0 / 0 |
  | 64 | bf16 / fp16 | 4 | 0 | 145 | 48 | 543 (106) / 528 (106), 0 / 0 |
  (causal, same count: D = 128 556 (74) / 549 (74), D = 64 520 (74) / 515 (74); plain
  D = 128 483 / 491.) The 20 bytes at D = 128: 5 local accesses a thread, once a CTA,
  outside the loops. First form: two signed compares a mask element, 156 bytes (5 local
  accesses a tile in the loops): the unsigned range compare removed them. --fused --jit
  (the launcher's arguments): (1024, 0) at 16k / 4k D = 128 8 bytes, (128, 128) fp16 GQA
  20, D = 64 0.

WIDE (session 30, offline, a helper; host prepare_fused(..., wide=True), route
  policy.GLUON_BWD_FUSED_WIDE, empty = off): FUSED_WIDE_CONFIG = {64: (128, 128, 2)}, BLOCK_M =
  128 query rows a ring tile at D = 64. The kernel is the same code: BLOCK_M is a constexpr
  throughout (S^T / dP^T (64 keys, 128 queries) per WG, 64 fp32 registers each; dV / dK
  wgmmas with K = 128; dQ (128 queries, D / 2) = two m64 repetitions, 32 registers), plus the
  epilogue's opaque n0 under BLOCK_M > 64. Why: at D = 64 the tile's fixed chain (barriers,
  fences, waits, the reduce, loop bookkeeping: ~190 of the 450 instructions a warp a tile) is
  paid once per 128 rows, and S^T / dP^T wgmmas run at N = 128 (bench/NOTES.md, "Offline (a
  helper, session 29): the fused backward at D = 64"). Offline (bench/gluon_bwd_compile.py
  --fused --wide): spill 24 bytes plain / 48 causal, all in the prologue / epilogue (no
  LDL / STL inside the tile loops), 193 KB, tile loops 709 / 701 instructions (354 / 350 a
  64-row tile's work, against 450 / 446), causal 857 / 843 (147 masked). dK / dV are expected
  bitwise the 64-row kernel's (rotate=False / causal): the same k16 wgmma steps in the same
  order. The 24 existing variants' SASS unchanged (instructions hashed, addresses stripped).

DEFER_DQ (a helper, offline; host prepare_fused(..., defer_dq=True), route
  policy.GLUON_BWD_FUSED_DEFER, empty = off: measured level on the H200 in session 30;
  analysis bench/NOTES.md "Offline (a helper, session 31): the fused backward at D = 128", A/B bench/gpu/s31_fused_bwd_d128_ab.py). The plain kernel only (static_assert; CAUSAL spilled).
  Without it the two WGs run in lockstep: tile g's dQ waits for the other WG's dS^T half of
  tile g (ds_ready), so both do their softmax and their staging / fence / reduce tail at the
  same time and the tensor pipe idles meanwhile. With it, the dQ wgmmas and the reduce in
  tile g's slot (after dK's issue, the same registers live as before) are tile g - 1's: a WG
  needs the other's dS^T of the PREVIOUS tile only, and the WGs may drift apart, one's
  softmax under the other's wgmmas. Per ring tile g of WG w:
      ... dS^T(g) -> buffer g % 2 (after ds_free's phase of tile g - 2), arrive ds_ready,
      dK += dS^T Q; wait dV; wait ds_ready phase of tile g - 1 (both halves of g - 1);
      dQ(g - 1) from buffer (g - 1) % 2 = (g % 2) ^ 1; wait dK, arrive empty; wait dQ,
      arrive ds_free[(g - 1) % 2]; staging; reduce at tile g - 1's (row, col) (carried)
  tile 0 peeled (no dQ: dK waited, empty arrived, a WG barrier so the lse / delta layout
  conversion's scratch needs no barrier at the loop head), the last tile's dQ after the loop
  (_fused_dq_drain: ds_ready wait, dQ, ds_free arrival, staging, reduce); the epilogue's
  ds_free wait on the last tile's phase is then the drain's, as before. Barriers: the same
  families and counts (every WG arrives once a tile on ds_ready, ds_free, empty; ds_free of
  tile g now in tile g + 1). No phase completes twice unseen: ds_ready[i]'s next completion
  after tile g's (tile g + 2's) needs both WGs' dS^T stores of g + 2, each after that WG's
  ds_free wait for tile g, i.e. after both WGs' dQ(g), each after that WG's ds_ready wait of
  g; ds_free[i]'s after tile g's (dQ(g + 2), in tile g + 3) needs ds_ready of g + 2, i.e.
  both stores of g + 2, each after its WG's ds_free wait on tile g's phase. No cycle: in
  tile g a WG waits for ready (the loader: both empties of g - 2), ds_free (both WGs' dQ of
  g - 2, made in their tile g - 1) and ds_ready of g - 1 (both stores in tile g - 1): all
  arrivals of earlier tiles. Slack: WG A stores dS^T(g) only after B's dQ(g - 2) (late in
  B's tile g - 1), and B's dQ(g - 1) waits A's dS^T(g - 1): either WG may lead by about half
  a tile (DEFER_DS = 2; a third buffer would allow ~1.5 tiles but spilled). dK / dV: the
  same wgmmas on the same operands in the same order: bitwise as without DEFER_DQ.
  Offline (--fused --defer, sm_90a): setmaxnreg 240 / 240 / 24; D = 128 spill 8 bytes (none
  in the tile loops; also through the JIT binder at 2k / 16k, GQA, fp16), 193 KB, tile loops
  529 / 502 instructions a warp (483 / 491 without), 9 BAR.SYNC (9), 32 EX2; D = 64 0 bytes,
  459 / 450 (450 / 446). Tried: 3 dS^T buffers 52 bytes (1 LDL a tile in WG 0's loop), the
  previous coordinates recomputed from g - 1 at the reduce 20 (1 a tile), one body for every
  tile (tile 0's reduce outside dq_accum, its ds_free arrival predicated off) 272-312 (10-11
  a tile), CAUSAL peeled 148 (8 + 4 a tile), recomputed 248. The 28 earlier variants' SASS
  byte-identical (bench/gluon_bwd_fused_sass_hash.py).

DQ_SPLIT_M (a session-30 helper, offline; routed for D = 64 plain and causal in session 31, +8.5-9.9%
  non-causal; host prepare_fused(..., wide=True, dq_split_m=True), route
  policy.GLUON_BWD_FUSED_DQ_SPLIT_M; analysis bench/wip/fused-bwd-d64-dqm.md,
  A/B bench/gpu/s31_fused_bwd_dqm_ab.py). The WIDE tile only (BLOCK_M = 2 x 64; static_assert),
  plain and CAUSAL, not with DEFER_DQ / DROPOUT / WINDOW. Without it WG w's dQ is the tile's 128
  rows x its D-half (32 columns at D = 64): 16 wgmma steps m64n32k16 (two m64 repetitions x 8
  k16), each reading A (dS, 2 KB) + B (the K column slice, 1 KB) = 3 KB for 16 cycles of math:
  the one shared-memory-bound step of the tile (24 cycles of bytes at 128 B a clock). With it
  WG w's dQ is the tile's query rows 64 w .. 64 w + 63 x the whole D:
      dQ[rows w] = dS[rows w, keys 0..63] K_0 + dS[rows w, keys 64..127] K_1
  8 steps m64n64k16 (A: the query columns 64 w .. of each dS^T half, permuted: whole 128-byte
  swizzle blocks, a subslice at 8 KB; B: the whole K halves, no column slice), 4 KB for 32 cycles
  (balanced): the pair's dQ 768 -> 512 tensor-pipe cycles a tile, 32 KB of shared-memory reads
  less. The accumulator is (64, D) = 32 registers (the same as (128, D / 2)), the staging
  dq_stage[w] (64, D) fp32 = 16 KB (the same), at DQ_SWIZZLE (64 B: D = 128's (64, 64) staging
  shape; the host's dq_accum box (64, D), the compiled kernel's TMA box (64, 16), four messages
  a reduce, one a warp) reduce-added at dq_accum[first row + 64 w, h * D]. The barrier protocol
  is unchanged (both dS^T halves of the tile are read by both WGs' dQ, as before). The K halves'
  index goes through an opaque `min(g, 0)` (0 at run time): with k_smem.index(0 / 1) constant,
  ptxas hoisted the dQ B descriptors out of the tile loop and spilled them (252 bytes, 9-10
  local loads a tile); with it they are made in the loop (a few uniform ops) and nothing spills.
  Offline (--fused --splitm): spill 0 (WIDE today 24; causal 0, today 48), 193 KB, tile loops
  676 / 668 instructions a warp (709 / 701), causal 816 / 810 (857 / 843), 9 BAR.SYNC, 64 EX2;
  128-byte staging spilled 144, the 128-byte K layout 124. dK / dV: the same wgmmas on the same
  operands in the same order: bitwise the WIDE kernel's. The 32 earlier variants' SASS
  byte-identical (bench/gluon_bwd_fused_sass_hash.py).

TIMELINE (session 43, a probe; host prepare_fused(..., timeline=buf, timeline_flags=F), never routed;
  bench/gpu/s43_bwd_timeline_probe.py, bench/wip/gluon-bwd-timeline.md; measured: bench/NOTES.md "Session 43").
  fwd_gluon.py's TIMELINE idea for this kernel: both consumer WGs write %globaltimer stamps into an int64 buffer passed as KEYS (unused without DROPOUT;
  static_assert: not with DROPOUT or DEFER_DQ). TIMELINE is a set of flags: 1 (BOUNDS) per-CTA rows: kernel entry
  (the default warps, before the barriers' init), each WG's partition start, K / V arrived, loop end, the epilogue's
  ds_free wait passed, dK / dV stored (store_wait(0)), %smid; 2 (STEPS) per ring tile and WG: the tile's top, Q / dO
  ready, S^T / dP^T done (%globaltimer_lo); 4 (HAND) per tile: the ns spent in the ds_ready wait (the dS^T hand-over);
  8 (WAITS) per tile: the ns in the ready, ds_free and staging (store_wait + WG barrier) waits. Layout: rows (C,
  TL_SLOTS = 32) int64, C the grid's CTAs, row program_id(0) + program_id(1) * num_programs(0), WG w at slots 16 w
  + TL_*; then (T_max, C, 2, 8) int32 tile records (TT_* words). Every store is one opaque asm (the row from
  %ctaid / %nctaid, or the WG's _tl_row, the offset an immediate; all 128 threads store the same word: no branch,
  no atomic). Offline, what did not work: a pointer made once (176 spill bytes, 4-6 local accesses a tile in the
  loops), the waits summed in registers carried through the loop (28-72), summed by red.global from one thread
  (668-1,000: the branch region around the warp-aggregated atomic), T stored as int64 (a 64-bit loop counter, 48).
  Offline (--fused --timeline, sm_90a, setmaxnreg 240 / 240 / 24 unchanged, 193 KB): D = 128 plain flags 1 / 5 /
  15: 0 / 36 / 80 spill bytes (none in the tile loops), tile loops 483 / 503 / 579 instructions (491 / 504 / 577);
  causal 8 (the kernel's own) / 20 / 16 (one local access a tile in WG 0's loop at 15); through the JIT binder at
  the probe's shapes plain 0 / 28 / 64, causal 8 / 8 / 20, no local access in any tile loop. Without TIMELINE the
  36 variants of bench/gluon_bwd_fused_sass_hash.py, BAND and the launcher's JIT-bound kernels: SASS byte-identical.

VARLEN (session 50; host launchers/backward_gluon_varlen.py, route policy.gluon_bwd_fused_varlen; measured
  bench/gpu/s50_bwd_varlen_ab.py, s50_bwd_varlen_window_ab.py; bench/NOTES.md "Session 50"). A packed batch (q, dout,
  dq_accum (total_q, H * D) rows, k, v, dk, dv (total_k, Hk * D), lse / delta (H, total_q)): one CTA a (key block of
  128 keys of one sequence, KV head), grid (cdiv(total_k, 128) + B, Hk), an upper bound (spare slots return before
  any allocation); the slot through the host's dispatch order (VARLEN_ORDER: the most query tiles first), decoded by
  fused_varlen_coords (@triton.jit: the CPU tests run it in an interpreted mirror of the loops and masks). Its own
  partitions (_fused_load_varlen, _fused_consume_varlen) around the dense _fused_tile, so the dense variants' SASS
  is unchanged (all 39 of bench/gluon_bwd_fused_sass_hash.py). Plain (ROTATE per sequence), CAUSAL and WINDOW (per
  sequence: the band's query tiles of the block), the 64-row tile, D = 64 / 128, no dropout.
  Ragged edges: the last query tile's rows past the sequence load lse = +inf and delta = 0 (masked pointer loads),
  so P = dS = 0 there: their dq_accum rows (the next sequence's) get exact zeros, their Q / dO rows (the next
  sequence's, or TMA's zeros past total_q) add nothing to dK / dV. Keys past the sequence: KEY_BOUND's select on the
  last key block (plain; WINDOW with the band's, a right edge past the diagonal reaching them), the diagonal itself
  under CAUSAL (an unmasked causal tile holds only keys < Nk_b). A sequence without queries visits one tile past
  its end: dK = dV = 0. dK / dV of a half wholly inside the sequence by TMA (as the dense kernel), of a ragged half
  by masked pointer stores read back from its shared-memory tile (_store_half_rows): a TMA store would write the
  next sequence's rows. Offline (bench/gluon_bwd_compile.py --fused --varlen; 193 KB at D = 128): spill D = 128
  plain 96 bytes (the CTA's coordinates kept across the loop, outside the tile loops), causal 8, WINDOW 8; D = 64
  0; tile loops 532 / 525 (plain), 548 / 548 (causal), 616 / 616 (WINDOW) instructions a warp at D = 128.

Compiler facts found (Triton 3.6.0, offline sm_90a, 2026-12-01):
  - Register pressure: the first version (P^T's 16-bit A operand made before dP^T's wait,
    as bwd_gluon.py does; fp32 staging with the default 128-byte swizzle) spilled 228
    bytes at D = 128: ~39 scalars (hoisted per-thread shared-memory addresses of the dS^T
    stmatrix and the staging stores, swizzle masks, loop bookkeeping) beside the 64 + 128
    of S^T / dP^T and dK / dV (nvdisasm -plr: peak 230 of 240 after spilling). Fixes: dS^T
    before P^T's copy (peak 208 -> 192 vectors: 8 bytes left), then the 64-byte staging
    swizzle (one hoisted address register fewer per store group: 0). Not fixes: retiring
    dV earlier (no change), a nested head / tile loop (376 bytes), ROTATE off (248 / 8).
  - The TMA reduce-add of a (64, 64) fp32 tile with a 64-byte swizzle is issued as 4
    messages of (64, 16) boxes, one per warp (elect.sync in warps 0-3; at D = 64, 2
    messages, warps 0-1 by a tid < 64 predicate); the launch's tensor map gets the (64,
    16) box from the compiled kernel's metadata, not from the host descriptor's block.
    Bulk async groups are per thread: tma.store_wait(0) holds only the issuing threads,
    hence the warpgroup barrier after it before the staging is overwritten.
  - wgmma takes the permuted dS^T buffer as an MN-major A operand (SASS: HGMMA ...
    tnspA.tnspB) and the column slice of K (memdesc_subslice) as B; at D = 64 the slice is
    32 columns, so K gets a 64-byte swizzle there (k_layout) and the slice is whole
    swizzle blocks (the 128-byte default compiled too, slicing inside the swizzle rows:
    not trusted without a GPU).
  - gl.thread_barrier() inside a warp_specialize partition is a named barrier of that
    partition (BAR.SYNC 0x0 / 0x2, 0x80), not of the CTA.

  - CAUSAL at D = 128: three tile bodies (hidden / masked / full) spilled 312 bytes, two
    252, two loops (all heads' masked tiles first in the ring) 384, one body with an
    unconditional mask 60, the mask under a run-time branch 40, hh / j from one division
    16, and Nk - Nq through an opaque inline-asm move (else LLVM computes rel0's invariant
    part before the partitions' entry and ptxas carries it across setmaxnreg in local
    memory) 8. The 8 left: one STL / LDL per thread per CTA in the epilogue (the TMA
    store's source address, `@UP1 UMOV UR12`, kept across the partitions' dispatch loop);
    the tile loop is spill-free. D = 64: 0.

Offline compile (sm_90a, bench/gluon_bwd_compile.py --fused, 2026-12-01; 12 warps,
setmaxnreg 240 / 240 / 24, ptxas -v 168 registers kernel-wide, no wgmma advisory):
  | D | dtype | stages | rotate | causal | spill B | smem KB | HGMMA | DEPBAR.LE 1 / 2 | UTMALDG | UTMAREDG | UTMASTG |
  | 128 | bf16 / fp16 | 2 | yes | no | 0 | 193 | 64 | 4 / 2 | 12 | 2 | 4 |
  | 128 | bf16 | 2 | no | no | 8 | 193 | 64 | 4 / 2 | 12 | 2 | 4 |
  | 128 | bf16 | 3 | yes | no | 40 | 225 | 64 | 4 / 2 | 12 | 2 | 4 |
  | 64 | bf16 / fp16 | 4 | yes | no | 0 | 145 | 48 | 4 / 2 | 8 | 2 | 4 |
  | 64 | bf16 | 2 | yes | no | 0 | 113 | 48 | 4 / 2 | 8 | 2 | 4 |
  | 128 | bf16 / fp16 | 2 | - | yes | 8 (epilogue) | 193 | 64 | 4 / 2 | 12 | 2 | 4 |
  | 128 | bf16 | 3 | - | yes | 392 | 225 | 64 | 4 / 2 | 12 | 2 | 4 |
  | 64 | bf16 / fp16 | 4 | - | yes | 0 | 145 | 48 | 4 / 2 | 8 | 2 | 4 |
  DROPOUT (session 26; the rows above unchanged, same PTX / SASS):
  | 128 | bf16 / fp16 | 2 | yes | no | 104 | 193 | 64 | 4 / 2 | 12 | 2 | 4 |
  | 128 | bf16 | 2 | no | no | 136 | 193 | 64 | 4 / 2 | 12 | 2 | 4 |
  | 64 | bf16 / fp16 | 4 | yes | no | 0 | 145 | 48 | 4 / 2 | 8 | 2 | 4 |
  | 128 | bf16 / fp16 | 2 | - | yes | 160 | 193 | 64 | 4 / 2 | 12 | 2 | 4 |
  | 64 | bf16 | 4 | - | yes | 0 | 145 | 48 | 4 / 2 | 8 | 2 | 4 |
  (--fused --jit, the launcher's arguments, dropout at 16k H = 16 / 16, group = 1
  specialised: 116 bytes, 5 LDL a tile in one consumer's loop, causal 116 / 3.)
  HGMMA a consumer a tile at D = 128: S^T 8 + dP^T 8 (64x64x16), dV 4 + dK 4 (64x128x16),
  dQ 4 + 4 (64x64x16, tnspA.tnspB); UTMAREDG: one instruction a consumer (the per-warp
  issue), cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.bulk_group in the PTX.
  Through Triton's JIT binder with the launcher's own arguments (--fused --jit): the same
  (0 spills in every default non-causal case, 8 causal at D = 128; ROTATE off at 16k: 20).
"""
from __future__ import annotations

import triton
import triton.language as tl
from triton._C.libtriton import ir
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language._core import builtin
from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, tma, warpgroup_mma,
                                                               warpgroup_mma_wait)

from .bwd_gluon import CONSUMER_REGS, LOADER_REGS, LOADER_WARPS, LOG2E, _block_coords
from .common import DROPOUT_GROUP, dropout_group_mult, dropout_threshold, find_sequence

# (BLOCK_M, BLOCK_N, NUM_STAGES) per head dim: as bwd_gluon.DEFAULT_CONFIG (shared memory
# in the module doc: 192 KB at D = 128 with 2 stages, 144 KB at D = 64 with 4)
FUSED_CONFIG = {64: (64, 128, 4), 128: (64, 128, 2)}
# WIDE (a session-29 helper; routed at D = 64 plain and causal since session 30's H200 A/B,
# policy.GLUON_BWD_FUSED_WIDE: +5-7% non-causal, +10% causal): BLOCK_M = 128
# query rows a ring tile at D = 64, the same kernel (BLOCK_M is a constexpr; the kernel's
# only BLOCK_M > 64 code is the epilogue's opaque n0), with the dq staging / dq_accum
# descriptor at a 128-byte swizzle (DQ_SWIZZLE_WIDE). Why and the offline figures: the
# module doc's "WIDE" and bench/NOTES.md, "Offline (a helper, session 29): the fused
# backward at D = 64". Shared memory 2 stages: K, V 32 + ring 2 x 32 + dS^T 4 x 16 + dq
# staging 2 x 16 = 192 KB (3 stages, 224 KB, fit but spill 260 bytes: not offered).
FUSED_WIDE_CONFIG = {64: (128, 128, 2)}
# The dq staging buffer's (and the dq_accum descriptor's) shared layout: fp32 with a 64-byte
# swizzle, so TMA boxes of (BLOCK_M, 16) (the launcher's descriptor; D / 32 messages a
# reduce). Offline: with the default 128-byte swizzle (boxes of 32 columns) the staging
# store's per-thread addresses (4 registers, hoisted out of the tile loop) tipped D = 128
# into 8 spill bytes (after the other fixes), 32-byte 28, unswizzled 64; 64-byte 0.
DQ_SWIZZLE = 64
# The WIDE tile's (BLOCK_M = 128 at D = 64): 128 bytes = the whole D / 2 = 32 fp32 columns, one
# TMA box (128, 32) a reduce. Offline at BLOCK_M = 128: swizzle 64 spilled 288 bytes (9-10
# local loads a tile inside the loops), 32 308, 128 40 (none in the loops; 24 with the
# epilogue's opaque n0).
DQ_SWIZZLE_WIDE = 128
# DEFER_DQ (session 31, offline; host prepare_fused(..., defer_dq=True), route
# policy.GLUON_BWD_FUSED_DEFER, empty = off): a tile's dQ wgmmas run one ring tile later (the
# module doc's "DEFER_DQ"). DEFER_DS dS^T buffers: 2, as without it. A third (48 KB, 209 KB in
# all at D = 128) lets the WGs drift up to ~1.5 tiles apart instead of ~0.5, but spilled 52
# bytes (one local load a tile in WG 0's loop) against 8 (none in the loops) offline; half a
# tile is the offset that puts one WG's softmax under the other's wgmmas.
DEFER_DS: gl.constexpr = gl.constexpr(2)


def dq_stage_layout(block_m: int = 64, split_m: bool = False):
    """The NVMMASharedLayout of the fp32 dq staging tile (and of the host dq_accum descriptor):
    DQ_SWIZZLE, or DQ_SWIZZLE_WIDE for the WIDE tile (block_m > 64); DQ_SPLIT_M (split_m: a WG's
    (BLOCK_M / 2, D) = (64, 64) tile, D = 128's staging shape) DQ_SWIZZLE, boxes (64, 16), four
    messages a reduce (offline: 128-byte there spilled 144 bytes, 64-byte 0)."""
    swizzle = DQ_SWIZZLE if split_m else (DQ_SWIZZLE_WIDE if block_m > 64 else DQ_SWIZZLE)
    return gl.NVMMASharedLayout(swizzle_byte_width=swizzle, element_bitwidth=32, rank=2)


def k_layout(head_dim: int):
    """The NVMMASharedLayout of K's halves (host k_desc, and dk_desc: dK leaves through K's
    buffer) for 16-bit K: a swizzle as wide as half a row (D / 2 x 2 bytes, at most 128), so
    that the column slice D-half w the dQ wgmma reads as its B operand is whole swizzle
    blocks (D = 128: the default 128 B; D = 64: 64 B instead of the default 128 B, under
    which the slice would start 64 bytes into every swizzled 128-byte row). DQ_SPLIT_M reads
    whole K halves but keeps this layout (offline: the 128-byte one spilled 124 bytes, this 0)."""
    return gl.NVMMASharedLayout(swizzle_byte_width=min(128, head_dim), element_bitwidth=16, rank=2)


@builtin
def async_reduce_add(tensor_desc, coord, src, _semantic=None):
    """TMA bulk reduce-add of the shared-memory tile src into global memory at coord
    (cp.reduce.async.bulk.tensor ... .add.bulk_group: Gluon's hopper tma module has no
    reduce in Triton 3.6.0, its builder has). Completion as a TMA store: tma.store_wait."""
    coord = _semantic._convert_to_ir_values(coord, require_i64=False)
    _semantic.builder.create_async_tma_reduce(ir.DESCRIPTOR_REDUCE_KIND.ADD, tensor_desc.handle, coord, src.handle)


# DROPOUT: the index and keep arithmetic, as @triton.jit functions the Gluon kernel calls
# (Gluon compiles a called @triton.jit function with its own semantics) and
# tests/test_bwd_gluon.py runs under TRITON_INTERPRET=1 in a mirror of the kernel's loops
# against the library's mask (the same functions, so the test checks what the kernel runs).
# The key table (kernels/dropout_keys.py, launchers.common._dropout_keys with rng_rows =
# B * Nq, rng_stride = Nk): [ck of key j, j < Nk | rk of (query head h, b * Nq + row),
# head-major | cs_mult], as bwd_ws.py reads it (rk at Nk + h * rng_rows + b * Nq + row).
@triton.jit
def fused_group_mult(KEYS, seqlen_k, nheads, rng_rows, n0):
    """mk of the key block at n0 (BLOCK_N = DROPOUT_GROUP = 128 keys: one column group, one
    multiplier): the table's last entry (index Nk + H * rng_rows) is the multipliers' seed
    word (bwd_ws.py: dropout_group_mult(KEYS[keys_total], start_n))."""
    cs_mult = tl.load(KEYS + (seqlen_k + nheads * rng_rows)).to(tl.uint32, bitcast=True)
    return dropout_group_mult(cs_mult, n0)


@triton.jit
def fused_rk_at(seqlen_k, seqlen_q, rng_rows, b, h, m):
    """Table index of the row key of query row m of query head h, batch b (bwd_ws.py's
    rk_at = seqlen_k + h * rng_rows + b * seqlen_q + start_m)."""
    return seqlen_k + h * rng_rows + b * seqlen_q + m


@triton.jit
def fused_varlen_rk_at(rng_stride, rng_rows, h, row):
    """VARLEN (session 51): table index of the row key of packed query row `row` (q_start + the row in its
    sequence) of query head h, in the packed batch's table (rng_rows = total_q, rng_stride = max_seqlen_k: bwd.py's
    rk at rng_stride + h * rng_rows + q_start + offs_m)."""
    return rng_stride + h * rng_rows + row


@triton.jit
def fused_keep_t(rk, ck, mk, threshold):
    """keep^T (keys x queries), boolean, of the transposed tile: ck (HALF_N,) on the row
    (key) axis, rk (BLOCK_M,) on the column (query) axis; kernels.common.dropout_keep_keys
    (the mask's definition; dropout_keep_scale is its 1.0 / 0.0 form)."""
    # dropout_keep_keys' (x >> 9) >= (threshold >> 9) as one unsigned compare of x with
    # threshold's top 23 bits (the same set: x >= 512 floor(t / 512) iff floor(x / 512) >=
    # floor(t / 512)); the shift once a tile, not an element
    x = (tl.expand_dims(rk, 0) ^ tl.expand_dims(ck, 1)) * mk
    return x >= ((threshold >> 9) << 9)


@triton.jit
def fused_signed_p(p, rk, ck, mk, threshold):
    """P^T with the keep mask in its sign bit: p where kept, -p where dropped (p >= 0, from
    exp2). The tile then needs no separate mask registers: P^T = |pz|, P^T Z = max(pz, 0)
    (bitwise, p = 0 included), dS^T = max(pz, 0) dP^T - |pz| (1 - p) delta."""
    return tl.where(fused_keep_t(rk, ck, mk, threshold), p, -p)


# WINDOW (session 28): the band's index arithmetic, as @triton.jit functions the Gluon kernel
# calls (as the dropout helpers above), so that tests/test_bwd_gluon_window.py runs these very
# functions under TRITON_INTERPRET=1 in a mirror of the kernel's tile schedule and checks the
# visited tiles and their masks against the dense band (reference.visible_mask).
@triton.jit
def fused_window_tiles(n0, seqlen_q, seqlen_k, win_left, win_right, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """(j0, n_m): the query tiles [j0, j0 + n_m) of the key block [n0, n0 + BLOCK_N) under the
    window (win_left, win_right >= 0; Nq + Nk for an unbounded side). Query row i sees key c
    iff i + Nk - Nq - win_left <= c <= i + Nk - Nq + win_right, so key c is seen by the rows
    [c - (Nk - Nq) - win_right, c - (Nk - Nq) + win_left] and the block by [lo, hi]:
    lo = n0 - (Nk - Nq) - win_right, hi = n0 + BLOCK_N - 1 - (Nk - Nq) + win_left; its tiles
    [lo // BLOCK_M, cdiv(hi + 1, BLOCK_M)) clamped to the Nq / BLOCK_M. n_m >= 1: a block no
    row sees (hi < 0: tile 0) still visits one tile, masked whole (lo <= n0 - Nk + Nq < Nq
    always; the clamp of j0 never binds, as _block_coords' causal one).
    (The divisions see non-negative operands only: int32 truncation is floor there.)"""
    n_q_tiles = seqlen_q // BLOCK_M
    off = seqlen_k - seqlen_q
    lo = n0 - off - win_right
    hi = n0 + (BLOCK_N - 1) - off + win_left
    j0 = tl.minimum(tl.maximum(lo, 0) // BLOCK_M, n_q_tiles - 1)
    j1 = tl.minimum(tl.cdiv(tl.maximum(hi + 1, 0), BLOCK_M), n_q_tiles)
    return j0, tl.maximum(j1 - j0, 1)


@triton.jit
def fused_window_edge(rel, wspan, HALF_N: tl.constexpr, BLOCK_M: tl.constexpr):
    """Whether a (WG half, query tile) crosses an edge of the band, so that _fused_tile
    selects: rel = (tile's first row) + Nk - Nq + win_right - (half's first key), wspan =
    win_left + win_right; key c, row r (both local) kept iff rel - wspan <= c - r <= rel,
    and c - r spans [1 - BLOCK_M, HALF_N - 1] in the tile: all kept iff HALF_N - 1 <= rel
    and rel - wspan <= 1 - BLOCK_M. A tile outside the band crosses an edge too."""
    return (rel < HALF_N - 1) | (rel - wspan > 1 - BLOCK_M)


@triton.jit
def fused_window_keep(offs_c, offs_r, rel, wspan):
    """keep^T (keys x queries) of a tile crossing an edge: offs_c (HALF_N,) the half's local
    keys on the row axis, offs_r (BLOCK_M,) the tile's local rows on the column axis; kept
    iff 0 <= r - c + rel <= wspan, one unsigned compare an element (a negative difference
    wraps above wspan < 2^31). Offline, D = 128: two signed compares spilled 156 bytes
    (5 local accesses a tile in the loops), this one 20 (none in the loops)."""
    t = tl.expand_dims(offs_r, 0) - tl.expand_dims(offs_c - rel, 1)
    return t.to(tl.uint32, bitcast=True) <= wspan.to(tl.uint32, bitcast=True)


# VARLEN (session 50): a packed batch's index arithmetic, @triton.jit (as the window's) so that
# tests/test_bwd_gluon_varlen.py runs this very function under TRITON_INTERPRET=1 in a mirror of the
# kernel's tile schedule and checks it against the packed batch's (sequence, key, row) pairs.
@triton.jit
def fused_varlen_coords(SCHED, slot, batch, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr,
                        ROTATE: tl.constexpr, win_left=0, win_right=0, WINDOW: tl.constexpr = False):
    """(q_start, k_start, seqlen_q, seqlen_k, n0, j0, n_m, rot) of key-block slot `slot` of a packed batch
    (slot < SCHED[batch]): its sequence's first query and key rows in the packed (total, heads * D) views and
    its query / key counts, the block's first key inside the sequence, the first query tile it visits per head
    and how many (>= 1), and ROTATE's first tile (0 under CAUSAL or without ROTATE). SCHED (int32, the host's
    launchers/backward_gluon.fused_varlen_table): [0, B] the cumulative key-block counts, [B + 1, 2B + 1]
    cu_seqlens_q, [2B + 2, 3B + 2] cu_seqlens_k. The sequence's query tiles are cdiv(Nq_b, BLOCK_M); the last
    one's rows past Nq_b (the next sequence's, or TMA's zeros) are masked by the kernel through lse = +inf
    (P = 0, dS = 0). A sequence without queries visits one tile, all of its rows past the sequence: dK = dV = 0.
    CAUSAL (bottom-right, per sequence): from the first tile whose last row sees the block's first key, as
    bwd_gluon._block_coords. WINDOW (win_left / win_right >= 0, an unbounded side past every sequence): the band's
    query tiles of the block, fused_window_tiles' rule on the sequence's cdiv(Nq_b, BLOCK_M) tiles (a block no
    row sees visits one tile, masked whole). (The divisions see non-negative operands only.)"""
    b = find_sequence(SCHED, slot, batch)
    blk0 = tl.load(SCHED + b)
    n_kb = tl.load(SCHED + b + 1) - blk0
    q_start = tl.load(SCHED + batch + 1 + b)
    seqlen_q = tl.load(SCHED + batch + 2 + b) - q_start
    k_start = tl.load(SCHED + 2 * batch + 2 + b)
    seqlen_k = tl.load(SCHED + 2 * batch + 3 + b) - k_start
    n = slot - blk0
    n0 = n * BLOCK_N
    n_q_tiles = tl.cdiv(seqlen_q, BLOCK_M)
    if WINDOW:
        lo = n0 - (seqlen_k - seqlen_q) - win_right
        hi = n0 + (BLOCK_N - 1) - (seqlen_k - seqlen_q) + win_left
        j0 = tl.minimum(tl.maximum(lo, 0) // BLOCK_M, tl.maximum(n_q_tiles - 1, 0))
        j1 = tl.minimum(tl.cdiv(tl.maximum(hi + 1, 0), BLOCK_M), n_q_tiles)
        n_m = tl.maximum(j1 - j0, 1)
    else:
        if CAUSAL:
            j0 = tl.cdiv(tl.maximum(n0 - (seqlen_k - seqlen_q) - BLOCK_M + 1, 0), BLOCK_M)
            j0 = tl.minimum(j0, tl.maximum(n_q_tiles - 1, 0))      # (never binds, as _block_coords')
        else:
            j0 = n0 * 0
        n_m = tl.maximum(n_q_tiles - j0, 1)
    if ROTATE and not (CAUSAL or WINDOW):
        rot = (n * n_m) // n_kb
    else:
        rot = n0 * 0
    return q_start, k_start, seqlen_q, seqlen_k, n0, j0, n_m, rot


@gluon.jit
def _tile_row(g, n_m, rot):
    """(head in the group, query tile in the head) of ring tile g: head g // n_m, tile
    (g + rot) % n_m (rot: ROTATE's start; 0 without)."""
    return g // n_m, (g % n_m + rot) % n_m


@gluon.jit
def _rotation(n_m, ROTATE: gl.constexpr, CAUSAL: gl.constexpr):
    """ROTATE's first query tile of this key block (0 without it, and under CAUSAL, whose
    key blocks start at different tiles anyway)."""
    rot = 0
    if ROTATE:
        if not CAUSAL:
            rot = (gl.program_id(0) * n_m) // gl.num_programs(0)
    return rot


ZERO: gl.constexpr = gl.constexpr(0)   # the window arguments of a kernel without WINDOW (never read)

# TIMELINE (session 43 probe; the module doc's "TIMELINE"). The buffer (KEYS, no DROPOUT) is int64, two parts:
#   rows: (C, TL_SLOTS) int64, C = the grid's CTAs, CTA row program_id(0) + program_id(1) * num_programs(0); consumer
#     WG w writes slots TL_WG * w + the TL_* offsets below (%globaltimer, ns; TL_SMID %smid);
#   tiles: after the rows, (T_max, C, 2, TL_TILE_WORDS) int32: ring tile g of CTA row r, WG w at
#     C * TL_SLOTS * 2 + ((g * C + r) * 2 + w) * TL_TILE_WORDS int32 words; the TT_* words (%globaltimer_lo, ns,
#     or a wait's duration in ns).
# TIMELINE's value is a set of flags (what is stamped; 0 or absent: nothing, the kernel of before):
TL_F_BOUNDS: gl.constexpr = gl.constexpr(1)   # rows: entry, WG start, K / V, loop end, epilogue wait / end, %smid
TL_F_STEPS: gl.constexpr = gl.constexpr(2)    # tiles: TT_TOP, TT_Q, TT_S (loop top, Q / dO there, S^T / dP^T done)
TL_F_HAND: gl.constexpr = gl.constexpr(4)     # tiles: TT_HAND, the ds_ready wait (dS^T hand-over)
TL_F_WAITS: gl.constexpr = gl.constexpr(8)    # tiles: TT_READY, TT_FREE, TT_STAGE (the other waits)
TL_SLOTS: gl.constexpr = gl.constexpr(32)
TL_WG: gl.constexpr = gl.constexpr(16)
TL_START: gl.constexpr = gl.constexpr(0)      # the WG's partition entry
TL_KV: gl.constexpr = gl.constexpr(1)         # K / V arrived (kv_bar)
TL_LOOP_END: gl.constexpr = gl.constexpr(6)   # after the tile loop
TL_EPI_WAIT: gl.constexpr = gl.constexpr(7)   # the epilogue's ds_free wait passed (other WG's last dQ done)
TL_END: gl.constexpr = gl.constexpr(8)        # dK / dV stored: tma.store_wait(0) passed
TL_SMID: gl.constexpr = gl.constexpr(9)       # %smid
TL_ENTRY: gl.constexpr = gl.constexpr(15)     # WG 0's row only: kernel entry, before the barriers' init
TL_TILE_WORDS: gl.constexpr = gl.constexpr(8)
TT_TOP: gl.constexpr = gl.constexpr(0)        # STEPS: top of the tile (before lse / delta's loads)
TT_Q: gl.constexpr = gl.constexpr(1)          # STEPS: the tile's ready wait passed (Q / dO in shared memory)
TT_S: gl.constexpr = gl.constexpr(2)          # STEPS: S^T and dP^T wgmmas done (dP^T's wait passed)
TT_HAND: gl.constexpr = gl.constexpr(3)       # HAND: ns in the ds_ready wait (both dS^T halves stored)
TT_READY: gl.constexpr = gl.constexpr(4)      # WAITS: ns in the ready wait
TT_FREE: gl.constexpr = gl.constexpr(5)       # WAITS: ns in the ds_free wait (before dS^T's store)
TT_STAGE: gl.constexpr = gl.constexpr(6)      # WAITS: ns in the staging's store_wait(0) + WG barrier
# the same numbers for the host (bench/gpu/s43_bwd_timeline_probe.py)
TIMELINE_FLAGS = {"bounds": 1, "steps": 2, "hand": 4, "waits": 8}
TIMELINE_ROW = 32        # TL_SLOTS (int64 a CTA row)
TIMELINE_WG = 16         # TL_WG
TIMELINE_SLOTS = {"start": 0, "kv": 1, "loop_end": 6, "epi_wait": 7, "end": 8, "smid": 9, "entry": 15}
TIMELINE_TILE_WORDS = 8  # TL_TILE_WORDS (int32 a (tile, CTA, WG))
TIMELINE_TILE = {"top": 0, "q": 1, "s": 2, "hand": 3, "ready": 4, "free": 5, "stage": 6}


def timeline_numel(ctas: int, max_tiles: int) -> int:
    """int64 elements of a TIMELINE buffer for a grid of `ctas` CTAs of at most `max_tiles` ring tiles each."""
    return ctas * TIMELINE_ROW + max_tiles * ctas * 2 * TIMELINE_TILE_WORDS // 2


# TIMELINE's stores: one opaque asm each, the CTA's row from %ctaid / %nctaid inside it, the byte offsets of a slot
# or word immediates ($2), so that no pointer or 64-bit value is made before the tile loop and kept across it, and
# no branch or atomic (every thread of the WG stores the same word: one value wins). Offline, D = 128 plain: stamps
# through a pointer made once spilled 176 bytes (4-6 local accesses a tile in the loops); the wait sums carried as
# registers through the loop 28-72; added by red.global from one thread (a branch region around the warp-aggregated
# atomic, wgmma descriptors then made in vector registers) 668-1000.
@gluon.jit
def _tl_stamp(KEYS, WG: gl.constexpr, slot: gl.constexpr, SMID: gl.constexpr = False):
    """TIMELINE: %globaltimer (ns, 64 bits), or %smid, into this WG's row slot `slot` (256 = TL_SLOTS * 8 bytes a
    row)."""
    if SMID:
        gl.inline_asm_elementwise("{ .reg .u32 a, b, c; .reg .u64 o, t; mov.u32 a, %ctaid.x; mov.u32 b, %ctaid.y; "
                                  "mov.u32 c, %nctaid.x; mad.lo.u32 a, b, c, a; mul.wide.u32 o, a, 256; "
                                  "add.u64 o, o, $1; mov.u32 a, %smid; cvt.u64.u32 t, a; st.global.u64 [o+$2], t; "
                                  "mov.u32 $0, 0; }", "=r,l,n", [KEYS.to(gl.int64), (WG * TL_WG + slot) * 8],
                                  dtype=gl.int32, is_pure=False, pack=1)
    else:
        gl.inline_asm_elementwise("{ .reg .u32 a, b, c; .reg .u64 o, t; mov.u32 a, %ctaid.x; mov.u32 b, %ctaid.y; "
                                  "mov.u32 c, %nctaid.x; mad.lo.u32 a, b, c, a; mul.wide.u32 o, a, 256; "
                                  "add.u64 o, o, $1; mov.u64 t, %globaltimer; st.global.u64 [o+$2], t; "
                                  "mov.u32 $0, 0; }", "=r,l,n", [KEYS.to(gl.int64), (WG * TL_WG + slot) * 8],
                                  dtype=gl.int32, is_pure=False, pack=1)


@gluon.jit
def _tl_row(dep):
    """TIMELINE: the CTA's row, program_id(0) + program_id(1) * num_programs(0), by an opaque asm (made once a WG
    and passed to _tl_tile: one register through the tile loop; read inside each store's asm instead, ptxas kept
    %ctaid.x and %ctaid.y in two). dep: any int32 scalar (the asm's operand, unused)."""
    return gl.inline_asm_elementwise("{ .reg .u32 a, b, c; mov.u32 a, %ctaid.x; mov.u32 b, %ctaid.y; "
                                     "mov.u32 c, %nctaid.x; mad.lo.u32 $0, b, c, a; }", "=r,r", [dep],
                                     dtype=gl.int32, is_pure=False, pack=1)


@gluon.jit
def _tl_tile(KEYS, WG: gl.constexpr, word: gl.constexpr, g, row, t0=None):
    """TIMELINE: into word `word` of ring tile g's record of this WG (CTA row `row`, _tl_row; 32 bytes =
    TL_TILE_WORDS int32 a record, 2 WGs a CTA, C = %nctaid.x * %nctaid.y CTAs a tile index, after the rows' C * 256
    bytes), %globaltimer_lo, or with t0 (_tl_now) the ns since t0 (mod 2^32)."""
    if t0 is None:
        gl.inline_asm_elementwise("{ .reg .u32 a, b, n, t; .reg .u64 o, e; mov.u32 t, %globaltimer_lo; "
                                  "mov.u32 a, %nctaid.x; mov.u32 b, %nctaid.y; mul.lo.u32 n, a, b; "
                                  "mad.lo.u32 a, $3, n, $4; mul.wide.u32 o, a, 64; mul.wide.u32 e, n, 256; "
                                  "add.u64 o, o, e; add.u64 o, o, $1; st.global.u32 [o+$2], t; mov.u32 $0, 0; }",
                                  "=r,l,n,r,r", [KEYS.to(gl.int64), (WG * TL_TILE_WORDS + word) * 4, g, row],
                                  dtype=gl.int32, is_pure=False, pack=1)
    else:
        gl.inline_asm_elementwise("{ .reg .u32 a, b, n, t; .reg .u64 o, e; mov.u32 t, %globaltimer_lo; "
                                  "sub.u32 t, t, $5; mov.u32 a, %nctaid.x; mov.u32 b, %nctaid.y; mul.lo.u32 n, a, b; "
                                  "mad.lo.u32 a, $3, n, $4; mul.wide.u32 o, a, 64; mul.wide.u32 e, n, 256; "
                                  "add.u64 o, o, e; add.u64 o, o, $1; st.global.u32 [o+$2], t; mov.u32 $0, 0; }",
                                  "=r,l,n,r,r,r", [KEYS.to(gl.int64), (WG * TL_TILE_WORDS + word) * 4, g, row, t0],
                                  dtype=gl.int32, is_pure=False, pack=1)


@gluon.jit
def _tl_now(dep):
    """TIMELINE: the low 32 bits of %globaltimer (ns), the start of a timed wait (one register while it lasts).
    dep: any int32 scalar (the asm's operand, unused)."""
    return gl.inline_asm_elementwise("mov.u32 $0, %globaltimer_lo;", "=r,r", [dep], dtype=gl.int32, is_pure=False,
                                     pack=1)


@gluon.jit
def _fused_coords(pid_n, pid_bh, seqlen_q, seqlen_k, nheads_k, win_left, win_right, BLOCK_M: gl.constexpr,
                  BLOCK_N: gl.constexpr, CAUSAL: gl.constexpr, WINDOW: gl.constexpr):
    """(b, hk, n0, j0, n_m) of one CTA (bwd_gluon._block_coords' tuple: batch, KV head, first
    key, the first query tile it visits per head and how many), for every variant; without
    WINDOW _block_coords itself (the same IR as before WINDOW existed).
    WINDOW: query row i sees key c iff diag_i - win_left <= c <= diag_i + win_right,
    diag_i = i + Nk - Nq (fwd_gluon.py's WINDOW; win_left / win_right >= 0, Nq + Nk for an
    unbounded side: forward_gluon.window_args); the band's query tiles of the block
    (fused_window_tiles). n_m >= 1: a block no row sees visits one tile that the consumers
    mask whole (P^T = 0, so dK = dV = 0 and dq_accum += 0), as fwd_gluon.py's WINDOW loads
    tile 0 for a block that sees no key: the barrier protocol needs T >= 1 ring tiles (the
    epilogue's ds_free wait)."""
    if WINDOW:
        b = pid_bh // nheads_k
        hk = pid_bh % nheads_k
        n0 = pid_n * BLOCK_N
        j0, n_m = fused_window_tiles(n0, seqlen_q, seqlen_k, win_left, win_right, BLOCK_M, BLOCK_N)
        return b, hk, n0, j0, n_m
    else:
        return _block_coords(pid_n, pid_bh, seqlen_q, seqlen_k, nheads_k, BLOCK_M, BLOCK_N, CAUSAL)


@gluon.jit
def _fused_pids(pid0, seqlen_k, BLOCK_N: gl.constexpr, BAND: gl.constexpr):
    """(pid_n, pid_bh): the CTA's key block and batch x KV head. BAND = 0: the grid's
    (Nk / BLOCK_N, B * Hk) ids. BAND > 0 (CAUSAL only; session 36, an A/B): grid (Nk /
    BLOCK_N * B * Hk,), bands of BAND batch x KV heads (B * Hk a multiple of BAND), rank-major
    inside a band: every head's key block 0 (the heaviest: it sees every query tile), then
    block 1, ... (kernels/bwd_gluon_dq.py's BAND, for key blocks). pid0: program_id(0)."""
    if BAND:
        n_blocks = seqlen_k // BLOCK_N
        band_idx = pid0 // (n_blocks * BAND)
        r = pid0 - band_idx * (n_blocks * BAND)
        pid_n = r // BAND
        pid_bh = band_idx * BAND + r % BAND
    else:
        pid_n = pid0
        pid_bh = gl.program_id(1)
    return pid_n, pid_bh


@gluon.jit
def _cta_coords(seqlen_q, seqlen_k, nheads_k, win_left, win_right, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
                CAUSAL: gl.constexpr, WINDOW: gl.constexpr, BAND: gl.constexpr):
    """_fused_coords of this CTA: from the grid's two program ids, or BAND's order (_fused_pids)."""
    if BAND:
        pid_n, pid_bh = _fused_pids(gl.program_id(0), seqlen_k, BLOCK_N, BAND)
        b, hk, n0, j0, n_m = _fused_coords(pid_n, pid_bh, seqlen_q, seqlen_k, nheads_k, win_left, win_right,
                                           BLOCK_M, BLOCK_N, CAUSAL, WINDOW)
    else:
        b, hk, n0, j0, n_m = _fused_coords(gl.program_id(0), gl.program_id(1), seqlen_q, seqlen_k, nheads_k,
                                           win_left, win_right, BLOCK_M, BLOCK_N, CAUSAL, WINDOW)
    return b, hk, n0, j0, n_m


@gluon.jit
def _fused_load(q_desc, do_desc, k_desc, v_desc, q_smem, do_smem, k_smem, v_smem, kv_bar, ready, empty, seqlen_q,
                seqlen_k, nheads_k, group, win_left, win_right, HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr,
                BLOCK_N: gl.constexpr, NUM_STAGES: gl.constexpr, CAUSAL: gl.constexpr, ROTATE: gl.constexpr,
                WINDOW: gl.constexpr, BAND: gl.constexpr = 0):
    """bwd_gluon._dkdv_load's VEC_PTR path (K / V once, Q / dO a ring tile: CAUSAL from the
    first tile j0 that sees the block's first key; WINDOW the band's tiles [j0, j0 + n_m),
    _fused_coords) with ROTATE's tile order; the same barrier protocol."""
    HALF_N: gl.constexpr = BLOCK_N // 2
    BANDED: gl.constexpr = CAUSAL or WINDOW
    b, hk, n0, j0, n_m = _cta_coords(seqlen_q, seqlen_k, nheads_k, win_left, win_right, BLOCK_M, BLOCK_N, CAUSAL,
                                     WINDOW, BAND)
    rot = _rotation(n_m, ROTATE, BANDED)
    kv_row = b * seqlen_k + n0
    kv_col = hk * HEAD_DIM
    # K and V, both halves, once: one arrival (the expect) plus the four copies' bytes
    mbarrier.expect(kv_bar, 4 * k_desc.block_type.nbytes)
    tma.async_copy_global_to_shared(k_desc, [kv_row, kv_col], kv_bar, k_smem.index(0))
    tma.async_copy_global_to_shared(k_desc, [kv_row + HALF_N, kv_col], kv_bar, k_smem.index(1))
    tma.async_copy_global_to_shared(v_desc, [kv_row, kv_col], kv_bar, v_smem.index(0))
    tma.async_copy_global_to_shared(v_desc, [kv_row + HALF_N, kv_col], kv_bar, v_smem.index(1))
    STAGE_BYTES: gl.constexpr = 2 * q_desc.block_type.nbytes                    # Q, dO
    for g in range(group * n_m):
        hh, j = _tile_row(g, n_m, rot)
        h = hk * group + hh
        m = (j0 + j) * BLOCK_M                              # the tile's first query row
        stage = g % NUM_STAGES
        # both consumers released the stage's previous use (tile g - NUM_STAGES: phase
        # g // NUM_STAGES - 1 of empty[stage]); a fresh barrier passes parity 1
        mbarrier.wait(empty.index(stage), ((g // NUM_STAGES) & 1) ^ 1)
        bar = ready.index(stage)
        mbarrier.expect(bar, STAGE_BYTES)
        tma.async_copy_global_to_shared(q_desc, [b * seqlen_q + m, h * HEAD_DIM], bar, q_smem.index(stage))
        tma.async_copy_global_to_shared(do_desc, [b * seqlen_q + m, h * HEAD_DIM], bar, do_smem.index(stage))


@gluon.jit
def _fused_load_varlen(q_desc, do_desc, k_desc, v_desc, q_smem, do_smem, k_smem, v_smem, kv_bar, ready, empty, group,
                       SCHED, slot, batch, HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
                       NUM_STAGES: gl.constexpr, CAUSAL: gl.constexpr, ROTATE: gl.constexpr, win_left=0, win_right=0,
                       WINDOW: gl.constexpr = False):
    """VARLEN's loader (session 50): _fused_load's ring over one packed sequence's query tiles. K / V rows of
    the block past the sequence's keys are the next sequence's (or TMA's zeros): the consumers mask them
    (KEY_BOUND; under CAUSAL the diagonal hides them). Q / dO rows of the last tile past the sequence's queries
    likewise (lse = +inf there)."""
    HALF_N: gl.constexpr = BLOCK_N // 2
    q_start, k_start, seqlen_q, seqlen_k, n0, j0, n_m, rot = fused_varlen_coords(SCHED, slot, batch, BLOCK_M,
                                                                                 BLOCK_N, CAUSAL, ROTATE, win_left,
                                                                                 win_right, WINDOW)
    hk = gl.program_id(1)
    kv_row = k_start + n0
    kv_col = hk * HEAD_DIM
    mbarrier.expect(kv_bar, 4 * k_desc.block_type.nbytes)
    tma.async_copy_global_to_shared(k_desc, [kv_row, kv_col], kv_bar, k_smem.index(0))
    tma.async_copy_global_to_shared(k_desc, [kv_row + HALF_N, kv_col], kv_bar, k_smem.index(1))
    tma.async_copy_global_to_shared(v_desc, [kv_row, kv_col], kv_bar, v_smem.index(0))
    tma.async_copy_global_to_shared(v_desc, [kv_row + HALF_N, kv_col], kv_bar, v_smem.index(1))
    STAGE_BYTES: gl.constexpr = 2 * q_desc.block_type.nbytes                    # Q, dO
    for g in range(group * n_m):
        hh, j = _tile_row(g, n_m, rot)
        h = hk * group + hh
        row = q_start + (j0 + j) * BLOCK_M                  # the tile's first query row (packed)
        stage = g % NUM_STAGES
        mbarrier.wait(empty.index(stage), ((g // NUM_STAGES) & 1) ^ 1)
        bar = ready.index(stage)
        mbarrier.expect(bar, STAGE_BYTES)
        tma.async_copy_global_to_shared(q_desc, [row, h * HEAD_DIM], bar, q_smem.index(stage))
        tma.async_copy_global_to_shared(do_desc, [row, h * HEAD_DIM], bar, do_smem.index(stage))


@gluon.jit
def _fused_tile(g, k_smem, v_smem, q_smem, do_smem, ds_smem, dq_stage, cols_smem, ready, empty, ds_ready, ds_free,
                dq_desc, dk, dv, s_zero, dq_zero, qk_scale, softmax_scale, rel, LSE, DELTA, vec, dq_row, dq_col,
                WG: gl.constexpr, NUM_STAGES: gl.constexpr, MASKED: gl.constexpr, s_layout: gl.constexpr,
                a_layout: gl.constexpr, KEYS=None, rk_at=0, ck=0, mk=0, dropout_p=0.0,
                DROPOUT: gl.constexpr = False, wspan=0, WINDOW: gl.constexpr = False, DEFER: gl.constexpr = False,
                DQ_PREV: gl.constexpr = False, NUM_DS: gl.constexpr = 2, cargs=None,
                DQ_SPLIT_M: gl.constexpr = False, tl_row=0, TIMELINE: gl.constexpr = 0,
                KEY_BOUND: gl.constexpr = False, VARLEN: gl.constexpr = False, row_lim=0, key_lim=0):
    """Ring tile g of consumer WG: dV += P^T dO, dK += dS^T Q (unscaled) for its 64 keys,
    dQ[:, D-half WG] of the tile reduce-added at dq_accum[dq_row.., dq_col..] (scaled);
    releases the ring stage (empty) and the dS^T buffer (ds_free). vec: the flat (B, H, Nq)
    index of the tile's first row (lse / delta by pointer loads, bwd_gluon's VEC_PTR).
    MASKED (CAUSAL's diagonal tile): key c of the half and query r of the tile kept iff
    c <= r + rel (bwd_gluon._dkdv_tile's mask: P^T = 0, hence dS^T = 0, elsewhere).
    WINDOW (with MASKED): also c >= r + rel - wspan (wspan = win_left + win_right: rel is
    the band's upper edge, rel - wspan its lower one, the window's left edge), kept iff
    0 <= r - c + rel <= wspan (fused_window_keep); the select only on a tile crossing an edge
    (c - r spans [1 - BLOCK_M, HALF_N - 1] in a tile: rel < HALF_N - 1, the upper edge, or
    rel - wspan > 1 - BLOCK_M, the lower one; a tile outside the band crosses one of them).
    DROPOUT: rk_at the table index of the tile's first row key (fused_rk_at), ck the WG's 64
    column keys (SliceLayout(1, s_layout)), mk the block's multiplier (fused_group_mult),
    dropout_p the kernel's parameter (threshold and 1 - p made from it here, a few scalar
    ops a tile, rather than kept in registers across the loop); with Z = keep^T
    (fused_keep_t, folded into P^T's sign: fused_signed_p), bwd_ws.py's math with 1 / (1 - p)
    left to the epilogue (dK, dV) and the dQ scale: dV += (P^T Z) dO, dS^T = (P^T Z) dP^T -
    P^T (1 - p) delta (bwd_ws.py's dK/dV form; its dQ form P (Z dP - (1 - p) delta) is the
    same sum up to rounding).
    DEFER (DEFER_DQ, session 31): dS^T of tile g goes to buffer g % NUM_DS, and the dQ
    wgmmas at the usual place compute tile g - 1's dQ (DQ_PREV; tile 0 has none), whose
    halves both WGs stored one tile earlier, reduce-added at dq_accum[cargs] (tile g - 1's
    (row, col)); the caller drains the last tile's dQ (_fused_dq_drain). Without DQ_PREV
    (tile 0): dK retired, the stage released, a WG barrier (below).
    TIMELINE (session 43 probe; not with DEFER): KEYS the stamp buffer, tl_row the CTA's row (_tl_row); into the
    tile's record (_tl_tile) STEPS its TT_TOP / TT_Q / TT_S stamps, HAND / WAITS the timed waits.
    VARLEN (session 50, _fused_consume_varlen): the tile's rows r >= row_lim lie past its sequence: their lse
    loads as +inf and delta as 0 (P = 0, dS = 0: no gradient reaches or leaves them; their dq_accum rows, the
    next sequence's, get exact zeros added). KEY_BOUND (VARLEN without CAUSAL, with MASKED): rel is the count
    of the half's keys inside the sequence; keys c >= rel masked (x = -inf) where rel < HALF_N. With WINDOW that
    count is key_lim (rel is the band's edge): the select where the tile crosses an edge or key_lim < HALF_N."""
    dtype: gl.constexpr = k_smem.dtype
    col: gl.constexpr = gl.SliceLayout(0, s_layout)
    BLOCK_M: gl.constexpr = s_zero.shape[1]
    DQ_N: gl.constexpr = dq_zero.shape[1]
    stage = g % NUM_STAGES
    if DEFER:
        buf = g % NUM_DS
    else:
        buf = g % 2
    k_half = k_smem.index(WG)                                                # (HALF_N, D) smem
    v_half = v_smem.index(WG)                                                # (HALF_N, D) smem
    # lse / delta: one value a thread, issued before the stage's wait (bwd_gluon._dkdv_tile)
    vec_layout: gl.constexpr = gl.BlockedLayout([1], [32], [4], [0])
    if TIMELINE:
        gl.static_assert(not DEFER, "TIMELINE: not with DEFER_DQ")
    if TIMELINE & TL_F_STEPS:
        _tl_tile(KEYS, WG, TT_TOP, g, tl_row)
    offs_m = vec + gl.arange(0, BLOCK_M, layout=vec_layout)                 # (BLOCK_M,)
    if VARLEN:
        in_seq = gl.arange(0, BLOCK_M, layout=vec_layout) < row_lim          # rows of the tile's sequence
        lse_c = gl.load(LSE + offs_m, mask=in_seq, other=float("inf"))
        delta_c = gl.load(DELTA + offs_m, mask=in_seq, other=0.0)
    else:
        lse_c = gl.load(LSE + offs_m)
        delta_c = gl.load(DELTA + offs_m)
    if DROPOUT:
        # the tile's row keys, one a thread as lse (the query axis: columns of S^T); VARLEN: rows past the
        # sequence not read (past the table's head at the batch's last rows; their p is 0 anyway)
        if VARLEN:
            rk_c = gl.load(KEYS + rk_at + gl.arange(0, BLOCK_M, layout=vec_layout), mask=in_seq,
                           other=0).to(gl.uint32, bitcast=True)
        else:
            rk_c = gl.load(KEYS + rk_at + gl.arange(0, BLOCK_M, layout=vec_layout)).to(gl.uint32, bitcast=True)
        keep_frac = 1.0 - dropout_p
        delta_c = delta_c * keep_frac                                        # (1 - p) delta
    if TIMELINE & TL_F_WAITS:
        t0 = _tl_now(g)
    mbarrier.wait(ready.index(stage), (g // NUM_STAGES) & 1)
    if TIMELINE & TL_F_WAITS:
        _tl_tile(KEYS, WG, TT_READY, g, tl_row, t0)
    if TIMELINE & TL_F_STEPS:
        _tl_tile(KEYS, WG, TT_Q, g, tl_row)
    q = q_smem.index(stage)                                                  # (BLOCK_M, D) smem
    do = do_smem.index(stage)                                                # (BLOCK_M, D) smem
    s_tok = warpgroup_mma(k_half, q.permute((1, 0)), s_zero, use_acc=False, is_async=True)
    dp_tok = warpgroup_mma(v_half, do.permute((1, 0)), s_zero, use_acc=False, is_async=True)
    s = warpgroup_mma_wait(1, deps=[s_tok])                                  # (HALF_N, BLOCK_M) fp32
    lse_v = gl.convert_layout(lse_c, col)                                    # (BLOCK_M,)
    x = s * qk_scale - gl.expand_dims(lse_v * LOG2E, 0)                      # (HALF_N, BLOCK_M) log2 units
    if MASKED:
        # as bwd_gluon._dkdv_tile: after the scale; the query indices from shared memory
        # (an arange here is hoisted out of the loop as 16 live registers). Only where some
        # key of the half is hidden from some row of the tile (rel < HALF_N - 1): the
        # select and its 16 indices stay out of the fully visible tiles (offline: 40 ->
        # 16 spill bytes at D = 128 against an unconditional mask)
        HALF_N: gl.constexpr = s.shape[0]
        if WINDOW and KEY_BOUND:
            # VARLEN's window (session 50): the band's edges and the sequence's last key
            if fused_window_edge(rel, wspan, HALF_N, BLOCK_M) | (key_lim < HALF_N):
                offs_c = gl.arange(0, HALF_N, layout=gl.SliceLayout(1, s_layout))    # key in the half
                offs_r = cols_smem.load(col)                                         # (BLOCK_M,)
                keep = fused_window_keep(offs_c, offs_r, rel, wspan) & gl.expand_dims(offs_c < key_lim, 1)
                x = gl.where(keep, x, float("-inf"))                                 # (HALF_N, BLOCK_M)
        elif WINDOW:
            # kept iff rel - wspan <= c - r <= rel; the select only on a tile crossing an edge
            if fused_window_edge(rel, wspan, HALF_N, BLOCK_M):
                offs_c = gl.arange(0, HALF_N, layout=gl.SliceLayout(1, s_layout))    # key in the half
                offs_r = cols_smem.load(col)                                         # (BLOCK_M,)
                x = gl.where(fused_window_keep(offs_c, offs_r, rel, wspan), x, float("-inf"))   # (HALF_N, BLOCK_M)
        elif KEY_BOUND:
            # VARLEN plain: the sequence's last key block; keys c >= rel are the next sequence's
            if rel < HALF_N:
                offs_c = gl.arange(0, HALF_N, layout=gl.SliceLayout(1, s_layout))    # key in the half
                x = gl.where(gl.expand_dims(offs_c < rel, 1), x, float("-inf"))   # (HALF_N, BLOCK_M)
        else:
            if rel < HALF_N - 1:
                offs_c = gl.arange(0, HALF_N, layout=gl.SliceLayout(1, s_layout))    # key in the half
                offs_r = cols_smem.load(col)                                         # (BLOCK_M,)
                x = gl.where(gl.expand_dims(offs_c - rel, 1) <= gl.expand_dims(offs_r, 0), x, float("-inf"))
    p = gl.exp2(x)                                                           # (HALF_N, BLOCK_M)
    if DROPOUT:
        rk = gl.convert_layout(rk_c, col)                                    # (BLOCK_M,)
        p = fused_signed_p(p, rk, ck, mk, dropout_threshold(dropout_p))     # kept: p, dropped: -p
    dp = warpgroup_mma_wait(0, deps=[dp_tok])                                # (HALF_N, BLOCK_M) fp32
    if TIMELINE & TL_F_STEPS:
        _tl_tile(KEYS, WG, TT_S, g, tl_row)
    # dS^T before P^T's 16-bit copy: at most P^T and dP^T (64 registers) live beside dK / dV
    # (P^T's A operand made first, as bwd_gluon.py does, would add its 16 at that point:
    # 208 + scalars, spilled). The same operations, so dK / dV bitwise as bwd_gluon.py's.
    delta = gl.convert_layout(delta_c, col)                                  # (BLOCK_M,)
    if DROPOUT:
        # p carries the mask in its sign (fused_signed_p, made before dP^T's wait)
        pk = gl.maximum(p, 0.0)                                              # P^T Z
        ds = (pk * dp - gl.abs(p) * gl.expand_dims(delta, 0)).to(dtype)     # dS^T (bwd_ws.py's dK/dV form)
        p16 = gl.convert_layout(pk.to(dtype), a_layout)                      # (P^T Z) A operand
    else:
        ds = (p * (dp - gl.expand_dims(delta, 0))).to(dtype)                 # (HALF_N, BLOCK_M) dS^T
        p16 = gl.convert_layout(p.to(dtype), a_layout)                       # (HALF_N, BLOCK_M) A operand
    dv_tok = warpgroup_mma(p16, do, dv, is_async=True)                       # dV += P^T dO
    # buffer `buf` free: both WGs' dQ wgmmas of tile g - 2 done (phase g // 2 - 1; a fresh
    # barrier passes parity 1 for g < 2)
    if DEFER:
        # buffer `buf` free: both WGs' dQ wgmmas of tile g - NUM_DS done (in their tile
        # g - NUM_DS + 1; phase g // NUM_DS - 1; a fresh barrier passes parity 1 for g < NUM_DS)
        mbarrier.wait(ds_free.index(buf), ((g // NUM_DS) & 1) ^ 1)
    else:
        if TIMELINE & TL_F_WAITS:
            t0 = _tl_now(g)
        mbarrier.wait(ds_free.index(buf), ((g // 2) & 1) ^ 1)
        if TIMELINE & TL_F_WAITS:
            _tl_tile(KEYS, WG, TT_FREE, g, tl_row, t0)
    my_ds = ds_smem.index(2 * buf + WG)                                      # (HALF_N, BLOCK_M) smem
    my_ds.store(ds)
    fence_async_shared()                                                     # generic writes -> wgmma reads
    mbarrier.arrive(ds_ready.index(buf))                                     # bar.sync of the WG, one arrival
    dk_tok = warpgroup_mma(my_ds, q, dk, is_async=True)                      # dK += dS^T Q (A in smem)
    # dV done (issued before dS^T's math): P^T's registers free before the dQ wgmmas
    dv, p16 = warpgroup_mma_wait(1, deps=[dv_tok, p16])
    if DEFER:
        if DQ_PREV:
            # tile g - 1's dQ, its halves stored by both WGs in their tile g - 1: this WG waits
            # here only if the other is more than ~half a tile behind (mid tile g - 1, its dS^T
            # store; with 2 buffers ds_free bounds the lead to about that too): the slack that
            # lets the WGs drift apart, one's softmax under the other's wgmmas, where today's
            # ds_ready wait of tile g itself keeps them in step
            pg = g - 1
            if NUM_DS == 2:
                pbuf = buf ^ 1                                               # (g - 1) % 2 for g >= 1
            else:
                pbuf = pg % NUM_DS
            mbarrier.wait(ds_ready.index(pbuf), (pg // NUM_DS) & 1)
            dq_tok = _fused_dq_issue(ds_smem, k_smem, pbuf, dq_zero, WG)
            dk = warpgroup_mma_wait(2, deps=[dk_tok])                        # in flight: dK, dQ_0, dQ_1
            mbarrier.arrive(empty.index(stage))
            dq = warpgroup_mma_wait(0, deps=[dq_tok])                        # (BLOCK_M, DQ_N) fp32
            mbarrier.arrive(ds_free.index(pbuf))
            prev_row, prev_col = cargs
            _fused_dq_reduce(dq, dq_stage, dq_desc, prev_row, prev_col, softmax_scale, WG)
        else:
            dk = warpgroup_mma_wait(0, deps=[dk_tok])
            mbarrier.arrive(empty.index(stage))
            # the WG past this tile's reads of the layout-conversion scratch (lse / delta)
            # before the loop's first tile writes it: else the compiler's barrier for that
            # goes to the loop head, into every tile (offline: one BAR.SYNC a tile)
            gl.thread_barrier()
    else:
        # both halves of dS^T of tile g stored (phase g // 2 of ds_ready[buf])
        if TIMELINE & TL_F_HAND:
            t0 = _tl_now(g)
        mbarrier.wait(ds_ready.index(buf), (g // 2) & 1)
        if TIMELINE & TL_F_HAND:
            _tl_tile(KEYS, WG, TT_HAND, g, tl_row, t0)
        if DQ_SPLIT_M:
            # DQ_SPLIT_M: dQ[rows of WG, :] = dS[rows of WG, keys 0..63] K_0 + dS[rows of WG, keys
            # 64..127] K_1: A the WG's 64-query column block of each dS^T half (whole 128-byte
            # swizzle blocks), B the whole K halves; m64n64k16 steps (A + B 4 KB a 32-cycle step)
            # instead of m64n32k16 (3 KB a 16-cycle step: shared-memory bound)
            DQ_M: gl.constexpr = dq_zero.shape[0]
            # K half 0 / 1 by an index ptxas cannot see is constant (min(g, 0) = 0, g >= 0): with
            # constant indices it hoisted the 16 B descriptors out of the loop and spilled them
            # (offline: 252 bytes, 9-10 local loads a tile); so they are made here, a tile
            kz = gl.inline_asm_elementwise("min.s32 $0, $1, 0;", "=r,r", [g], dtype=gl.int32, is_pure=True, pack=1)
            dq_tok = warpgroup_mma(ds_smem.index(2 * buf).slice(WG * DQ_M, DQ_M, dim=1).permute((1, 0)),
                                   k_smem.index(kz), dq_zero, use_acc=False, is_async=True)
            dq_tok = warpgroup_mma(ds_smem.index(2 * buf + 1).slice(WG * DQ_M, DQ_M, dim=1).permute((1, 0)),
                                   k_smem.index(kz + 1), dq_tok, is_async=True)
            dq_row = dq_row + WG * DQ_M
        else:
            # dQ[:, D-half WG] = dS[:, keys 0..63] K_0[:, Dw] + dS[:, keys 64..127] K_1[:, Dw]
            dq_tok = warpgroup_mma(ds_smem.index(2 * buf).permute((1, 0)),
                                   k_smem.index(0).slice(WG * DQ_N, DQ_N, dim=1), dq_zero, use_acc=False,
                                   is_async=True)
            dq_tok = warpgroup_mma(ds_smem.index(2 * buf + 1).permute((1, 0)),
                                   k_smem.index(1).slice(WG * DQ_N, DQ_N, dim=1), dq_tok, is_async=True)
        # in flight, in issue order: dK, dQ_0, dQ_1; retire the first
        dk = warpgroup_mma_wait(2, deps=[dk_tok])
        # Q and dO of this stage no longer read by this WG (one of empty's 2 arrivals)
        mbarrier.arrive(empty.index(stage))
        dq = warpgroup_mma_wait(0, deps=[dq_tok])                                # (BLOCK_M, DQ_N) fp32
        # this WG's reads of both dS^T halves of buffer `buf` done (one of ds_free's 2 arrivals)
        mbarrier.arrive(ds_free.index(buf))
        # the previous tile's reduce has finished reading dq_stage[WG] (bulk group wait of the
        # issuing thread), then the whole WG past that point before anyone overwrites it
        if TIMELINE & TL_F_WAITS:
            t0 = _tl_now(g)
        tma.store_wait(0)
        gl.thread_barrier()
        if TIMELINE & TL_F_WAITS:
            _tl_tile(KEYS, WG, TT_STAGE, g, tl_row, t0)
        stg = dq_stage.index(WG)                                                 # (BLOCK_M, DQ_N) fp32 smem
        if DROPOUT:
            stg.store(dq * (softmax_scale / keep_frac))                          # bwd_ws.py: dq / (1 - p) * scale
        else:
            stg.store(dq * softmax_scale)
        fence_async_shared()
        async_reduce_add(dq_desc, [dq_row, dq_col], stg)
    return dk, dv


@gluon.jit
def _fused_dq_issue(ds_smem, k_smem, buf, dq_zero, WG: gl.constexpr):
    """DEFER_DQ: the two async dQ wgmmas of the tile whose dS^T sits in buffer buf,
    dQ[:, D-half WG] = dS[:, keys 0..63] K_0[:, Dw] + dS[:, keys 64..127] K_1[:, Dw]
    ((BLOCK_M, DQ_N) fp32; A: the permuted dS^T halves, B: K halves' column slice)."""
    DQ_N: gl.constexpr = dq_zero.shape[1]
    dq_tok = warpgroup_mma(ds_smem.index(2 * buf).permute((1, 0)), k_smem.index(0).slice(WG * DQ_N, DQ_N, dim=1),
                           dq_zero, use_acc=False, is_async=True)
    dq_tok = warpgroup_mma(ds_smem.index(2 * buf + 1).permute((1, 0)),
                           k_smem.index(1).slice(WG * DQ_N, DQ_N, dim=1), dq_tok, is_async=True)
    return dq_tok


@gluon.jit
def _fused_dq_reduce(dq, dq_stage, dq_desc, dq_row, dq_col, softmax_scale, WG: gl.constexpr):
    """DEFER_DQ: dq (BLOCK_M, DQ_N) fp32 scaled into dq_stage[WG] and reduce-added at
    dq_accum[dq_row.., dq_col..] (the non-deferred tile's staging, without DROPOUT): the
    previous reduce's read of the staging waited (issuing thread) and the WG past it first."""
    tma.store_wait(0)
    gl.thread_barrier()
    stg = dq_stage.index(WG)                                                 # (BLOCK_M, DQ_N) fp32 smem
    stg.store(dq * softmax_scale)
    fence_async_shared()
    async_reduce_add(dq_desc, [dq_row, dq_col], stg)


@gluon.jit
def _fused_dq_drain(last, ds_smem, k_smem, dq_stage, ds_ready, ds_free, dq_desc, dq_zero, dq_row, dq_col,
                    softmax_scale, WG: gl.constexpr, NUM_DS: gl.constexpr):
    """DEFER_DQ, after the tile loop: the dQ of the last ring tile `last` (no later tile to
    carry it): wait both halves (ds_ready phase last // NUM_DS), the wgmmas, ds_free's arrival
    (the epilogue waits that phase before K is overwritten), the staging and reduce."""
    buf = last % NUM_DS
    mbarrier.wait(ds_ready.index(buf), (last // NUM_DS) & 1)
    dq_tok = _fused_dq_issue(ds_smem, k_smem, buf, dq_zero, WG)
    dq = warpgroup_mma_wait(0, deps=[dq_tok])                                # (BLOCK_M, DQ_N) fp32
    mbarrier.arrive(ds_free.index(buf))
    _fused_dq_reduce(dq, dq_stage, dq_desc, dq_row, dq_col, softmax_scale, WG)


@gluon.jit
def _fused_defer_coords(g, n_m, rot, b, hk, group, seqlen_q, vec_base, BLOCK_M: gl.constexpr, HEAD_DIM: gl.constexpr,
                        WG: gl.constexpr):
    """DEFER_DQ: (dq_row, dq_col, vec) of ring tile g in ROTATE's order (_tile_row), as the
    plain loop of _fused_consume makes them: dq_row / dq_col the tile's (B * Nq, H * D)
    coordinates of this WG's D-half, vec the flat (B, H, Nq) index of its first row."""
    hh, j = _tile_row(g, n_m, rot)
    h = hk * group + hh
    return b * seqlen_q + j * BLOCK_M, h * HEAD_DIM + WG * (HEAD_DIM // 2), vec_base + hh * seqlen_q + j * BLOCK_M


@gluon.jit
def _fused_consume(q_smem, do_smem, k_smem, v_smem, ds_smem, dq_stage, cols_smem, kv_bar, ready, empty, ds_ready,
                   ds_free, dk_desc, dv_desc, dq_desc, LSE, DELTA, seqlen_q, seqlen_k, nheads, nheads_k, group,
                   softmax_scale, qk_scale, KEYS, rng_rows, dropout_p, win_left, win_right, WG: gl.constexpr,
                   HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, NUM_STAGES: gl.constexpr,
                   CAUSAL: gl.constexpr, ROTATE: gl.constexpr, DROPOUT: gl.constexpr, WINDOW: gl.constexpr,
                   DEFER_DQ: gl.constexpr = False, NUM_DS: gl.constexpr = 2, DQ_SPLIT_M: gl.constexpr = False,
                   BAND: gl.constexpr = 0, TIMELINE: gl.constexpr = 0):
    HALF_N: gl.constexpr = BLOCK_N // 2
    if TIMELINE:
        # (session 43 probe) KEYS is the int64 stamp buffer (no DROPOUT): this WG's TL_WG slots of the CTA's row
        if TIMELINE & TL_F_BOUNDS:
            _tl_stamp(KEYS, WG, TL_START)
            _tl_stamp(KEYS, WG, TL_SMID, True)
        tl_row = _tl_row(seqlen_q)
    else:
        tl_row = ZERO
    # the WG's dQ tile: (BLOCK_M, D / 2), the D-half WG; DQ_SPLIT_M (BLOCK_M / 2, D), the row half WG
    DQ_N: gl.constexpr = HEAD_DIM if DQ_SPLIT_M else HEAD_DIM // 2
    DQ_M: gl.constexpr = BLOCK_M // 2 if DQ_SPLIT_M else BLOCK_M
    DQ_COL: gl.constexpr = 0 if DQ_SPLIT_M else HEAD_DIM // 2     # the WG's first dq_accum column in the head
    dtype: gl.constexpr = k_smem.dtype
    # wgmma accumulators of one WG: S^T / dP^T (HALF_N, BLOCK_M), dK / dV (HALF_N, D),
    # dQ (BLOCK_M, D / 2)
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, BLOCK_M, 16])
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, HEAD_DIM, 16])
    q_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, DQ_N, 16])
    a_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    b, hk, n0, j0, n_m = _cta_coords(seqlen_q, seqlen_k, nheads_k, win_left, win_right, BLOCK_M, BLOCK_N, CAUSAL,
                                     WINDOW, BAND)
    dk = gl.zeros([HALF_N, HEAD_DIM], gl.float32, o_layout)                  # (HALF_N, D)
    dv = gl.zeros([HALF_N, HEAD_DIM], gl.float32, o_layout)                  # (HALF_N, D)
    s_zero = gl.zeros([HALF_N, BLOCK_M], gl.float32, s_layout)               # never read (use_acc=False)
    dq_zero = gl.zeros([DQ_M, DQ_N], gl.float32, q_layout)                   # never read (use_acc=False)
    vec_base = (b * nheads + hk * group) * seqlen_q
    ck = 0
    mk = 0
    if DROPOUT:
        gl.static_assert(BLOCK_N == DROPOUT_GROUP, "dropout: the key block is one column group")
        mk = fused_group_mult(KEYS, seqlen_k, nheads, rng_rows, n0)
        # the WG's 64 column keys (table index = key index), on S^T's row axis
        ck = gl.load(KEYS + n0 + WG * HALF_N + gl.arange(0, HALF_N, layout=gl.SliceLayout(1, s_layout)))
        ck = ck.to(gl.uint32, bitcast=True)
    mbarrier.wait(kv_bar, 0)
    n_tiles = group * n_m
    if TIMELINE & TL_F_BOUNDS:
        _tl_stamp(KEYS, WG, TL_KV)
    if DEFER_DQ:
        # DEFER_DQ (session 31; plain order only): tile g's dQ computed in tile g + 1 (the
        # last one's after the loop, _fused_dq_drain); tile 0 peeled (no previous tile's dQ),
        # then tiles 1 .. T - 1 with the previous tile's dq_accum coordinates carried (2
        # registers). Offline (sm_90a, D = 128): peeled 8 spill bytes, none in the loops; one
        # body for every tile (tile 0's dQ wgmmas on an unwritten buffer, its reduce outside
        # dq_accum, its ds_free arrival predicated off) 272 with 10 local accesses a tile in
        # WG 1's loop; the previous coordinates recomputed from g - 1 at the reduce instead of
        # carried 20 (1 a tile). CAUSAL spilled 148 (12 a tile) in the peeled form: refused.
        gl.static_assert(not CAUSAL and not DROPOUT and not WINDOW,
                         "DEFER_DQ: the plain kernel only (causal spills offline; dropout / window not compiled)")
        rot = _rotation(n_m, ROTATE, CAUSAL)
        row, col, vec = _fused_defer_coords(0, n_m, rot, b, hk, group, seqlen_q, vec_base, BLOCK_M, HEAD_DIM, WG)
        dk, dv = _fused_tile(0, k_smem, v_smem, q_smem, do_smem, ds_smem, dq_stage, cols_smem, ready, empty, ds_ready,
                             ds_free, dq_desc, dk, dv, s_zero, dq_zero, qk_scale, softmax_scale, 0, LSE, DELTA, vec,
                             row, col, WG, NUM_STAGES, False, s_layout, a_layout, DEFER=True, DQ_PREV=False,
                             NUM_DS=NUM_DS)
        for g in range(1, n_tiles):
            cargs = (row, col)          # tile g - 1's dq_accum coordinates
            row, col, vec = _fused_defer_coords(g, n_m, rot, b, hk, group, seqlen_q, vec_base, BLOCK_M, HEAD_DIM, WG)
            dk, dv = _fused_tile(g, k_smem, v_smem, q_smem, do_smem, ds_smem, dq_stage, cols_smem, ready, empty,
                                 ds_ready, ds_free, dq_desc, dk, dv, s_zero, dq_zero, qk_scale, softmax_scale, 0,
                                 LSE, DELTA, vec, row, col, WG, NUM_STAGES, False, s_layout, a_layout, DEFER=True,
                                 DQ_PREV=True, NUM_DS=NUM_DS, cargs=cargs)
        _fused_dq_drain(n_tiles - 1, ds_smem, k_smem, dq_stage, ds_ready, ds_free, dq_desc, dq_zero, row, col,
                        softmax_scale, WG, NUM_DS)
    elif CAUSAL or WINDOW:
        # One tile body for every ring tile, the mask applied where the tile's rel (the
        # first row of the tile + Nk - Nq - the WG's first key) says some key of the half
        # is hidden from some row of the tile (rel < HALF_N - 1: the diagonal tile, and a
        # tile hidden from all of this WG's keys, whose P^T is then all 0: dK / dV get
        # exact zeros added, dS^T is a zero half, as the other WG's dQ needs). Not
        # bwd_gluon.py's per-WG split (hidden tiles released unread, masked, full): there
        # the other WG needs no dS^T from a hidden tile; here every ring tile needs both
        # halves. Offline, three bodies (hidden / masked / full) spilled 312 bytes at
        # D = 128, two (masked incl. hidden / full) 252, two loops (all heads' masked tiles
        # first) 384, one body with an unconditional mask 60, this one 16 (outside the
        # loop: a value computed before the partitions' entry, one per CTA). No ROTATE
        # (the loader's order: j0, j0 + 1, ... per head, as here).
        # Nk - Nq through an opaque move, so that rel0's partition-invariant part is not
        # computed before the partitions' entry and carried across it (16 spill bytes)
        # WINDOW (session 28): the same loop over the band's tiles [j0, j0 + n_m)
        # (_fused_coords), rel the band's upper edge (+ win_right) and the lower one rel -
        # wspan (_fused_tile's WINDOW mask, on the tiles crossing either edge only)
        if WINDOW:
            off = gl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [seqlen_k - seqlen_q + win_right],
                                            dtype=gl.int32, is_pure=False, pack=1)
            wspan = win_left + win_right
        else:
            off = gl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [seqlen_k - seqlen_q], dtype=gl.int32,
                                            is_pure=False, pack=1)
            wspan = ZERO
        rel0 = j0 * BLOCK_M + off - (n0 + WG * HALF_N)
        for g in range(n_tiles):
            hh = g // n_m
            j = g - hh * n_m
            h = hk * group + hh
            rk_at = 0
            if DROPOUT:
                rk_at = fused_rk_at(seqlen_k, seqlen_q, rng_rows, b, h, (j0 + j) * BLOCK_M)
            dk, dv = _fused_tile(g, k_smem, v_smem, q_smem, do_smem, ds_smem, dq_stage, cols_smem, ready, empty,
                                 ds_ready, ds_free, dq_desc, dk, dv, s_zero, dq_zero, qk_scale, softmax_scale,
                                 rel0 + j * BLOCK_M, LSE, DELTA, vec_base + hh * seqlen_q + (j0 + j) * BLOCK_M,
                                 b * seqlen_q + (j0 + j) * BLOCK_M, h * HEAD_DIM + WG * DQ_COL, WG, NUM_STAGES,
                                 True, s_layout, a_layout, KEYS, rk_at, ck, mk, dropout_p, DROPOUT, wspan, WINDOW,
                                 DQ_SPLIT_M=DQ_SPLIT_M, tl_row=tl_row, TIMELINE=TIMELINE)
    else:
        rot = _rotation(n_m, ROTATE, CAUSAL)
        for g in range(n_tiles):
            hh, j = _tile_row(g, n_m, rot)
            h = hk * group + hh
            rk_at = 0
            if DROPOUT:
                rk_at = fused_rk_at(seqlen_k, seqlen_q, rng_rows, b, h, j * BLOCK_M)
            dk, dv = _fused_tile(g, k_smem, v_smem, q_smem, do_smem, ds_smem, dq_stage, cols_smem, ready, empty,
                                 ds_ready, ds_free, dq_desc, dk, dv, s_zero, dq_zero, qk_scale, softmax_scale, 0, LSE,
                                 DELTA, vec_base + hh * seqlen_q + j * BLOCK_M, b * seqlen_q + j * BLOCK_M,
                                 h * HEAD_DIM + WG * DQ_COL, WG, NUM_STAGES, False, s_layout, a_layout, KEYS,
                                 rk_at, ck, mk, dropout_p, DROPOUT, DQ_SPLIT_M=DQ_SPLIT_M, tl_row=tl_row,
                                 TIMELINE=TIMELINE)

    # epilogue. Both WGs' dQ wgmmas read both K halves: before K_WG is overwritten, the
    # last tile's ds_free phase (number (T - 1) // 2 of ds_free[(T - 1) % 2]) must be
    # complete, i.e. both WGs' last dQ reads done. This WG arrived on it already.
    last = n_tiles - 1
    if TIMELINE & TL_F_BOUNDS:
        _tl_stamp(KEYS, WG, TL_LOOP_END)
    if DEFER_DQ:
        # (the drain's arrival is the last on that phase: both WGs' dQ reads of K done)
        mbarrier.wait(ds_free.index(last % NUM_DS), (last // NUM_DS) & 1)
    else:
        mbarrier.wait(ds_free.index(last % 2), (last // 2) & 1)
    if TIMELINE & TL_F_BOUNDS:
        _tl_stamp(KEYS, WG, TL_EPI_WAIT)
    if BLOCK_M > 64:
        # (the WIDE tile, session 30) n0 again through an opaque move: else the value made
        # before the tile loop is kept across it in local memory (offline: 40 -> 24 spill
        # bytes, all outside the loops); BLOCK_M = 64 kernels compile as before
        if BAND:
            pid0 = gl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [gl.program_id(0)], dtype=gl.int32,
                                             is_pure=False, pack=1)
            pid_n, _ = _fused_pids(pid0, seqlen_k, BLOCK_N, BAND)
            n0 = pid_n * BLOCK_N
        else:
            n0 = gl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [gl.program_id(0) * BLOCK_N], dtype=gl.int32,
                                           is_pure=False, pack=1)
    row = b * seqlen_k + n0 + WG * HALF_N
    k_half = k_smem.index(WG)
    v_half = v_smem.index(WG)
    if DROPOUT:
        keep_frac = 1.0 - dropout_p
        dk = dk / keep_frac                                                  # bwd_ws.py: the loop's 1 / (1 - p)
        dv = dv / keep_frac
    k_half.store((dk * softmax_scale).to(dtype))
    v_half.store(dv.to(dtype))
    fence_async_shared()
    tma.async_copy_shared_to_global(dk_desc, [row, hk * HEAD_DIM], k_half)
    tma.async_copy_shared_to_global(dv_desc, [row, hk * HEAD_DIM], v_half)
    tma.store_wait(0)        # also the last dQ reduce (dq_stage must outlive it)
    if TIMELINE & TL_F_BOUNDS:
        _tl_stamp(KEYS, WG, TL_END)


@gluon.jit
def _store_half_rows(half, PTR, row0, col0, row_stride, n_rows):
    """VARLEN's epilogue for a ragged key block: the (HALF_N, D) 16-bit tile in shared memory `half` stored to
    the rows row0 .. row0 + n_rows - 1 (n_rows < HALF_N, may be <= 0) of PTR's (total, heads * D) rows at column
    col0, by masked pointer stores (a TMA store would write the next sequence's rows too). 16-byte vectors,
    a row D / 8 threads; the WG's shared-memory stores of the tile made and barriered by the caller."""
    HALF_N: gl.constexpr = half.shape[0]
    HEAD_DIM: gl.constexpr = half.shape[1]
    TPR: gl.constexpr = HEAD_DIM // 8                                        # threads a row
    layout: gl.constexpr = gl.BlockedLayout([1, 8], [32 // TPR, TPR], [4, 1], [1, 0])
    vals = half.load(layout)                                                 # (HALF_N, D)
    offs_r = gl.arange(0, HALF_N, layout=gl.SliceLayout(1, layout))
    offs_d = gl.arange(0, HEAD_DIM, layout=gl.SliceLayout(0, layout))
    rows = (row0 + offs_r).to(gl.int64) * row_stride + col0                 # (HALF_N,)
    ptrs = PTR + (gl.expand_dims(rows, 1) + gl.expand_dims(offs_d, 0))     # (HALF_N, D)
    keep = gl.expand_dims(offs_r < n_rows, 1) & gl.expand_dims(offs_d < HEAD_DIM, 0)
    gl.store(ptrs, vals, mask=keep)


@gluon.jit
def _fused_consume_varlen(q_smem, do_smem, k_smem, v_smem, ds_smem, dq_stage, cols_smem, kv_bar, ready, empty,
                          ds_ready, ds_free, dk_desc, dv_desc, dq_desc, LSE, DELTA, total_q, nheads_k, group,
                          softmax_scale, qk_scale, SCHED, slot, batch, DK, DV, WG: gl.constexpr,
                          HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
                          NUM_STAGES: gl.constexpr, CAUSAL: gl.constexpr, ROTATE: gl.constexpr, win_left=0,
                          win_right=0, WINDOW: gl.constexpr = False, KEYS=0, rng_rows=0, rng_stride=0,
                          dropout_p=0.0, DROPOUT: gl.constexpr = False):
    """VARLEN's consumer WG (session 50): _fused_consume's plain / CAUSAL loops over one packed sequence's
    query tiles (fused_varlen_coords; every tile MASKED-capable: CAUSAL's diagonal select, or KEY_BOUND on
    the sequence's last key block), lse / delta (H, total_q) by masked loads (rows past the sequence: +inf /
    0), dq reduce-added at the packed rows; the epilogue stores dK / dV by TMA for a whole half, by masked
    stores (_store_half_rows) for a half past the sequence's last key. The barrier protocol is _fused_consume's:
    both WGs visit every ring tile. WINDOW: _fused_consume's WINDOW loop on the band's tiles of the sequence
    (fused_varlen_coords), with KEY_BOUND as well (a right edge past the diagonal reaches keys past the sequence).
    DROPOUT (plain / CAUSAL, session 51): the packed batch's key table (launchers.common._dropout_keys with
    rng_rows = total_q, rng_stride = max_seqlen_k, as the packed forwards draw the mask): column keys by the key's
    index in its sequence (n0 + ..., read where < rng_stride: keys past the sequence are masked anyway), row keys
    by the packed row (fused_varlen_rk_at), the block's group multiplier from its n0; then _fused_tile's DROPOUT
    math, as the dense kernel's."""
    HALF_N: gl.constexpr = BLOCK_N // 2
    DQ_N: gl.constexpr = HEAD_DIM // 2
    dtype: gl.constexpr = k_smem.dtype
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, BLOCK_M, 16])
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, HEAD_DIM, 16])
    q_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, DQ_N, 16])
    a_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    q_start, k_start, seqlen_q, seqlen_k, n0, j0, n_m, rot = fused_varlen_coords(SCHED, slot, batch, BLOCK_M,
                                                                                 BLOCK_N, CAUSAL, ROTATE, win_left,
                                                                                 win_right, WINDOW)
    hk = gl.program_id(1)
    dk = gl.zeros([HALF_N, HEAD_DIM], gl.float32, o_layout)                  # (HALF_N, D)
    dv = gl.zeros([HALF_N, HEAD_DIM], gl.float32, o_layout)                  # (HALF_N, D)
    s_zero = gl.zeros([HALF_N, BLOCK_M], gl.float32, s_layout)               # never read (use_acc=False)
    dq_zero = gl.zeros([BLOCK_M, DQ_N], gl.float32, q_layout)                # never read (use_acc=False)
    key_lim = seqlen_k - n0 - WG * HALF_N                                    # the half's keys in the sequence
    ck = 0
    mk = 0
    if DROPOUT:
        gl.static_assert(BLOCK_N == DROPOUT_GROUP and not WINDOW, "VARLEN DROPOUT: plain / CAUSAL, one group a block")
        mk = fused_group_mult(KEYS, rng_stride, nheads_k * group, rng_rows, n0)
        offs_ck = n0 + WG * HALF_N + gl.arange(0, HALF_N, layout=gl.SliceLayout(1, s_layout))
        ck = gl.load(KEYS + offs_ck, mask=offs_ck < rng_stride, other=0).to(gl.uint32, bitcast=True)
    mbarrier.wait(kv_bar, 0)
    n_tiles = group * n_m
    if WINDOW:
        # _fused_consume's WINDOW loop: rel the band's upper edge from the tile's first row and the half's first
        # key, rel - wspan its lower one; keys past the sequence by KEY_BOUND (key_lim) on the last key block
        rel0 = j0 * BLOCK_M + (seqlen_k - seqlen_q) + win_right - (n0 + WG * HALF_N)
        wspan = win_left + win_right
        for g in range(n_tiles):
            hh = g // n_m
            j = g - hh * n_m
            h = hk * group + hh
            m = (j0 + j) * BLOCK_M
            dk, dv = _fused_tile(g, k_smem, v_smem, q_smem, do_smem, ds_smem, dq_stage, cols_smem, ready, empty,
                                 ds_ready, ds_free, dq_desc, dk, dv, s_zero, dq_zero, qk_scale, softmax_scale,
                                 rel0 + j * BLOCK_M, LSE, DELTA, h * total_q + q_start + m, q_start + m,
                                 h * HEAD_DIM + WG * DQ_N, WG, NUM_STAGES, True, s_layout, a_layout,
                                 wspan=wspan, WINDOW=True, KEY_BOUND=True, VARLEN=True, row_lim=seqlen_q - m,
                                 key_lim=key_lim)
    elif CAUSAL:
        # _fused_consume's CAUSAL loop: rel the tile's first row + Nk_b - Nq_b - the half's first key
        rel0 = j0 * BLOCK_M + (seqlen_k - seqlen_q) - (n0 + WG * HALF_N)
        for g in range(n_tiles):
            hh = g // n_m
            j = g - hh * n_m
            h = hk * group + hh
            m = (j0 + j) * BLOCK_M                                           # the tile's first row in the sequence
            rk_at = 0
            if DROPOUT:
                rk_at = fused_varlen_rk_at(rng_stride, rng_rows, h, q_start + m)
            dk, dv = _fused_tile(g, k_smem, v_smem, q_smem, do_smem, ds_smem, dq_stage, cols_smem, ready, empty,
                                 ds_ready, ds_free, dq_desc, dk, dv, s_zero, dq_zero, qk_scale, softmax_scale,
                                 rel0 + j * BLOCK_M, LSE, DELTA, h * total_q + q_start + m, q_start + m,
                                 h * HEAD_DIM + WG * DQ_N, WG, NUM_STAGES, True, s_layout, a_layout,
                                 KEYS, rk_at, ck, mk, dropout_p, DROPOUT, VARLEN=True, row_lim=seqlen_q - m)
    else:
        for g in range(n_tiles):
            hh, j = _tile_row(g, n_m, rot)
            h = hk * group + hh
            m = j * BLOCK_M
            rk_at = 0
            if DROPOUT:
                rk_at = fused_varlen_rk_at(rng_stride, rng_rows, h, q_start + m)
            dk, dv = _fused_tile(g, k_smem, v_smem, q_smem, do_smem, ds_smem, dq_stage, cols_smem, ready, empty,
                                 ds_ready, ds_free, dq_desc, dk, dv, s_zero, dq_zero, qk_scale, softmax_scale,
                                 key_lim, LSE, DELTA, h * total_q + q_start + m, q_start + m,
                                 h * HEAD_DIM + WG * DQ_N, WG, NUM_STAGES, True, s_layout, a_layout,
                                 KEYS, rk_at, ck, mk, dropout_p, DROPOUT, KEY_BOUND=True, VARLEN=True,
                                 row_lim=seqlen_q - m)
    # epilogue: _fused_consume's (the last tile's ds_free phase before K_WG is overwritten)
    last = n_tiles - 1
    mbarrier.wait(ds_free.index(last % 2), (last // 2) & 1)
    row = k_start + n0 + WG * HALF_N
    k_half = k_smem.index(WG)
    v_half = v_smem.index(WG)
    if DROPOUT:
        keep_frac = 1.0 - dropout_p
        dk = dk / keep_frac                                                  # bwd_ws.py: the loop's 1 / (1 - p)
        dv = dv / keep_frac
    k_half.store((dk * softmax_scale).to(dtype))
    v_half.store(dv.to(dtype))
    if key_lim >= HALF_N:
        fence_async_shared()
        tma.async_copy_shared_to_global(dk_desc, [row, hk * HEAD_DIM], k_half)
        tma.async_copy_shared_to_global(dv_desc, [row, hk * HEAD_DIM], v_half)
    else:
        gl.thread_barrier()            # the WG's stores of both tiles made before any thread reads them back
        _store_half_rows(k_half, DK, row, hk * HEAD_DIM, nheads_k * HEAD_DIM, key_lim)
        _store_half_rows(v_half, DV, row, hk * HEAD_DIM, nheads_k * HEAD_DIM, key_lim)
    tma.store_wait(0)        # also the last dQ reduce (dq_stage must outlive it)


# win_left / win_right not specialised (as fwd_gluon.py's): every window shares one compiled
# kernel a variant; without WINDOW the launcher passes them as None (constexprs: no parameters)
@gluon.jit(do_not_specialize=["win_left", "win_right"])
def attn_bwd_fused_gluon_kernel(
    q_desc, do_desc,           # host TensorDescriptors over (B * Nq, H * D) views, box (BLOCK_M, D)
    k_desc, v_desc,            # over (B * Nk, Hk * D), box (BLOCK_N / 2, D)
    dk_desc, dv_desc,          # over dk / dv (B * Nk, Hk * D) contiguous, box (BLOCK_N / 2, D)
    dq_desc,                   # over dq_accum (B * Nq, H * D) fp32, zeroed, box (BLOCK_M, D / 2)
    LSE, DELTA,                # lse / delta (B, H, Nq) fp32 contiguous
    seqlen_q, seqlen_k, nheads, nheads_k, group, softmax_scale, qk_scale,
    KEYS, rng_rows, dropout_p,  # DROPOUT: the key table (int32), B * Nq, p (float); else None (constexprs)
    win_left, win_right,        # WINDOW: the window's sides, >= 0 (Nq + Nk: unbounded); else None (constexprs)
    HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, NUM_STAGES: gl.constexpr,
    CAUSAL: gl.constexpr = False, ROTATE: gl.constexpr = True, DROPOUT: gl.constexpr = False,
    WINDOW: gl.constexpr = False, DEFER_DQ: gl.constexpr = False, DQ_SPLIT_M: gl.constexpr = False,
    BAND: gl.constexpr = 0, TIMELINE: gl.constexpr = 0,
    SCHED=None, batch=None,     # VARLEN: the int32 table (fused_varlen_coords; + the dispatch order), B
    DK=None, DV=None,           # VARLEN: dk / dv (total_k, Hk, D), for the ragged key blocks' masked stores
    VARLEN: gl.constexpr = False, VARLEN_ORDER: gl.constexpr = False,
    rng_stride=None,            # VARLEN with DROPOUT: the key table's column count, max_seqlen_k (dense: Nk)
):
    # grid (Nk / BLOCK_N, B * Hk): program_id(0) the key block, program_id(1) batch x KV head;
    # BAND > 0 (CAUSAL): (Nk / BLOCK_N * B * Hk,), rank-major bands of BAND heads (_fused_pids)
    # VARLEN (session 50; launchers/backward_gluon.fused_varlen_into): a packed batch, grid (slots, Hk), slot
    # program_id(0) (through the table's dispatch order with VARLEN_ORDER) one key block of one sequence
    # (fused_varlen_coords), an upper bound: spare slots return at once. seqlen_q / seqlen_k are total_q /
    # total_k, q / dout / dq_accum (total_q, H * D) rows, k / v / dk / dv (total_k, Hk * D), lse / delta
    # (H, total_q). The plain / CAUSAL / WINDOW 64-row tile only, no DEFER_DQ, DQ_SPLIT_M, BAND or TIMELINE (not
    # compiled or measured); DROPOUT (session 51) plain / CAUSAL, with rng_stride (the packed table's layout).
    HALF_N: gl.constexpr = BLOCK_N // 2
    DQ_N: gl.constexpr = HEAD_DIM // 2
    gl.static_assert(HALF_N == 64, "two consumer warpgroups of 64 keys each")
    gl.static_assert(not (CAUSAL and WINDOW), "CAUSAL and WINDOW are exclusive (causal is the window (Nq + Nk, 0))")
    gl.static_assert(not (DROPOUT and WINDOW), "WINDOW with DROPOUT: not compiled or measured (launcher: refused)")
    gl.static_assert(not BAND or CAUSAL, "BAND: the causal kernel only (equal key blocks otherwise)")
    # TIMELINE (session 43 probe): KEYS carries the int64 (CTAs, TL_SLOTS) stamp buffer, so no DROPOUT; DEFER_DQ's
    # tile body is not stamped
    # (TL: TIMELINE's flags, 0 also where a caller binds no TIMELINE at all: None)
    TL: gl.constexpr = TIMELINE if TIMELINE else 0
    gl.static_assert(not TL or (not DROPOUT and not DEFER_DQ), "TIMELINE: not with DROPOUT or DEFER_DQ")
    if TL & TL_F_BOUNDS:
        _tl_stamp(KEYS, 0, TL_ENTRY)          # (the default warps: consumer WG 0's)
    if VARLEN:
        gl.static_assert(BLOCK_M == 64 and not (DEFER_DQ or DQ_SPLIT_M or BAND or TL),
                         "VARLEN: the plain / CAUSAL / WINDOW 64-row tile only (not compiled or measured otherwise)")
        slot = gl.program_id(0)
        if VARLEN_ORDER:
            slot = gl.load(SCHED + 3 * (batch + 1) + slot)            # the host's dispatch order
        if slot >= gl.load(SCHED + batch):
            return                                                    # the grid is an upper bound
    dtype: gl.constexpr = q_desc.dtype
    # dS^T buffers (each two halves) and ds_ready / ds_free pairs (DEFER_DQ: DEFER_DS, 2)
    NUM_DS: gl.constexpr = DEFER_DS if DEFER_DQ else 2
    if WINDOW:
        wl = win_left
        wr = win_right
    else:
        # constexprs, so that no partition captures (and the SASS does not change by) the
        # two unused parameters (fwd_gluon.py's WINDOW does the same)
        wl = ZERO
        wr = ZERO
    ds_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([HALF_N, BLOCK_M], dtype)
    q_smem = gl.allocate_shared_memory(dtype, [NUM_STAGES, BLOCK_M, HEAD_DIM], q_desc.layout)    # (S, BLOCK_M, D)
    do_smem = gl.allocate_shared_memory(dtype, [NUM_STAGES, BLOCK_M, HEAD_DIM], do_desc.layout)  # (S, BLOCK_M, D)
    k_smem = gl.allocate_shared_memory(dtype, [2, HALF_N, HEAD_DIM], k_desc.layout)             # (2, HALF_N, D)
    v_smem = gl.allocate_shared_memory(dtype, [2, HALF_N, HEAD_DIM], v_desc.layout)             # (2, HALF_N, D)
    # dS^T: buffer i = g % NUM_DS, half w at index 2 i + w
    ds_smem = gl.allocate_shared_memory(dtype, [2 * NUM_DS, HALF_N, BLOCK_M], ds_layout)   # (2 NUM_DS, HALF_N, BLOCK_M)
    if DQ_SPLIT_M:
        # DQ_SPLIT_M (session 31, D = 64 WIDE): WG w's dQ is the query rows 64 w .. 64 w + 63 over
        # the whole D, (BLOCK_M / 2, D) fp32: the same 16 KB a WG as (BLOCK_M, D / 2)
        gl.static_assert(BLOCK_M == 2 * HALF_N, "DQ_SPLIT_M: the WIDE tile (BLOCK_M = 128) only")
        gl.static_assert(not DEFER_DQ and not DROPOUT and not WINDOW,
                         "DQ_SPLIT_M: not with DEFER_DQ, DROPOUT or WINDOW (not compiled or measured)")
        dq_stage = gl.allocate_shared_memory(gl.float32, [2, BLOCK_M // 2, HEAD_DIM], dq_desc.layout)  # (2, BM/2, D)
    else:
        dq_stage = gl.allocate_shared_memory(gl.float32, [2, BLOCK_M, DQ_N], dq_desc.layout)    # (2, BLOCK_M, D/2)
    # CAUSAL: the column indices 0 .. BLOCK_M - 1 of a masked tile, written once here (the
    # region's entry barrier orders the store before the partitions' reads; bwd_gluon.py)
    cols_smem = gl.allocate_shared_memory(gl.int32, [BLOCK_M], gl.SwizzledSharedLayout(1, 1, 1, [0]))   # (BLOCK_M,)
    if CAUSAL or WINDOW:
        cols_smem.store(gl.arange(0, BLOCK_M, layout=gl.BlockedLayout([1], [32], [4], [0])))
    kv_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    ready = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    ds_ready = gl.allocate_shared_memory(gl.int64, [NUM_DS, 1], mbarrier.MBarrierLayout())
    ds_free = gl.allocate_shared_memory(gl.int64, [NUM_DS, 1], mbarrier.MBarrierLayout())
    mbarrier.init(kv_bar, count=1)
    for i in gl.static_range(NUM_STAGES):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=2)      # one arrival per consumer WG
    for i in gl.static_range(NUM_DS):
        mbarrier.init(ds_ready.index(i), count=2)   # one arrival per consumer WG
        mbarrier.init(ds_free.index(i), count=2)    # one arrival per consumer WG
    fence_async_shared()

    WG0: gl.constexpr = 0
    WG1: gl.constexpr = 1
    if VARLEN:
        gl.warp_specialize([
            (_fused_consume_varlen, (q_smem, do_smem, k_smem, v_smem, ds_smem, dq_stage, cols_smem, kv_bar, ready,
                                     empty, ds_ready, ds_free, dk_desc, dv_desc, dq_desc, LSE, DELTA, seqlen_q,
                                     nheads_k, group, softmax_scale, qk_scale, SCHED, slot, batch, DK, DV, WG0,
                                     HEAD_DIM, BLOCK_M, BLOCK_N, NUM_STAGES, CAUSAL, ROTATE, wl, wr, WINDOW,
                                     KEYS, rng_rows, rng_stride, dropout_p, DROPOUT)),
            (_fused_consume_varlen, (q_smem, do_smem, k_smem, v_smem, ds_smem, dq_stage, cols_smem, kv_bar, ready,
                                     empty, ds_ready, ds_free, dk_desc, dv_desc, dq_desc, LSE, DELTA, seqlen_q,
                                     nheads_k, group, softmax_scale, qk_scale, SCHED, slot, batch, DK, DV, WG1,
                                     HEAD_DIM, BLOCK_M, BLOCK_N, NUM_STAGES, CAUSAL, ROTATE, wl, wr, WINDOW,
                                     KEYS, rng_rows, rng_stride, dropout_p, DROPOUT)),
            (_fused_load_varlen, (q_desc, do_desc, k_desc, v_desc, q_smem, do_smem, k_smem, v_smem, kv_bar, ready,
                                  empty, group, SCHED, slot, batch, HEAD_DIM, BLOCK_M, BLOCK_N, NUM_STAGES, CAUSAL,
                                  ROTATE, wl, wr, WINDOW)),
        ], [4, LOADER_WARPS], [CONSUMER_REGS, LOADER_REGS])
    else:
        gl.warp_specialize([
            (_fused_consume, (q_smem, do_smem, k_smem, v_smem, ds_smem, dq_stage, cols_smem, kv_bar, ready, empty,
                              ds_ready, ds_free, dk_desc, dv_desc, dq_desc, LSE, DELTA, seqlen_q, seqlen_k, nheads,
                              nheads_k, group, softmax_scale, qk_scale, KEYS, rng_rows, dropout_p, wl, wr, WG0,
                              HEAD_DIM, BLOCK_M, BLOCK_N, NUM_STAGES, CAUSAL, ROTATE, DROPOUT, WINDOW, DEFER_DQ,
                              NUM_DS, DQ_SPLIT_M, BAND, TL)),
            (_fused_consume, (q_smem, do_smem, k_smem, v_smem, ds_smem, dq_stage, cols_smem, kv_bar, ready, empty,
                              ds_ready, ds_free, dk_desc, dv_desc, dq_desc, LSE, DELTA, seqlen_q, seqlen_k, nheads,
                              nheads_k, group, softmax_scale, qk_scale, KEYS, rng_rows, dropout_p, wl, wr, WG1,
                              HEAD_DIM, BLOCK_M, BLOCK_N, NUM_STAGES, CAUSAL, ROTATE, DROPOUT, WINDOW, DEFER_DQ,
                              NUM_DS, DQ_SPLIT_M, BAND, TL)),
            (_fused_load, (q_desc, do_desc, k_desc, v_desc, q_smem, do_smem, k_smem, v_smem, kv_bar, ready, empty,
                           seqlen_q, seqlen_k, nheads_k, group, wl, wr, HEAD_DIM, BLOCK_M, BLOCK_N, NUM_STAGES, CAUSAL,
                           ROTATE, WINDOW, BAND)),
        ], [4, LOADER_WARPS], [CONSUMER_REGS, LOADER_REGS])

    mbarrier.invalidate(kv_bar)
    for i in gl.static_range(NUM_STAGES):
        mbarrier.invalidate(ready.index(i))
        mbarrier.invalidate(empty.index(i))
    for i in gl.static_range(NUM_DS):
        mbarrier.invalidate(ds_ready.index(i))
        mbarrier.invalidate(ds_free.index(i))
