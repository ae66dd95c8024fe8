"""FlashAttention-2 forward for Hopper written in Gluon, hand-scheduled.

Status (2026-12-01, Triton 3.6.0): written and compiled offline for sm_90a in session 23
(bench/gluon_fwd_compile.py), first run on the H200 the same day (bench/gpu/
s23_gluon_fwd_ab.py: outputs bitwise equal to fwd_ws.py's, 3 stages +5-10% over it at
N >= 4k). CAUSAL added the same day (bench/gpu/s23_gluon_causal_ab.py: right at 9 causal
shapes, +7-23% over fwd_ws.py at 8k / 16k). The library routes here (launchers.policy.
gluon_fwd; host side launchers/forward_gluon.py) unmasked dense D = 128 and (session 32)
D = 256 forwards from N = 1k and D = 64 from 2k as PERSISTENT (D = 64 with three consumers
since session 29), causal D = 128 and D = 256 from 2k (session 32) and D = 64 from 4k one
block a CTA (D = 64 with three consumers since session 30; GLUON_FWD_MIN_N,
GLUON_FWD_CAUSAL_MIN_N, GLUON_FWD_PERSISTENT, GLUON_FWD_CONSUMERS; session 24).

Why: kernels/fwd_ws.py leaves the schedule to Triton's automatic warp specialization
(`tl.range(..., warp_specialize=True)`) and reaches ~545-560 TFLOP/s at D = 128
(non-causal, N >= 2k, bf16) on the H200, against cuDNN's ~595-625. Gluon
(`triton.experimental.gluon`) exposes the pieces that pass hides: explicit partitions
with their own warp and register counts, TMA, mbarriers, asynchronous wgmma and the
waits on it, and explicit register layouts.

Scope (the launcher checks it): forward only, no ALiBi / softcap (dropout: DROPOUT below); no mask,
(CAUSAL) the library's bottom-right causal one or (WINDOW) a sliding window; dense q
(B, Nq, H, D), k / v (B, Nk, Hk, D) with H % Hk == 0, bf16 or fp16, D in {64, 128} (256: D256),
Nq % BLOCK_M == 0 and Nk % BLOCK_N == 0. Output o like q, and lse (B, H, Nq) fp32, the natural-log logsumexp
of the scaled scores.

Design: one CTA per (128-row query block, batch x head), three partitions
(gl.warp_specialize):
  - two consumer warpgroups (the default partition, 4 warps, and a 4-warp worker), each
    owning BLOCK_M / 2 = 64 query rows: S = Q_half K^T into a 64 x BLOCK_N fp32 wgmma
    accumulator, P (fp16 / bf16) kept in registers as wgmma's A operand, O_half += P V
    into a 64 x D fp32 accumulator. Both read the same K / V stage;
  - a load partition (1 warp, 24 registers) that loads the two Q halves once and streams
    K and V tiles through a ring of NUM_STAGES shared buffers by TMA.
  Barriers (mbarriers, one arrival each unless said): q_bar (both Q halves' bytes),
  k_ready[s] / v_ready[s] (TMA transaction counts; apart, so S_0 need not wait for V_0),
  kv_empty[s] (2 arrivals: each consumer releases the stage after its P V wgmma
  finished). Phases: tile j uses stage j % NUM_STAGES with parity (j // NUM_STAGES) & 1;
  the loader waits kv_empty with the opposite parity, which a fresh barrier passes.
  Within a consumer (FA3's intra-warpgroup overlap): at tile j it issues
  S_j = Q K_j^T (async), then O += P_{j-1} V_{j-1} (async), waits until only the P V
  group is in flight (wgmma groups retire in order), does the softmax of S_j while the
  P V wgmma runs, then waits for it, releases stage j - 1 and rescales O by alpha_j.
  The softmax is FA2's: scores in log2 units (softmax_scale * log2(e) folded into one
  FMA with the row max), exp2, the accumulator left unnormalised until after the loop,
  then divided by l once; lse = (m + log2 l) * ln 2. O leaves through TMA from the
  consumer's own Q half of shared memory (Q is dead by then); lse by plain stores.
  PINGPONG (off by default, for the A/B) orders the two consumers' wgmma issues with two
  more mbarriers (turn[wg]): a consumer waits for its turn, issues S_j and P_{j-1} V_{j-1},
  and hands the turn over, so one warpgroup's softmax runs under the other's wgmmas.
  CAUSAL (2026-12-01): query row i sees key c iff c <= i + Nk - Nq (bottom-right aligned,
  reference.py); diag = pid_m * BLOCK_M + Nk - Nq is that bound for the CTA's first row.
  The loader loads the tiles the CTA's last row reaches, n_load = cdiv(diag + BLOCK_M,
  BLOCK_N) (clamped to [1, Nk / BLOCK_N]): the union of both halves' needs, since the
  lower half (WG 1) reaches further. Each consumer consumes and releases all n_load
  stages, in two loops over the same pipeline: tiles [1, n_full) with the plain softmax
  (no mask work; n_full = the tiles fully visible to its first row, so to all its rows,
  at least 1) and tiles [n_full, n_load) with the mask (_softmax_step_masked: a select
  on an iota compare, scores scaled before the mask). Tile 0 is peeled as before and
  masked. Tiles wholly above the diagonal are never loaded; a tile the lower half needs
  but the upper half does not see at all (only when BLOCK_N < BLOCK_M) is masked to p = 0
  by the upper consumer, which still waits for it and releases it, so every stage gets
  its 2 kv_empty arrivals and the phases (from the tile index j alone) need no change
  across the two loops. With BLOCK_N = BLOCK_M = 128 and Nk - Nq a multiple of 128 (the
  launcher's contract) each half has exactly one masked tile, the CTA's diagonal one.
  Rows that see no key (Nq > Nk) keep m = -inf: the masked step exponentiates against 0
  instead (p = 0, alpha = 0) and the epilogue writes O = 0, lse = +inf, the library's
  convention; a CTA none of whose rows sees a key still loads and masks tile 0 (n_load
  >= 1, so the peeled tile needs no branch). Query blocks go heaviest first (pid_m
  reversed: the last blocks see the most tiles), as fwd_ws.py's HEAVY_FIRST. The
  non-causal kernel's SASS is unchanged by all this (compared offline).
  Tile bookkeeping (q_row, kv_row, n_load, ...) is _tile_coords, shared by both variants.
  PERSISTENT (2026-12-01; routed for non-causal calls since session 24's A/B, bench/gpu/
  s24_gluon_persistent_ab.py, s24_route_ab.py): grid = num_programs CTAs (the launcher: the SM count, 132 on the H200),
  CTA pid takes tiles pid, pid + num_programs, ... of the n_m x (B * H) blocks (static
  round robin; _tile_of: query block fastest, CAUSAL heaviest query blocks first), and
  every partition walks that list itself (_fwd_load_persistent, _fwd_consume_persistent
  around the same _fwd_consume). Phases continue across blocks: t0 counts the CTA's K / V
  tiles so far (block tile j is ring tile g = t0 + j: stage g % NUM_STAGES, parity
  (g // NUM_STAGES) & 1), it its blocks (q_bar's parity it & 1). O still leaves through
  Q's buffer, so the next block's Q load must wait for the TMA stores: q_free (2
  arrivals, each consumer after its tma.store_wait); the loader first issues the next
  block's first min(n_load, NUM_STAGES) K / V tiles (they need only the ring), then waits
  q_free (parity (it & 1) ^ 1: a fresh barrier passes), loads Q, then the rest. Cost: one
  Q load latency a block (~1 us against ~15 us of work a block at N = 1k, D = 128);
  separate O buffers do not fit (Q 32 KB + 3 stages 192 KB = 224 KB of 227). PINGPONG is
  not supported with it (its turn parities count issues per block). PERSISTENT=False
  compiles to the SASS of before (7 variants, addresses stripped; the PTX differs only in
  the new batch parameter, which the one-block kernel does not read).

SCHEDULED (2026-12-01, session 24, offline only; not routed; bench/gpu/s25_gluon_sched_ab.py):
  PERSISTENT CAUSAL with the blocks dealt by the host (launchers/schedule.py: longest
  first to the least-loaded CTA, band by band) instead of _tile_of's banded round robin,
  which lost 7-13% to one CTA a block at 16k (s24/call3): offline, its most loaded CTA
  carries +20% over the mean there, the host's deal +4.4%. The kernel reads SCHED[pid],
  SCHED[pid + 1] (its range in the block list) and each entry pid_bh * n_m + pid_m
  (_block_range, _block_of); every partition reads the same list, so the phases need
  nothing new. SCHEDULED=False: the SASS opcodes of before (4 variants compared offline).

WINDOW (session 25, 2026-12-01; routed by launchers.policy.gluon_fwd_window after
  bench/gpu/s25_gluon_window_ab.py): flash-attn's sliding window, query row i sees key c iff diag_i - win_left
  <= c <= diag_i + win_right, diag_i = i + Nk - Nq (reference.py); two runtime arguments
  win_left, win_right >= 0 (the launcher, forward_gluon.window_args, passes Nq + Nk for an
  unbounded side, turns (-1, -1) into the plain and (-1, 0) into the CAUSAL kernel). A
  separate constexpr rather than CAUSAL generalised: CAUSAL keeps its heaviest-first and
  banded orders and its SASS; a window's blocks are of equal cost (at Nq = Nk, left =
  1024, right = 0: 9 tiles each past the first 8 blocks), so they go in plain order and
  PERSISTENT uses the non-causal deal (query block fastest: neighbouring blocks share
  most of their K / V tiles in L2). Per block (_tile_coords): the tiles [t_lo, t_hi) its
  rows reach, t_lo = max(0, lo) // BLOCK_N with lo = diag - win_left the first row's
  first key, t_hi = cdiv(hi + BLOCK_M, BLOCK_N) with hi = diag + win_right, clamped to
  the Nk / BLOCK_N tiles, n_load = t_hi - t_lo >= 1; kv_row starts at tile t_lo (the
  loaders need no change) and diag is passed relative to that tile's first key, so the
  consumers' mask arithmetic (diag - j * BLOCK_N, j the block's tile) is CAUSAL's. Per
  warpgroup three ranges over the same pipeline: [0, n_left) masked (tile 0 peeled, then
  the left edge: tiles before the first one whose first key is >= the warpgroup's last
  row's lower bound), [n_left, n_full) unmasked (n_full: tiles whose last key is <= its
  first row's upper bound), [n_full, n_load) masked (the right edge / diagonal), with
  1 <= n_left <= n_full <= n_load. The mask (_softmax_step_masked, WINDOW) adds
  c >= (row's upper bound) - wspan, wspan = win_left + win_right. At N = 16k, (1024, 0),
  BLOCK_N = 128: per warpgroup 1 left-masked tile, 7 unmasked, 1 diagonal. Barriers: no
  new ones and no new arrival rule. The three loops and the peel run the ring tiles t0 ..
  t0 + n_load - 1 in order once each, whatever n_left / n_full (_fwd_consume's doc), both
  warpgroups with the same n_load, and the loader loads exactly those n_load tiles (the
  union of both halves' needs); a tile hidden from all rows of one warpgroup (the lower
  half's left-edge tile when left is small, or the upper half's last) is masked to p = 0
  and still waited for and released, so every stage gets its 2 kv_empty arrivals and the
  parities follow from the ring index alone, as in CAUSAL. PERSISTENT: t0 += n_load per
  block, q_bar / q_free per block, unchanged. Rows that see no key (Nq > Nk + win_right)
  end with m = -inf and l = 0: O = 0, lse = +inf (CAUSAL's epilogue); a block none of
  whose rows sees a key loads tile 0 (n_load = 1) and masks it all. Kernels without WINDOW
  get win_left / win_right as the constexpr 0 (no partition captures them): their SASS is
  unchanged (all 26 non-window variants of bench/gluon_fwd_compile.py's table compared
  with the source before, addresses stripped).

DROPOUT (session 26, 2026-12-01; routed by launchers.policy.gluon_fwd_dropout's
  GLUON_FWD_DROPOUT_MIN_N after bench/gpu/s26_gluon_dropout_fwd_ab.py, s26/call1):
  dropout with EXACTLY the library's mask (kernels/common.py dropout_keep: what fwd_ws.py
  and fwd.py drop, what the backward regenerates from its key table and what
  return_attn_probs' S_dmask shows), with any of the variants above. Arguments RNG (the
  call's int64 (seed, offset) on the device), dropout_p (fp32), rng_rows = B * Nq and
  rng_stride = Nk (launchers/forward.py's counter layout: row (b, h, i) has the counter
  rng_offset + (h * B * Nq + b * Nq + i) * Nk). Per consumer and block (_dropout_setup):
  the row keys of its HALF_M rows (kernels/common.py dropout_row_key at those counters,
  through dropout_block_row_keys: q_row is b * Nq + the block's first row, the head is
  q_col // HEAD_DIM), the seed's column words, and the BLOCK_N in-group column keys when
  a tile is a whole DROPOUT_GROUP (128: the default tiles; BLOCK_N 64 hashes its half of
  the group per tile). Per tile (_dropout_tile, after the softmax step, so l sums the
  UNdropped P, as fwd_ws.py): the tile's group key folds into the row keys, its odd
  multiplier is uniform. Unmasked variants (LEAN_KEEP in _fwd_consume; the masked CAUSAL /
  WINDOW ones keep the float form, dropout_tile_scale, 5 instructions an element: measured
  faster there, below): per element x = (rk_t ^ cb) * mk (dropout_tile_hash: LOP3, IMAD)
  and keep iff x >= keep_min (unsigned; keep_min = the threshold with its low 9 bits
  cleared, dropout_keep_min: the library's top-23-bit test, proof there), applied as a
  select on the fp32 p inside the packing conversion to bf16 / fp16 (dropout_keep_select:
  inline PTX, ISETP.GE.U32 + SEL an element, the F2FP a pair as without dropout: 4
  instructions an element); only the P fed to the P V wgmma is dropped, lse is the
  undropped one, and the epilogue divides O by l * (1 - p) (kept values scale by
  1 / (1 - p), once a row: nothing per element). The column index
  of block tile j is key0 + j * BLOCK_N (key0 = t_lo * BLOCK_N under WINDOW, else 0;
  in ring terms key0_g + g * BLOCK_N). The compositions (dropout_block_row_keys,
  dropout_keep_min, dropout_tile_hash, dropout_keep_select) and every hash are @triton.jit
  functions (kernels/common.py's own),
  called from the Gluon consumers: Triton generates a triton.jit callee with the caller's
  (Gluon) semantic, the index tensors keeping the S tile's slice layouts. So the mask is
  the library's by construction, and tests/test_fwd_gluon.py runs the same functions
  under the interpreter against the S_dmask kernel and a numpy model, bitwise. Kernels
  without DROPOUT get the dropout arguments as the constexpr 0 (no partition captures
  them): the 39 non-dropout variants of bench/gluon_fwd_compile.py's table compile to the
  SASS of before (addresses stripped). Offline (same report): 0 spills plain (one block,
  PERSISTENT, BLOCK_N 64, PINGPONG, D = 128 and 64), CAUSAL one block 8 bytes, CAUSAL
  PERSISTENT 464 / SCHEDULED 512, WINDOW 1564 (one block) / 2044 (PERSISTENT) at D = 128
  (0 at D = 64): the 128 in-group keys are 32 registers a thread for the whole block, and
  the masked variants sat near the 240 budget already (hashing them per tile instead
  spilled more: 280 / 1940 bytes). Shared memory unchanged.
  Session 26, later (2026-12-01, offline, bench/gluon_fwd_compile.py + cuobjdump; the numbers
  above are session 26's): the keep test was common.dropout_keep_scale's float (LOP3,
  IMAD, LEA.HI (x >> 9 | 0x3F800000), FFMA.SAT (0 / 1), then FMUL p * keep: 5 an element);
  now an integer compare and a select (LOP3, IMAD, ISETP.GE.U32, SEL: 4), bitwise the same
  mask (the 1 / (1 - p) was already in the epilogue). SASS instructions of one consumer's
  loop body (one 64 x 128 tile), D = 128 bf16, without dropout / session 26 / now: plain
  458 / 798 / 728, PERSISTENT 452 / 792 / 729, CAUSAL unmasked loop 490 / 800 / 754 and
  masked (diagonal) loop 713 / 1110 / 989; D = 64 plain 758 -> 687, CAUSAL 760 -> 694 /
  1015 -> 886; BLOCK_N 64 608 -> 574. So the dropout's extra issue per tile 340 -> 270
  (plain), 310 -> 264 / 397 -> 276 (CAUSAL). In the CAUSAL unmasked loop 16 IMAD.MOV
  register copies appear (the saving is 46, not 64); the session 26 masked loop carried
  the fp32 P across the back edge and repacked it with 64 PRMT a tile, gone now (see
  dropout_keep_select). Spill bytes, session 26 -> now (D = 128): plain one block 0 -> 0,
  PERSISTENT 0 -> 16 (outside the tile loops: 2 STL once, 2 LDL a block), CAUSAL one block
  8 -> 24 (one STL / LDL pair in one consumer's diagonal loop, 1-2 tiles a block; the rest
  once a block), CAUSAL PERSISTENT 464 -> 160 (masked loop 30 spill instructions -> 0, the
  unmasked loop 0 -> one STL / LDL pair a tile; not routed), SCHEDULED 512 -> 160, WINDOW
  1564 -> 460 (middle loop 84 -> 2 spill instructions), WINDOW PERSISTENT 2044 -> 768;
  D = 64: plain / PERSISTENT / WINDOW 0 -> 0, CAUSAL 8 -> 0.
  Tried and dropped: tl.where(x >= keep_min, p, 0.0) (LLVM sank the select below the bf16
  truncation: PRMT / SEL / PRMT a pair, CAUSAL 1054 bytes of spills), and an inline select
  alone followed by p.to(dtype) (the truncation moved across the loop's back edge: 32 PRMT
  a tile in the CAUSAL unmasked loop, PERSISTENT 24 bytes of spill, not 16); recomputing the
  in-group keys per tile to free their 32 registers costs ~9 instructions a column (~4.5
  an element), more than any spill it could save.
  Measured (H200, s26/call4 against s26/call1, time against the Gluon forward without
  dropout, D = 128, p = 0.1): plain 4k 1.19-1.22x -> 1.16-1.17x, 16k persistent 1.18-1.22x
  -> 1.16-1.20x; CAUSAL 4k 1.21-1.23x -> 1.24-1.26x, 16k 1.17-1.19x -> 1.29-1.32x. So the
  integer test runs in the unmasked variants only (LEAN_KEEP); offline, the kernels' SASS
  equals the measured one of each form (unmasked: call 4's; CAUSAL / WINDOW: call 1's;
  whole kernels, addresses stripped), and the spill figures "before" above hold for the
  masked variants.

NUM_CONSUMERS = 3 (session 29, 2026-12-01; routed at D = 64 from 2k: launchers.policy.
  GLUON_FWD_CONSUMERS = {64: 3}; 1.09-1.15x the 2-consumer kernel at 2k-16k on the H200,
  bench/gpu/s29_gluon_fwd_3wg_ab.py): the plain PERSISTENT
  kernel with three consumer warpgroups of HALF_M = BLOCK_M / 3 = 64 query rows each (BLOCK_M
  192 at D = 64, CONSUMERS3_CONFIG) instead of two of BLOCK_M / 2. Why (issue 4, D = 64 at
  0.93-0.99x cuDNN): at D = 64 a 64 x 128 tile's softmax (66 MUFU.EX2 a warp) costs what it
  costs at D = 128 while its two wgmmas halve (512 tensor cycles), so the three resources of
  a consumer's step (tensor 512, MUFU 528, issue ~411 cycles an SM sub-partition) are about
  equal and a consumer's step is a chain through them; session 28's profile (D = 64, N = 4k)
  read the tensor pipe 45.8% busy with the two consumers. A third chain in flight is what
  FlashAttention-3 does at head dim 64 (three consumer warpgroups, 192-row blocks).
  Scheduling: the three consumers run free on the same ring, as the 2-consumer PERSISTENT
  kernel's two do (PINGPONG, the turn-ordered issue, exists for one block a CTA only; the
  session 28 profile's barrier stalls are the warpgroup BAR.SYNC that Triton puts before
  each mbarrier wait / arrive, not a turn order). kv_empty and q_free count NUM_CONSUMERS
  arrivals; q_bar expects NUM_CONSUMERS Q slices; nothing else in the barrier protocol
  changes. Registers: 4 warpgroups (512 threads, .maxnreg 128): setmaxnreg 160 for the two
  consumer workers, 24 for the loader, and Triton's allocation gives the default partition
  (consumer 0) 168 (168 + 160 + 160 + 24 = 512 a thread-slot; outside the partitions 256 and
  80 for the parked workers); 0 spills (a D = 64 consumer holds S 64 + O 32 + P 32 registers).
  Shared memory: Q 24 KB + 3 stages x 32 KB = 120 KB.
  Query blocks: n_m = cdiv(Nq, 192) and the launcher only asks Nq % 64 == 0, so the last block
  of a sequence may end inside the block: a consumer whose 64 rows start at or past Nq runs
  _fwd_drain (the waits and arrivals of _fwd_consume, q_bar, k_ready / v_ready / kv_empty a
  tile, q_free, so that every barrier stays within one phase of every consumer; no wgmma, no
  O / lse store: its Q slice, the next sequence's rows or TMA's zero fill past the tensor,
  is never read). Each live consumer's code is _fwd_consume unchanged (the tile loop is the
  same 411 SASS instructions a tile as in the 2-consumer kernel), so a row's output is
  bitwise what the 2-consumer kernel gives it. Plain only (static_assert: no CAUSAL, WINDOW,
  DROPOUT, SCHEDULED, PINGPONG; PERSISTENT). NUM_CONSUMERS = 2 (the default; the launcher
  does not pass it): SASS byte-identical to before (all 56 variants of
  bench/gluon_fwd_compile.py's table, addresses stripped).
  Routed since session 29's H200 A/B (GLUON_FWD_CONSUMERS = {64: 3}: 1.09-1.15x at 2k-16k).

NUM_CONSUMERS = 3 with CAUSAL (session 29, a helper; routed since session 30's H200 A/B,
  launchers.policy.GLUON_FWD_CAUSAL_CONSUMERS = {64: 3}, from 4k: 1.05 / 1.09x the 2-consumer
  kernel at 4k / 16k, bench/gpu/s30_gluon_causal_3wg_ab.py): the CAUSAL
  forward one block a CTA (persistent causal lost in session 24) with three 64-row consumers,
  192-row blocks, D = 64 (CONSUMERS3_CONFIG). Same reason as above: a 64 x 128 tile's softmax
  costs what it costs at D = 128 while its matmuls halve. Grid (cdiv(Nq, 192), B * H), blocks
  heaviest first as the 2-consumer CAUSAL kernel (pid_m reversed; with a partial last block,
  Nq % 192 != 0, that block has fewer live consumers and runs first though its neighbour may
  take longer: accepted, one block in n_m).
  The tile split (_fwd_consume_causal3): with 192-row blocks and 128-key tiles the three
  consumers of a block do not need the same tiles (Nq = Nk: block 2q needs 3q + 1, 3q + 1,
  3q + 2, block 2q + 1 3q + 2, 3q + 3, 3q + 3). The loader still loads the union, n_load
  (_tile_coords, the block's last row; unchanged), but each consumer computes only its own
  n_own tiles (cdiv of its last row's reach, >= 1) with _fwd_consume unchanged (peel masked,
  [1, n_full) unmasked, [n_full, n_own) masked: at most one masked tile besides the peel when
  Nk - Nq is a multiple of 64, which the launcher's contract makes it) and then drains the
  others (_fwd_skip_tiles: k_ready / v_ready waits and the kv_empty arrival a tile, no
  wgmma). Masking them to p = 0 as the 2-consumer kernel does would compute 3 wasted tiles
  every 2 blocks (6% of the work at N = 2k). Barrier protocol: every loaded ring tile still
  gets NUM_CONSUMERS = 3 kv_empty arrivals, each consumer's arrivals in ring order, each
  after the tile's k_ready wait (so never counted toward the stage's previous phase;
  _fwd_skip_tiles' doc), so the loader and the phases are those of the 2-consumer kernel.
  Consumers past the sequence's end (1 / 2 of a sequence's last block when Nq % 192 != 0)
  drain all n_load tiles and store nothing. Rows that see no key (Nq > Nk) behave as in the
  2-consumer kernel (n_own = 1: the peeled tile fully masked, O = 0, lse = +inf). For a
  64-row group the (tiles, unmasked tiles) are those it gets in the 2-consumer kernel when
  Nq is a multiple of 128 (tests/test_fwd_gluon_causal_3wg.py checks the kernel's own lines),
  so the outputs should be bitwise equal.
  Offline (bench/gluon_fwd_compile.py, sm_90a): 16 warps, .maxnreg 128, setmaxnreg 168 /
  160 / 160 / 24 (as the plain 3-consumer kernel), 120 KB shared memory (3 stages; 4: 152),
  108 HGMMA, 5 UTMALDG, 3 UTMASTG. SPILLS: 160 bytes (4 stages: 248), none in the unmasked
  tile loops (451 / 451 / 447 instructions a tile against the 2-consumer causal kernel's
  449 / 448), 6 STL + 6 LDL in consumers 0 / 1's masked loop (717 instructions against 672;
  one tile a block) and 2 + 2 in consumer 2's (728), 12 more once a block (the peel,
  epilogue). At 160 registers the masked step is a few registers short (the unmasked one
  fits, as in the plain kernel). Tried offline, no better: setmaxnreg 152 for the workers
  (default 184): 240 bytes; 168 (default 152): 128 bytes but no DEPBAR.LE 1 left (ptxas
  serialised the wgmmas); waiting for the P V wgmma before the masked softmax (frees P's
  32 registers there): 192 bytes. NUM_CONSUMERS = 2 and the plain 3-consumer kernel: SASS
  byte-identical to before (all 61 variants of the table, addresses stripped; _fwd_load's
  new NUM_CONSUMERS parameter folds to the same expect count).

LEAN_MASK (a session-30 helper; routed with EARLY_Q for D = 128 windows from 4k in session 31,
  +5.4% at 16k: launchers.policy.GLUON_FWD_WINDOW_LEAN_MASK; bench/gpu/s31_window_lean_mask_ab.py;
  bench/wip/gluon-window-lean-mask.md): the WINDOW consumers' masked steps with a cheaper mask
  (_softmax_step_lean), issue 3. Why: a window block at (1024, 0) runs 2 masked steps of 9
  (the peel, which is the left edge there, and the diagonal tile) against CAUSAL's 2 of ~64,
  and a masked step cost ~330 SASS instructions a warp more than an unmasked one (820 / 852
  against 522): per score an FMUL (the scale before the mask; kept, it is what makes the
  masked tiles' rounding), 2 ISETP and 2 FSEL, as LLVM turned where(a & b, x, -inf) into two
  nested selects. Now: both edges as one predicate and one select (_window_select's inline
  PTX: setp, setp.and, selp; the left-edge loop, and the peel in general), the right edge
  alone in the right-edge loop (its tiles lie at or past n_left, so no row's left bound cuts
  them), the left edge alone in the peel when every row of the half sees the tile's last key
  (diag >= BLOCK_N - 1, a warp-uniform runtime branch: every block but each sequence's first
  at (1024, 0); one block a CTA only, the PERSISTENT kernels spilled 88-92 bytes with it).
  The kept scores, the max, m_use and the exponent arithmetic are _softmax_step_masked's, so
  the outputs are bitwise the kernel's without it (tests/test_fwd_gluon_window_lean_mask.py).
  Offline (D = 128 bf16, one block a CTA): tile loops 756 / 522 / 718 against 820 / 522 /
  852, the peel -62 / -126 a warp, 0 spills; 2-consumer WINDOW at D = 128 only (static_assert:
  no DROPOUT, not 3 consumers; D = 64 spilled 8 bytes, one register once a block, and D = 64
  windows are not routed here), one block, PERSISTENT, EARLY_Q, PINGPONG. Without it every
  variant's SASS is byte-identical (all 71 of bench/gluon_fwd_compile.py's table).

O_STAGE (session 42, 2026-12-03; routed by launchers.policy.GLUON_FWD_O_STAGE after bench/gpu/s42_o_stage_ab.py:
  D = 128 plain 1k-4k, causal 1k-8k with the host's deal (SCHEDULED), windows from 4k with it too, instead of EARLY_Q).
  The PERSISTENT kernel's block boundary. Without it O leaves through Q's buffer, so the loader can land the next
  block's Q only after both consumers' TMA stores: the TIMELINE stamps (below) measured the consumers waiting 1.2 us
  a block for Q (median, D = 128 causal 2k, blocks of 1-16 tiles of ~1.6 us); EARLY_Q (O by 34 STG a thread from
  registers) cut that to 0.9 us but doubled the block-to-block gap (0.35 -> 0.83 us). A second Q buffer needs 2
  ring stages (Q 2 x 32 KB + 2 x 64 KB), measured 18-24% slower (bench/gpu/s42_stages_ab.py). O_STAGE instead: each
  consumer arrives on q_free right after its tile loops, before the last P V (its last read of Q was the last
  tile's S); the loader issues the next block's first NUM_STAGES - 1 K / V tiles (their stages were freed by P Vs
  inside the loops), then Q as soon as q_free's phase completes, then the rest; the epilogue waits q_free's phase
  itself (both consumers' last S read all of the last tile's K: BLOCK_N = BLOCK_M rows, one half a consumer), stores
  O into its half of that K buffer (the same 128-byte swizzle as the Q / O boxes), TMA-stores it, waits, and only
  then arrives on the stage's kv_empty (the third of the next block's tiles waits for that). Barrier arithmetic:
  q_free still completes one phase a block (two arrivals), the consumers' wait uses q_bar's parity of the block;
  every ring tile still gets its two kv_empty arrivals, the last one later. Measured: Q wait 1.2 -> 0.06 us
  (median), gap 0.38 us; outputs bitwise the kernels' without it (tests/test_fwd_gluon_o_stage.py). Offline: 0
  spills, 224 KB, 2 UTMASTG; without it all 98 variants of bench/gluon_fwd_compile.py's table byte-identical.
  PERSISTENT, 2 consumers, BLOCK_N == BLOCK_M (not D = 256), not with EARLY_Q, SPLIT_EMPTY or DROPOUT (never
  measured with it; static_assert).

TIMELINE (a probe, sessions 41-42; bench/gpu/s41_timeline_probe.py, s42_timeline_probe.py): consumer warpgroup 0
  writes %globaltimer at its block's start, Q arrived, K_0 arrived, the peel's S, before the last P V and after the
  O store, and %smid, into an int64 (blocks, 8) buffer passed as SCHED (_launch_into(timeline=buf); one block a
  CTA: row = the CTA, PERSISTENT: row = pid_bh * n_m + pid_m; not with SCHEDULED). Outputs bitwise unchanged;
  compiled away when off.

D256 (a session-31 helper, 2026-12-02; routed in session 32: launchers.policy.GLUON_FWD_MIN_N[256]
  1k, GLUON_FWD_CAUSAL_MIN_N[256] 2k (both 512 since session 33), measured 1.06-1.07x cuDNN plain, 1.01-1.11x causal, by
  bench/gpu/s32_gluon_fwd_d256_ab.py; SPLIT_EMPTY +43-50% over the joint release; write-up
  bench/wip/gluon-fwd-d256.md). Issue 4: the D = 256 forward ran fwd_ws.py / fwd.py at 0.85-0.93x
  cuDNN. The kernel needed no new code path for it: HEAD_DIM = 256 with DEFAULT_CONFIG[256] =
  (BLOCK_M 128, BLOCK_N 64, 2 stages) compiles the plain / CAUSAL, one block a CTA / PERSISTENT
  kernels as they are (2 consumers x 64 rows, loader warp, setmaxnreg 240 / 240 / 24): a
  consumer holds O 64 x 256 fp32 (128 registers), S 64 x 64 (32), P as the A operand (16); 0
  spills. Shared memory: Q 128 x 256 (64 KB) + 2 stages x (K + V) 64 x 256 (4 x 32 KB) = 192 KB;
  O leaves through Q's buffer as at D = 128. The shape is forced: 3 stages need 256 KB, BLOCK_N
  128 needs 320 KB at 2 stages and S 64 + P 32 + O 128 registers, BLOCK_N 80 / 96 (FA3 uses 80)
  are not powers of 2 (Gluon tensors must be), BLOCK_N 32 x 4 stages (also 192 KB) compiles
  (328 / 323 instructions a half-size tile: 1.6x the issue a key) and reads 192 B of shared
  memory a tensor cycle in S (m64n32k16, both operands in shared memory), above the SM's 128.
  SPLIT_EMPTY (the one new piece; kernel flag, default False; the launcher passes it at the head
  dims of SPLIT_EMPTY_DEFAULT = {256}): with 2 stages, releasing K_{j-1} and V_{j-1} together
  after P V_{j-1} (in tile j's step) means K_{j+1}, loaded into that stage, lands only after the
  step that needs it has begun: the load is exposed once a tile. With SPLIT_EMPTY kv_empty has
  2 x NUM_STAGES barriers (the partitions read the split from its shape, so no argument tuple
  changes): kv_empty[s] K's stage s, arrived on by each consumer as soon as the S wgmma of the
  tile in it retired (the peel's, or the warpgroup_mma_wait(1) of _consume_tile), and
  kv_empty[NUM_STAGES + s] V's, arrived on after the tile's P V (as kv_empty[s] before). The
  loaders wait K's barrier before K's TMA and V's before V's, at the same parities (g //
  NUM_STAGES) & 1 ^ 1. Every ring tile still gets NUM_CONSUMERS arrivals on each of its two
  barriers, each after that consumer's k_ready wait for the tile (so never toward the stage's
  previous phase), in ring order; the phases still follow from the ring index alone.
  2 consumers only (static_assert: _fwd_drain / _fwd_skip_tiles of the 3-consumer kernels
  arrive on one barrier a tile). The loader is one thread in ring order (K_g, V_g, K_{g+1}, ...),
  so a K load may wait behind the previous V's release: still about a tile of slack for each load
  instead of none. D = 256 restrictions (static_assert, launchers/forward_gluon.py
  check_head_dim): no WINDOW, DROPOUT, EARLY_Q, LEAN_MASK, 3 consumers (not compiled / the
  registers: the 128 in-group dropout keys would not fit; SCHEDULED is refused by the launcher).
  Offline (bench/gluon_fwd_compile.py, the D = 256 rows; sm_90a): 12 warps, setmaxnreg 240 /
  240 / 24, 0 spills and no local memory in every D = 256 variant (bf16 / fp16, plain / CAUSAL,
  one block / PERSISTENT, negative scale, PINGPONG, with and without SPLIT_EMPTY), 192 KB + 288 B
  shared memory, HGMMA 80 (plain: 40 a consumer, the peel's S 16, a tile's S 16 + P V 4, the last
  P V 4) / 120 (CAUSAL), no HMMA, 16 UTMALDG (4 TMA messages a 64 x 256 box: 128-byte swizzle),
  DEPBAR.LE 1 in every tile loop; tile loops plain 415 / 413 SASS instructions a warp (406 / 404
  without SPLIT_EMPTY: the K arrival and its warpgroup barrier), 130 FMUL (the O rescale: 128),
  34 MUFU. The estimate that makes the A/B's prediction: a CTA tile (128 x 64 keys) is 2048
  tensor cycles as a D = 128 tile (128 x 128) is, with half the exponentials, but its S wgmma
  (m64n64k16, both operands in shared memory) reads 4 KB a 32-cycle step, the SM's 128 B / cycle,
  and the tile's shared-memory traffic is 256 KB against D = 128's 224 KB. The other variants'
  SASS: byte-identical to before (all 77 of the table before these rows, addresses stripped;
  bench/gluon_fwd_sass_hash.py).

Compiler facts found (Triton 3.6.0, offline sm_90a compile, bench/gluon_fwd_compile.py,
2026-12-01):
  - gl.warp_specialize(functions_and_args, worker_num_warps, worker_num_regs): the first
    entry is the default partition and runs on the kernel's num_warps (4 here: consumer
    0); the workers run on additional warps (consumer 1: 4, loader: 1), padded to whole
    warpgroups: 12 warps, .reqntid 384, .maxnreg 168. The register counts become
    setmaxnreg: in the partitions the default and the consumer worker run at 240 and the
    loader's warpgroup at 24 (2 x 240 + 24 = 504 <= 512 a thread-slot); outside them the
    default warpgroup runs at 256 and idle workers park at 24 / 120. ptxas: 0 spills.
    Asking less than 240 for the worker (168-216) gave 384 bytes of spills.
  - constexprs pass through warp_specialize's argument tuples (they flatten to nothing),
    but a plain int literal in such a tuple does not (AttributeError: 'int' object has
    no attribute '_flatten_ir'): name it as a gl.constexpr first.
  - warpgroup_mma(..., is_async=True) returns a token; warpgroup_mma_wait(n, deps=[...])
    turns it back into a tensor. The loop carries only plain tensors (each iteration
    waits for both of its groups). SASS: HGMMA (S), HGMMA with the register A operand
    (P V), WARPGROUP.DEPBAR.LE gsb0, 0x1, the softmax, DEPBAR.LE 0x0; no ptxas
    "wgmma serialized" advisory. P's conversion from the S accumulator layout to the
    A-operand layout and alpha's / l's from S rows to O rows stay in registers (no
    shared-memory round trip in the loop).
  - Triton adds a bar.sync of the warpgroup before each mbarrier wait / arrive in a
    4-warp partition; arrive is issued by one thread, so kv_empty counts 2 (one per
    consumer warpgroup).
  - A host TensorDescriptor's kernel type string is
    "tensordesc<bf16[64, 128],NVMMASharedLayout(...)>" (the layout's repr); the JIT
    path with such descriptors compiles the same kernel (checked with a stub driver).
  - A (64 or 128) x 128 bf16 box with 128-byte swizzle is issued as two TMA messages
    (64 columns each): 8 UTMALDG per program at D = 128 (2 Q halves, K, V).
  - CAUSAL (same report): 0 spills at D = 128 (3 stages, 224 KB) and D = 64 (3 stages,
    112 KB; 4 stages 144 KB), the same setmaxnreg split; 96 wgmma in the PTX at D = 128
    (64 without the mask loop), WARPGROUP.DEPBAR.LE gsb0, 0x1 in both loops of both
    consumers. A consumer's tile step (_consume_tile) is a separate gluon.jit function
    called from both loops: inlined, and the non-causal SASS came out identical.
  - WINDOW (same report, session 25): 0 spills, the same setmaxnreg split, 224 KB at
    D = 128 (112 KB at D = 64), one block a CTA and PERSISTENT, bf16 and fp16; 128 wgmma
    in the PTX at D = 128 (the third loop), WARPGROUP.DEPBAR.LE gsb0, 0x1 in all three
    loops of both consumers (6). `if CAUSAL or WINDOW:` on constexprs folds at compile
    time; a variable bound to a constexpr in one constexpr-if branch and to a tensor in
    the other (wl / wr / wspan, n_left) is fine, the untaken branch is never generated.
  - A @triton.jit function called from a gluon.jit one compiles (session 26: the library's
    dropout hashes, tl.* elementwise ops, x[:, None] on slice-layout tensors). Index
    tensors are made by the Gluon caller (gl.arange with the S tile's slice layouts) and
    passed in: Gluon's arange needs a layout, tl.arange has none.
  - (session 29) An argument tuple bound to a name first and passed to warp_specialize
    (cons0 = (...); gl.warp_specialize([(f, cons0), ...])) loses its constexprs' constness:
    `if SCHEDULED:` in the partition became a runtime branch ("Mismatched type for hi
    between then block (fp32) and else block (int32)"). The tuples are spelled out inline.
    Four partitions (3 consumers + the loader, worker_num_warps [4, 4, 1], worker_num_regs
    [160, 160, 24]) compile: 16 warps, .reqntid 512, setmaxnreg 168 for the default
    partition inside, 256 / 80 outside.
  - (session 30) tl.where((c <= hi) & (c >= lo), x, -inf) on a wgmma accumulator compiles to
    2 ISETP + 2 FSEL a score (LLVM's select(and) becomes nested selects; ptxas does not
    merge them); the same predicate in inline PTX (setp, setp.and, selp) gives 2 ISETP (the
    second with the first's predicate ANDed in) + 1 FSEL. A form through a per-score index
    difference, (r - c).to(uint32) <= span, was worse (950 instructions against 820: the
    2-D int tensor came out as IMAD / LOP3 / SEL / SHF sequences).
  - Gluon kernels do not run under TRITON_INTERPRET: gluon.jit always makes a
    GluonJITFunction, and a launch looks for a GPU driver ("RuntimeError: 0 active
    drivers ([]). There should only be one.").
"""
from __future__ import annotations

import triton
import triton.language as tl
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, tma, warpgroup_mma,
                                                               warpgroup_mma_wait)

from .common import (DROPOUT_GROUP, dropout_col_seeds, dropout_group_key, dropout_group_mult, dropout_in_group_key,
                     dropout_keep_scale, dropout_row_key, dropout_threshold, find_sequence)


LN2: gl.constexpr = gl.constexpr(0.6931471805599453)
ZERO: gl.constexpr = gl.constexpr(0)   # the window arguments of a kernel without WINDOW (never read)
ONE: gl.constexpr = gl.constexpr(1)    # n_left (the peeled tile only) of a kernel without WINDOW
NO: gl.constexpr = gl.constexpr(False)  # a False flag in a warp_specialize argument tuple (EARLY_Q off)
# LEAN_MASK's mask forms (_softmax_step_lean's SIDES): both window edges, the right / left one alone
BOTH: gl.constexpr = gl.constexpr(0)
RIGHT: gl.constexpr = gl.constexpr(1)
LEFT: gl.constexpr = gl.constexpr(2)

# (BLOCK_M, BLOCK_N, NUM_STAGES) per head dim: K and V stages of BLOCK_N x D each plus
# the 128 x D Q tile must fit in 227 KB of shared memory. D = 128: 3 stages (224 KB),
# H200, 2026-12-01, 16k tokens, H = 16, bf16, non-causal, kernel-only TFLOP/s two rounds
# (bench/gpu/s23_gluon_fwd_ab.py, s23/call6): 2 stages 520-523 / 540-546 / 543-547 at
# N = 4k / 8k / 16k, 3 stages 565-575 / 581-586 / 571-613, BLOCK_N 64 with 4 stages
# 530-546 / 548-558 / 568-573, PINGPONG level with 2 stages (fwd_ws.py 540-553). D = 64:
# untimed; 3 stages take 112 KB, 4 144 KB, 6 208 KB (a D = 64 tile is half the compute,
# so more stages may be needed to hide the loads: bench/gpu/s23_gluon_causal_ab.py times
# 3 against 4 and 6). The causal variant uses the same table.
DEFAULT_CONFIG = {64: (128, 128, 3), 128: (128, 128, 3), 256: (128, 64, 2)}
# D = 256 (a session-31 helper; routed in session 32): BLOCK_N 64 and 2 stages are what fits: Q
# 128 x 256 bf16 = 64 KB, a K or V stage 64 x 256 = 32 KB, so 64 + 2 x 2 x 32 = 192 KB (3 stages:
# 256 KB; BLOCK_N 128 needs 320 KB with 2 stages and ~290 registers a thread; 80 / 96 are not
# powers of 2, which Gluon's tensors must be). Offline: 0 spills, tile loops 415 / 413 SASS
# instructions (the D256 section of the docstring).
# Head dims whose kernel has the plain and CAUSAL forwards only (the static_assert in
# attn_fwd_gluon_kernel; launchers/forward_gluon.py check_head_dim)
PLAIN_CAUSAL_ONLY = frozenset({256})
# Head dims at which the launcher runs SPLIT_EMPTY by default (K's and V's stages released
# apart: with 2 stages a tile's K stage frees as soon as its S retired, so the next K load has
# ~a tile of slack instead of none; the D256 section). Measured (bench/gpu/s32_gluon_fwd_d256_ab.py,
# s32/callA): without it the D = 256 kernel ran at 0.67-0.76x, outputs bitwise equal
SPLIT_EMPTY_DEFAULT = frozenset({256})
CONSUMER_REGS: gl.constexpr = gl.constexpr(240)  # consumer worker's setmaxnreg (the default partition gets 240 too)
LOADER_REGS: gl.constexpr = gl.constexpr(24)     # setmaxnreg's minimum
# NUM_CONSUMERS = 3 (session 29, offline): 4 warpgroups (512 threads, 65536 / 512 = 128
# registers a thread on average); the two consumer workers at 160, the loader at 24; the
# default partition (consumer 0) gets what Triton's allocation leaves it: 168 (168 + 2 x 160
# + 24 = 512; the compile report's setmaxnreg column). 0 spills at D = 64.
CONSUMER_REGS_3: gl.constexpr = gl.constexpr(160)
# (BLOCK_M, BLOCK_N, NUM_STAGES) of the NUM_CONSUMERS = 3 variants (plain PERSISTENT and CAUSAL
# one block a CTA): 64 query rows a consumer, 192 a CTA; shared memory Q 24 KB + 3 stages x
# 32 KB = 120 KB at D = 64.
CONSUMERS3_CONFIG = {64: (192, 128, 3)}
LOADER_WARPS: gl.constexpr = gl.constexpr(1)


# ---------------------------------------------------------------------------------------
# Partitions
# ---------------------------------------------------------------------------------------
@gluon.jit
def _fwd_load(q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_bar, k_ready, v_ready, kv_empty,
              q_row, q_col, kv_row, kv_col, n_tiles,
              HALF_M: gl.constexpr, BLOCK_N: gl.constexpr, NUM_STAGES: gl.constexpr, NUM_CONSUMERS: gl.constexpr,
              BT=0, PAGE: gl.constexpr = 0, key0=0):
    # PAGE (VARLEN_PAGED, session 51): the block's K / V tile j, the sequence's keys key = key0 + j * BLOCK_N on (key0:
    # the block's first loaded key, t_lo * BLOCK_N with WINDOW), from its page: row BT[key // PAGE] * PAGE + key %
    # PAGE of the caches' (blocks * PAGE, Hk * D) views (BT: the sequence's block-table row; PAGE a multiple of
    # BLOCK_N, so a tile never straddles pages); the entry read before the stage's wait
    # Q: the consumers' slices (two halves; NUM_CONSUMERS = 3, CAUSAL: three 64-row thirds, a
    # third past the sequence's end reading the next sequence's rows or TMA's zero fill, never
    # read: its consumer only drains), one barrier for all
    mbarrier.expect(q_bar, NUM_CONSUMERS * q_desc.block_type.nbytes)
    tma.async_copy_global_to_shared(q_desc, [q_row, q_col], q_bar, q_smem.index(0))
    tma.async_copy_global_to_shared(q_desc, [q_row + HALF_M, q_col], q_bar, q_smem.index(1))
    if NUM_CONSUMERS == 3:
        tma.async_copy_global_to_shared(q_desc, [q_row + 2 * HALF_M, q_col], q_bar, q_smem.index(2))
    for j in range(n_tiles):
        stage = j % NUM_STAGES
        phase = (j // NUM_STAGES) & 1
        if PAGE:
            page_row = gl.load(BT + (key0 + j * BLOCK_N) // PAGE) * PAGE + (key0 + j * BLOCK_N) % PAGE
        # both consumers released this stage's previous tile (a fresh barrier passes parity 1)
        mbarrier.wait(kv_empty.index(stage), phase ^ 1)
        if PAGE:
            offs_n = page_row
        else:
            offs_n = kv_row + j * BLOCK_N
        mbarrier.expect(k_ready.index(stage), k_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(k_desc, [offs_n, kv_col], k_ready.index(stage), k_smem.index(stage))
        if kv_empty.shape[0] == 2 * NUM_STAGES:
            # SPLIT_EMPTY: kv_empty[stage] was K's alone; V's stage has its own barrier
            mbarrier.wait(kv_empty.index(NUM_STAGES + stage), phase ^ 1)
        mbarrier.expect(v_ready.index(stage), v_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(v_desc, [offs_n, kv_col], v_ready.index(stage), v_smem.index(stage))


@gluon.jit
def _tile_of(tile, n_m, n_bh, band, CAUSAL: gl.constexpr):
    """PERSISTENT: tile (0 .. n_m * n_bh) -> (pid_m, pid_bh). Non-causal: query block fastest
    (one head's blocks, which share K / V in L2, run side by side). CAUSAL: the batch x heads
    go in bands of `band` (the launcher sizes a band's K / V to half the L2); inside a band
    the heaviest query blocks (the last, n_m - 1, of each of its heads) first, then the next
    heaviest, so the static round-robin deal (tile = pid + i * num_programs) gives every CTA
    a like mix of heavy and light blocks while the CTAs running together read one band's
    K / V. (Session 24's first form, heaviest first across all B * H at once, was 3-16%
    slower than one CTA a block: the CTAs of a wave read every head's K / V, from DRAM.)"""
    if CAUSAL:
        span = n_m * band                        # tiles of a full band
        first = (tile // span) * band            # the band's first batch x head
        width = gl.minimum(band, n_bh - first)   # its heads (the last band may be narrower)
        r = tile - (tile // span) * span
        pid_m = n_m - 1 - r // width
        pid_bh = first + r % width
    else:
        pid_m = tile % n_m
        pid_bh = tile // n_m
    return pid_m, pid_bh


@gluon.jit
def _block_range(SCHED, pid, n_m, n_bh, n_prog, SCHEDULED: gl.constexpr):
    """PERSISTENT: the range (lo, hi, step) of this CTA's blocks: SCHEDULED, entries lo .. hi
    of the host's schedule (SCHED[pid], SCHED[pid + 1]: launchers/schedule.py); else the
    round-robin deal pid, pid + n_prog, ... of the n_m * n_bh blocks themselves."""
    if SCHEDULED:
        lo = gl.load(SCHED + pid)
        hi = gl.load(SCHED + pid + 1)
        step = 1
    else:
        lo = pid
        hi = n_m * n_bh
        step = n_prog
    return lo, hi, step


@gluon.jit
def _block_of(SCHED, i, n_m, n_bh, band, n_prog, CAUSAL: gl.constexpr, SCHEDULED: gl.constexpr):
    """PERSISTENT: (pid_m, pid_bh) of this CTA's block i (_block_range). SCHEDULED: the
    schedule's entry SCHED[n_prog + 1 + i] = pid_bh * n_m + pid_m, the host's longest-first
    deal (launchers/schedule.py); else _tile_of's fixed order."""
    if SCHEDULED:
        tile = gl.load(SCHED + n_prog + 1 + i)
        pid_m = tile % n_m
        pid_bh = tile // n_m
    else:
        pid_m, pid_bh = _tile_of(i, n_m, n_bh, band, CAUSAL)
    return pid_m, pid_bh


@gluon.jit
def _tile_coords(pid_m, pid_bh, seqlen_q, seqlen_k, nheads, group, win_left, win_right, HEAD_DIM: gl.constexpr,
                 BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, CAUSAL: gl.constexpr, WINDOW: gl.constexpr):
    """One (query block, batch x head) tile's bookkeeping: (q_row, q_col, kv_row, kv_col,
    n_load, n_left0, n_left1, n_full0, n_full1, diag, lse_off); rows / columns index the
    (B * N, heads * D) descriptor views. Per warpgroup w the block's n_load tiles split
    into [0, n_left_w) masked (tile 0 and, WINDOW, the window's left edge), [n_left_w,
    n_full_w) unmasked, [n_full_w, n_load) masked (the right edge / diagonal);
    1 <= n_left_w <= n_full_w <= n_load always (the consumers' loops rely on it).
    WINDOW: the block's tiles start at key tile t_lo (kv_row includes t_lo * BLOCK_N, and
    diag is relative to that tile's first key); win_left / win_right >= 0 (the launcher
    passes Nq + Nk for an unbounded side). Without WINDOW n_left_w is the constexpr 1.
    key0: the key index (within the sequence) of the block's first loaded tile, t_lo *
    BLOCK_N (WINDOW), the constexpr 0 otherwise: DROPOUT's column keys."""
    HALF_M: gl.constexpr = BLOCK_M // 2
    off_b = pid_bh // nheads
    off_h = pid_bh % nheads
    q_row = off_b * seqlen_q + pid_m * BLOCK_M
    q_col = off_h * HEAD_DIM
    kv_row = off_b * seqlen_k
    kv_col = (off_h // group) * HEAD_DIM
    n_tiles = seqlen_k // BLOCK_N
    # bottom-right causal: query row i sees key c iff c <= i + Nk - Nq; diag is that bound
    # for the block's first row
    diag = pid_m * BLOCK_M + seqlen_k - seqlen_q
    n_left0 = ONE
    n_left1 = ONE
    key0 = ZERO
    if CAUSAL:
        # tiles the block's last row (diag + BLOCK_M - 1) reaches: what the loader loads for
        # both warpgroups; at least 1 (a block none of whose rows sees a key, Nq > Nk, loads
        # tile 0 and masks it all: O = 0, lse = +inf)
        n_load = gl.minimum(gl.maximum(gl.cdiv(gl.maximum(diag + BLOCK_M, 0), BLOCK_N), 1), n_tiles)
        # per warpgroup, the tiles fully visible to its first (so to all its) rows, >= 1:
        # tile 0 is peeled and masked anyway
        n_full0 = gl.minimum(gl.maximum(gl.maximum(diag + 1, 0) // BLOCK_N, 1), n_load)
        n_full1 = gl.minimum(gl.maximum(gl.maximum(diag + HALF_M + 1, 0) // BLOCK_N, 1), n_load)
    elif WINDOW:
        # query row i (of the Nq) sees key c iff diag_i - win_left <= c <= diag_i + win_right,
        # diag_i = i + Nk - Nq. The block's rows see keys [lo, hi + BLOCK_M - 1] with lo / hi
        # the bounds of its first row; its tiles are [t_lo, t_hi) of the Nk / BLOCK_N.
        # lo <= Nk - 1 - (BLOCK_M - 1) - win_left < Nk, so t_lo <= n_tiles - 1 (clamped anyway);
        # hi + BLOCK_M - 1 >= lo, so t_hi > t_lo whenever the last row sees a key. A block
        # none of whose rows sees a key (hi + BLOCK_M - 1 < 0: Nq > Nk + win_right) loads
        # tile 0 (t_lo = 0, n_load = 1) and masks it all: O = 0, lse = +inf, as CAUSAL.
        lo = diag - win_left
        hi = diag + win_right
        t_lo = gl.minimum(gl.maximum(lo, 0) // BLOCK_N, n_tiles - 1)
        t_hi = gl.minimum(gl.cdiv(gl.maximum(hi + BLOCK_M, 0), BLOCK_N), n_tiles)
        n_load = gl.maximum(t_hi - t_lo, 1)
        kv_row = kv_row + t_lo * BLOCK_N         # the loader's tile j is key tile t_lo + j
        key0 = t_lo * BLOCK_N
        diag = hi - t_lo * BLOCK_N               # first row's last visible key, from tile t_lo's first
        # per warpgroup (rows w * HALF_M .. + HALF_M - 1 of the block): a tile is fully
        # visible to all its rows iff its first key >= the last row's lower bound and its
        # last key <= the first row's upper bound. n_left: tiles before the first such
        # (>= 1: tile 0 is peeled and masked), n_full: tiles before the first one crossing
        # the upper bound (>= n_left); both relative to t_lo, clamped to [.., n_load]
        n_left0 = gl.minimum(gl.maximum(gl.cdiv(gl.maximum(lo + HALF_M - 1, 0), BLOCK_N) - t_lo, 1), n_load)
        n_left1 = gl.minimum(gl.maximum(gl.cdiv(gl.maximum(lo + BLOCK_M - 1, 0), BLOCK_N) - t_lo, 1), n_load)
        n_full0 = gl.minimum(gl.maximum(gl.maximum(hi + 1, 0) // BLOCK_N - t_lo, n_left0), n_load)
        n_full1 = gl.minimum(gl.maximum(gl.maximum(hi + HALF_M + 1, 0) // BLOCK_N - t_lo, n_left1), n_load)
    else:
        n_load = n_tiles
        n_full0 = n_tiles
        n_full1 = n_tiles
    lse_off = pid_bh.to(gl.int64) * seqlen_q + pid_m * BLOCK_M
    return q_row, q_col, kv_row, kv_col, n_load, n_left0, n_left1, n_full0, n_full1, diag, lse_off, key0


@gluon.jit
def _tile_coords_varlen(SCHED, slot, batch, h, total_q, group, HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr,
                        BLOCK_N: gl.constexpr, CAUSAL: gl.constexpr, win_left=0, WINDOW: gl.constexpr = False):
    """VARLEN (session 49): _tile_coords of a packed batch's slot (a query block of one
    sequence; slot < SCHED[batch], the blocks of all sequences). SCHED packs the host's int32
    tables (launchers/forward_gluon.fwd_varlen): [0, B] the cumulative query-block counts
    (fwd.py's CU_BLOCKS), [B + 1, 2B + 1] cu_seqlens_q, [2B + 2, 3B + 2] cu_seqlens_k. Rows and
    columns index the (total, heads * D) views. The sequence's key tiles are cdiv(Nk_b,
    BLOCK_N) (>= 1: a sequence without keys loads one tile and masks it all); rows past the
    sequence's keys are the next sequence's (or TMA's zeros) and are masked: CAUSAL by the
    diagonal itself (a row i < Nq_b sees keys up to i + Nk_b - Nq_b <= Nk_b - 1), else by
    KEY_BOUND (diag = Nk_b - 1 for every row, n_full the whole tiles). CAUSAL: the sequence's
    blocks heaviest first (the slot's block reversed, as fwd.py). Returns _tile_coords' tuple
    and row_lim, the rows of the block inside the sequence.
    WINDOW (session 51): a sliding window (win_left, 0) per sequence (right edge 0 only, the launcher's rule: a
    row's band then ends at its diagonal, i + Nk_b - Nq_b <= Nk_b - 1, so no row of the sequence sees a key past
    it and no key bound is needed; rows past the sequence's end may, but they are never stored). _tile_coords'
    WINDOW split on the sequence's cdiv(Nk_b, BLOCK_N) tiles: the block's tiles [t_lo, t_hi), n_left / n_full per
    warpgroup, diag from tile t_lo's first key, key0 = t_lo * BLOCK_N (the loader's kv_row includes it)."""
    HALF_M: gl.constexpr = BLOCK_M // 2
    b = find_sequence(SCHED, slot, batch)
    blk0 = gl.load(SCHED + b)
    q_start = gl.load(SCHED + batch + 1 + b)
    seqlen_q = gl.load(SCHED + batch + 2 + b) - q_start
    k_start = gl.load(SCHED + 2 * batch + 2 + b)
    seqlen_k = gl.load(SCHED + 2 * batch + 3 + b) - k_start
    block = slot - blk0
    if CAUSAL:
        block = gl.load(SCHED + b + 1) - blk0 - 1 - block
    q_row = q_start + block * BLOCK_M
    q_col = h * HEAD_DIM
    kv_row = k_start
    kv_col = (h // group) * HEAD_DIM
    n_tiles = gl.maximum(gl.cdiv(seqlen_k, BLOCK_N), 1)
    n_left0 = ONE
    n_left1 = ONE
    key0 = ZERO
    if CAUSAL:
        diag = block * BLOCK_M + seqlen_k - seqlen_q
        n_load = gl.minimum(gl.maximum(gl.cdiv(gl.maximum(diag + BLOCK_M, 0), BLOCK_N), 1), n_tiles)
        n_full0 = gl.minimum(gl.maximum(gl.maximum(diag + 1, 0) // BLOCK_N, 1), n_load)
        n_full1 = gl.minimum(gl.maximum(gl.maximum(diag + HALF_M + 1, 0) // BLOCK_N, 1), n_load)
    elif WINDOW:
        # _tile_coords' WINDOW with win_right = 0 (hi = diag)
        diag = block * BLOCK_M + seqlen_k - seqlen_q
        lo = diag - win_left
        t_lo = gl.minimum(gl.maximum(lo, 0) // BLOCK_N, n_tiles - 1)
        t_hi = gl.minimum(gl.cdiv(gl.maximum(diag + BLOCK_M, 0), BLOCK_N), n_tiles)
        n_load = gl.maximum(t_hi - t_lo, 1)
        kv_row = kv_row + t_lo * BLOCK_N
        n_left0 = gl.minimum(gl.maximum(gl.cdiv(gl.maximum(lo + HALF_M - 1, 0), BLOCK_N) - t_lo, 1), n_load)
        n_left1 = gl.minimum(gl.maximum(gl.cdiv(gl.maximum(lo + BLOCK_M - 1, 0), BLOCK_N) - t_lo, 1), n_load)
        n_full0 = gl.minimum(gl.maximum(gl.maximum(diag + 1, 0) // BLOCK_N - t_lo, n_left0), n_load)
        n_full1 = gl.minimum(gl.maximum(gl.maximum(diag + HALF_M + 1, 0) // BLOCK_N - t_lo, n_left1), n_load)
        diag = diag - t_lo * BLOCK_N
        key0 = t_lo * BLOCK_N
    else:
        diag = seqlen_k - 1
        n_load = n_tiles
        n_full0 = gl.minimum(gl.maximum(seqlen_k // BLOCK_N, 1), n_load)
        n_full1 = n_full0
    lse_off = h.to(gl.int64) * total_q + q_row
    row_lim = seqlen_q - block * BLOCK_M
    return q_row, q_col, kv_row, kv_col, n_load, n_left0, n_left1, n_full0, n_full1, diag, lse_off, key0, row_lim


@gluon.jit
def _load_kv(k_desc, v_desc, k_smem, v_smem, k_ready, v_ready, kv_empty, g, offs_n, kv_col,
             NUM_STAGES: gl.constexpr):
    """PERSISTENT loader: K / V tile number g of this CTA's running count (all its blocks'
    tiles in order) into stage g % NUM_STAGES, rows offs_n.. of the (B * Nk, Hk * D) views."""
    stage = g % NUM_STAGES
    phase = (g // NUM_STAGES) & 1
    mbarrier.wait(kv_empty.index(stage), phase ^ 1)
    mbarrier.expect(k_ready.index(stage), k_desc.block_type.nbytes)
    tma.async_copy_global_to_shared(k_desc, [offs_n, kv_col], k_ready.index(stage), k_smem.index(stage))
    if kv_empty.shape[0] == 2 * NUM_STAGES:
        mbarrier.wait(kv_empty.index(NUM_STAGES + stage), phase ^ 1)         # SPLIT_EMPTY: V's stage
    mbarrier.expect(v_ready.index(stage), v_desc.block_type.nbytes)
    tma.async_copy_global_to_shared(v_desc, [offs_n, kv_col], v_ready.index(stage), v_smem.index(stage))


@gluon.jit
def _fwd_load_persistent(q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_bar, q_free, k_ready, v_ready, kv_empty,
                         seqlen_q, seqlen_k, nheads, group, n_m, n_bh, band, pid, n_prog, SCHED, win_left,
                         win_right, HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
                         NUM_STAGES: gl.constexpr, CAUSAL: gl.constexpr, SCHEDULED: gl.constexpr,
                         WINDOW: gl.constexpr, NUM_CONSUMERS: gl.constexpr, EARLY_Q: gl.constexpr = False,
                         O_STAGE: gl.constexpr = False):
    """PERSISTENT loader: the CTA's tiles pid, pid + n_prog, ...; t0 counts the K / V tiles
    loaded so far (the ring's phases continue across blocks), it the blocks (q_bar's and
    q_free's phases). NUM_CONSUMERS = 3: three Q slices of BLOCK_M / 3 rows (a slice past
    the sequence's end reads the next sequence's rows, or zeros past the tensor: its
    consumer only drains the ring, _fwd_drain)."""
    HALF_M: gl.constexpr = BLOCK_M // NUM_CONSUMERS              # rows a consumer (a half with 2)
    t0 = 0
    it = 0
    lo, hi, step = _block_range(SCHED, pid, n_m, n_bh, n_prog, SCHEDULED)
    for i in range(lo, hi, step):
        pid_m, pid_bh = _block_of(SCHED, i, n_m, n_bh, band, n_prog, CAUSAL, SCHEDULED)
        q_row, q_col, kv_row, kv_col, n_load, n_left0, n_left1, n_full0, n_full1, diag, lse_off, key0 = _tile_coords(
            pid_m, pid_bh, seqlen_q, seqlen_k, nheads, group, win_left, win_right, HEAD_DIM, BLOCK_M, BLOCK_N,
            CAUSAL, WINDOW)
        # the block's first min(n_load, NUM_STAGES) K / V tiles first: they wait only for the
        # ring, which the consumers free before their epilogue, so they load under the
        # previous block's last tiles and epilogue. Q waits until both consumers stored that
        # block's O, which leaves through Q's buffer (q_free completes its phase it - 1 then; a
        # fresh barrier passes parity 1): one Q load latency a block the consumers wait for.
        if EARLY_Q:
            # q_free completes when both consumers' S of the previous block's last tile did
            # (_fwd_consume), before they release that block's last two stages: so only the
            # first tile goes ahead of Q (its stage frees first), the next ones would hold the
            # Q load back behind the previous block's last P V wgmma
            n_pre = gl.minimum(n_load, 1)
        elif O_STAGE:
            # O_STAGE: q_free completes when both consumers finished this block's tile loops (before the last P V);
            # ring tile t0 + k's stage was last used by tile t0 + k - NUM_STAGES, released by then for k <
            # NUM_STAGES - 1 (its P V ran in the loops); the last tile's stage returns only after the O store
            n_pre = gl.minimum(n_load, NUM_STAGES - 1)
        else:
            n_pre = gl.minimum(n_load, NUM_STAGES)
        for j in range(0, n_pre):
            _load_kv(k_desc, v_desc, k_smem, v_smem, k_ready, v_ready, kv_empty, t0 + j, kv_row + j * BLOCK_N,
                     kv_col, NUM_STAGES)
        mbarrier.wait(q_free, (it & 1) ^ 1)
        mbarrier.expect(q_bar, NUM_CONSUMERS * q_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(q_desc, [q_row, q_col], q_bar, q_smem.index(0))
        tma.async_copy_global_to_shared(q_desc, [q_row + HALF_M, q_col], q_bar, q_smem.index(1))
        if NUM_CONSUMERS == 3:
            tma.async_copy_global_to_shared(q_desc, [q_row + 2 * HALF_M, q_col], q_bar, q_smem.index(2))
        for j in range(n_pre, n_load):
            _load_kv(k_desc, v_desc, k_smem, v_smem, k_ready, v_ready, kv_empty, t0 + j, kv_row + j * BLOCK_N,
                     kv_col, NUM_STAGES)
        t0 += n_load
        it += 1


@gluon.jit
def _softmax_step(s, m_i, l_i, qk_scale, NEG_SCALE: gl.constexpr):
    """One tile of the online softmax in log2 units. s (HALF_M, BLOCK_N) fp32 raw scores;
    returns p (HALF_M, BLOCK_N) fp32 = exp2(s * qk_scale - m_new), the new m_i and l_i,
    and alpha = exp2(m_old - m_new), the factor for the accumulator."""
    if NEG_SCALE:
        m_ij = gl.min(s, axis=1) * qk_scale                      # (HALF_M,)
    else:
        m_ij = gl.max(s, axis=1) * qk_scale                      # (HALF_M,)
    m_new = gl.maximum(m_i, m_ij)
    alpha = gl.exp2(m_i - m_new)                                 # (HALF_M,), 0 at the first tile
    p = gl.exp2(s * qk_scale - gl.expand_dims(m_new, 1))         # (HALF_M, BLOCK_N)
    l_i = l_i * alpha + gl.sum(p, axis=1)
    return p, m_new, l_i, alpha


@gluon.jit
def _turn_wait(turn, k, WG: gl.constexpr, PINGPONG: gl.constexpr):
    """PINGPONG: the k-th (0-based) issue of this warpgroup's wgmmas waits for the other
    warpgroup's k-th (WG 1) or (k-1)-th (WG 0) issue; WG 0's first wait passes on the
    fresh barrier (parity 1)."""
    if PINGPONG:
        mbarrier.wait(turn.index(WG), (k & 1) ^ (1 - WG))


@gluon.jit
def _turn_pass(turn, WG: gl.constexpr, PINGPONG: gl.constexpr):
    if PINGPONG:
        mbarrier.arrive(turn.index(1 - WG))


@gluon.jit
def _masked_softmax_tail_raw(s, m_i, l_i, qk_scale):
    """_masked_softmax_tail for a positive qk_scale with s the RAW scores (-inf where hidden): the scale folded into
    the exponent's FFMA (exp2(s * qk_scale - m)), as the unmasked _softmax_step does, instead of one FMUL an
    element before the max. m and alpha are bitwise _masked_softmax_tail's on fl(s * qk_scale) (for qk_scale > 0,
    x -> fl(x * qk_scale) is monotonic: max(fl(s * c)) = fl(max(s) * c)); p is rounded once instead of twice (the
    unmasked step's arithmetic). Hidden scores: -inf * qk_scale - m = -inf, p = 0. A zero scale would give
    -inf * 0 = NaN: the launchers pass NEG_SCALE = (softmax_scale <= 0), so a zero scale takes the old step.
    (FOLD, session 52 offline; measured and taken in session 53, H200, five rotated rounds of alternated source
    trees, bench/gpu/s52_fold_ab.py: causal D = 128 1k / 2k / 8k 1.028 / 1.014 / 1.014x, window (1024, 0) 16k
    1.012x, D = 64 causal 4k 1.017x; bench/NOTES.md "Session 53".)"""
    m_new = gl.maximum(m_i, gl.max(s, axis=1) * qk_scale)                   # (HALF_M,)
    m_use = gl.where(m_new == float("-inf"), 0.0, m_new)
    alpha = gl.exp2(m_i - m_use)
    p = gl.exp2(s * qk_scale - gl.expand_dims(m_use, 1))                     # (HALF_M, BLOCK_N), 0 where hidden
    l_i = l_i * alpha + gl.sum(p, axis=1)
    return p, m_new, l_i, alpha


@gluon.jit
def _masked_softmax_tail(s, m_i, l_i):
    """The online-softmax update of a masked tile (s: (HALF_M, BLOCK_N) scores in log2 units,
    -inf where hidden), shared by _softmax_step_masked and _softmax_step_lean. A row with no
    visible key so far keeps m = -inf; its exponents use 0 instead (p = 0, alpha = 0, l stays 0),
    not exp2(-inf - -inf) = NaN."""
    m_new = gl.maximum(m_i, gl.max(s, axis=1))                                # (HALF_M,)
    m_use = gl.where(m_new == float("-inf"), 0.0, m_new)
    alpha = gl.exp2(m_i - m_use)
    p = gl.exp2(s - gl.expand_dims(m_use, 1))                                 # (HALF_M, BLOCK_N), 0 where hidden
    l_i = l_i * alpha + gl.sum(p, axis=1)
    return p, m_new, l_i, alpha


@gluon.jit
def _softmax_step_masked(s, m_i, l_i, qk_scale, lim0, wspan, s_layout: gl.constexpr, WINDOW: gl.constexpr,
                         KEY_BOUND: gl.constexpr = False, NEG_SCALE: gl.constexpr = True):
    """_softmax_step on a diagonal tile (CAUSAL): score (r, c) of the tile is kept iff
    c <= lim0 + r, where lim0 = (last key index visible to the tile's first row) minus the
    tile's first key index; the others are -inf. NEG_SCALE (softmax_scale <= 0): the scale is
    applied before the mask, so a negative or zero scale needs no special case; otherwise (FOLD)
    the raw scores are masked and the scale folds into the exponent (_masked_softmax_tail_raw).
    A row with no visible key so far keeps
    m = -inf: the exponents then use 0 instead (p = 0, alpha = 0, l stays 0) instead of
    exp2(-inf - -inf) = NaN. WINDOW: also c >= lim0 + r - wspan (wspan = win_left +
    win_right: the row's first visible key), the window's left edge. KEY_BOUND (VARLEN without
    CAUSAL): c <= lim0 for every row (lim0: the sequence's last key from the tile's first)."""
    HALF_M: gl.constexpr = s.shape[0]
    BLOCK_N: gl.constexpr = s.shape[1]
    if KEY_BOUND:
        rows = gl.full([HALF_M], 0, gl.int32, gl.SliceLayout(1, s_layout)) + lim0  # (HALF_M,) one bound
    else:
        rows = lim0 + gl.arange(0, HALF_M, layout=gl.SliceLayout(1, s_layout))   # (HALF_M,) last visible column
    cols = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))         # (BLOCK_N,)
    visible = gl.expand_dims(cols, 0) <= gl.expand_dims(rows, 1)             # (HALF_M, BLOCK_N)
    if WINDOW:
        visible = visible & (gl.expand_dims(cols, 0) >= gl.expand_dims(rows - wspan, 1))
    if NEG_SCALE:
        s = s * qk_scale                                                      # log2 units before the mask
    s = gl.where(visible, s, float("-inf"))
    if NEG_SCALE:
        return _masked_softmax_tail(s, m_i, l_i)
    # (FOLD) a positive scale: the raw scores masked, the scale folded into the exponent
    return _masked_softmax_tail_raw(s, m_i, l_i, qk_scale)


@triton.jit
def _window_select(x, c, lo, hi):
    """x where lo <= c <= hi else -inf (fp32 x, int32 c / lo / hi, broadcast): one inline-PTX
    statement an element, two compares into ONE predicate (setp, then setp with .and) and one
    selp. Written out because tl.where(a & b, x, -inf) became two nested selects (LLVM's form
    of select(and)): 2 ISETP + 2 FSEL an element in the WINDOW masked loops (sm_90a)."""
    return tl.inline_asm_elementwise(
        "{ .reg .pred k; setp.ge.s32 k, $2, $3; setp.le.and.s32 k, $2, $4, k; selp.f32 $0, $1, 0fFF800000, k; }",
        "=f,f,r,r,r", [x, c, lo, hi], dtype=tl.float32, is_pure=True, pack=1)


@gluon.jit
def _softmax_step_lean(s, m_i, l_i, qk_scale, lim0, wspan, s_layout: gl.constexpr, SIDES: gl.constexpr,
                       NEG_SCALE: gl.constexpr = True):
    """LEAN_MASK (WINDOW only; a session-30 helper, offline): _softmax_step_masked(...,
    WINDOW=True) with a cheaper mask and otherwise its arithmetic op for op (the kept scores
    fl(s * qk_scale), the max, m_use, the exponents, l: bitwise the same p, m, l, alpha).
    Score (r, c) is kept iff lim0 + r - wspan <= c <= lim0 + r (row r's first and last
    visible key, relative to the tile's first), as there; SIDES says which compares run:
    BOTH (the left-edge loop; the peel unless LEFT applies): the two, into ONE predicate and
    one select an element (_window_select: setp, setp.and, selp). The two-compare
    tl.where(a & b, x, -inf) of _softmax_step_masked became nested selects (2 ISETP + 2 FSEL
    an element, sm_90a): -64 SASS instructions a warp a tile.
    RIGHT (the right-edge / diagonal loop, tiles j >= n_full >= n_left): c <= lim0 + r
    alone (CAUSAL's mask), -134 a tile. Why the left compare is always true there:
    _tile_coords makes n_left_w = clamp(cdiv(max(L_w, 0), BLOCK_N) - t_lo, 1, n_load) with
    L_w the lower bound of warpgroup w's last row (the largest of its rows'); a block tile
    j >= n_left_w (when n_left_w < n_load, j >= the unclamped value) starts at key
    (t_lo + j) * BLOCK_N >= L_w >= every row's lower bound, so every column c >= 0 of the
    tile passes c >= lim0 + r - wspan. (n_left_w = n_load leaves the loop empty.)
    LEFT (the one-block peel when lim0 >= BLOCK_N - 1, a runtime branch in _fwd_consume): c >= lim0 +
    r - wspan alone; every row's last visible key lim0 + r >= BLOCK_N - 1 >= c there, so the
    right compare is always true. -64 more on the peel (the window's left edge at (1024, 0))."""
    HALF_M: gl.constexpr = s.shape[0]
    BLOCK_N: gl.constexpr = s.shape[1]
    rows = lim0 + gl.arange(0, HALF_M, layout=gl.SliceLayout(1, s_layout))   # (HALF_M,) last visible column
    cols = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))         # (BLOCK_N,)
    if NEG_SCALE:
        s = s * qk_scale                                                      # log2 units before the mask
    if SIDES == BOTH:
        s = _window_select(s, gl.expand_dims(cols, 0), gl.expand_dims(rows - wspan, 1), gl.expand_dims(rows, 1))
    elif SIDES == RIGHT:
        s = gl.where(gl.expand_dims(cols, 0) <= gl.expand_dims(rows, 1), s, float("-inf"))
    else:
        s = gl.where(gl.expand_dims(cols, 0) >= gl.expand_dims(rows - wspan, 1), s, float("-inf"))
    if NEG_SCALE:
        return _masked_softmax_tail(s, m_i, l_i)
    # (FOLD) a positive scale: the raw scores masked, the scale folded into the exponent
    return _masked_softmax_tail_raw(s, m_i, l_i, qk_scale)

# ---------------------------------------------------------------------------------------
# Dropout (DROPOUT): the library's mask, bitwise (kernels/common.py dropout_keep)
# ---------------------------------------------------------------------------------------
# The two compositions below are @triton.jit functions on purpose: the Gluon consumers call
# them (a triton.jit function called from a gluon.jit one is generated with Gluon's
# semantic, its index tensors carrying the S tile's slice layouts), and tests/
# test_fwd_gluon.py runs the very same functions under TRITON_INTERPRET against
# kernels/common.py's dropout_keep (the definition of the mask) and a numpy model. Every
# hash in them is kernels/common.py's own.
@triton.jit
def dropout_block_row_keys(seed, rng_offset, head, row0, rows, rng_rows, rng_stride):
    """rk of the query rows row0 + rows (rows an int32 index tensor; row0 = b * Nq + the
    warpgroup's first row of the sequence) of head `head`: row_key(seed, rng_offset +
    (head * rng_rows + b * Nq + row) * rng_stride), int64, the counter layout of
    kernels/dropout_keys.py and fwd_ws.py (rng_rows = B * Nq, rng_stride = Nk)."""
    return dropout_row_key(seed, rng_offset + (head.to(tl.int64) * rng_rows + row0 + rows) * rng_stride)


@triton.jit
def dropout_tile_scale(rk, cb, cs_group, cs_mult, start_n, threshold):
    """The float form of the keep test (the masked variants', see LEAN_KEEP in _fwd_consume):
    the keep mask (rows, cols) as 1.0 / 0.0 of the key tile starting at key start_n (the
    tile lies in one DROPOUT_GROUP: start_n a multiple of its width <= DROPOUT_GROUP): rk
    (rows,) the row keys, cb (cols,) the in-group keys of its columns. The tile's group key
    folds into the rows (one xor a row), its multiplier is a scalar; per element xor,
    multiply, shift-or, FFMA.SAT (common.dropout_keep_scale), then the caller's FMUL p *
    keep: 5 instructions an element, as fwd_ws.py's common.dropout_tile_keep."""
    rk_t = rk ^ dropout_group_key(cs_group, start_n)
    return dropout_keep_scale(rk_t[:, None], cb[None, :], dropout_group_mult(cs_mult, start_n), threshold)


@triton.jit
def dropout_keep_min(dropout_p):
    """The smallest kept x: common.dropout_threshold(p) with its low 9 bits cleared (uint32).
    The library keeps element x (uint32, common.dropout_keep_keys) iff (x >> 9) >= (T >> 9),
    T the threshold; for integers x, T that is x >= ((T >> 9) << 9) = T & ~0x1FF:
      =>  x >= 512 * floor(x / 512) >= 512 * floor(T / 512)  (floor(x / 512) >= floor(T / 512));
      <=  floor is monotone and floor(512 k / 512) = k, so floor(x / 512) >= floor(T / 512).
    So one unsigned compare of x against this per-call constant is the library's keep test,
    bitwise (ends: T >> 9 = 0 (tiny p): keep_min = 0, everything kept, as before; the cap
    T = 4294967040 = 0xFFFFFF00 gives 0xFFFFFE00). tests/test_fwd_gluon.py checks it against
    the float form over random and edge x and T."""
    return dropout_threshold(dropout_p) & 0xFFFFFE00


@triton.jit
def dropout_tile_hash(rk, cb, cs_group, cs_mult, start_n):
    """x (rows, cols) uint32 of the key tile starting at key start_n (the tile lies in one
    DROPOUT_GROUP: start_n a multiple of its width <= DROPOUT_GROUP): rk (rows,) the row keys,
    cb (cols,) the in-group keys of its columns. The tile's group key folds into the rows
    (one xor a row), its multiplier is a scalar: per element one xor and one multiply,
    x = (rk ^ tk ^ cb) * mk, the library's (common.dropout_keep_keys / dropout_keep_scale)."""
    rk_t = rk ^ dropout_group_key(cs_group, start_n)
    return (rk_t[:, None] ^ cb[None, :]) * dropout_group_mult(cs_mult, start_n)


@triton.jit
def dropout_keep_select(p, x, keep_min, dtype: tl.constexpr, ASM: tl.constexpr):
    """(p where x >= keep_min else 0).to(dtype): p (fp32) with the dropped elements zeroed
    (x >= keep_min unsigned is the library's keep test, dropout_keep_min), converted to the
    wgmma operand's dtype (round to nearest even, as p.to(dtype)).
    ASM (the kernel; dtype bf16 / fp16): one inline-PTX statement a pair of elements, two
    setp.ge.u32 + selp.b32 and the packing cvt.rn.{bf16x2,f16x2}.f32 (element 0 in the low
    half, Triton's packing) -> per element ISETP.GE.U32 + SEL, and one F2FP a pair as
    before. Why not tl.where(...).to(dtype) in the kernel (sm_90a, Triton 3.6.0, offline):
    LLVM sinks the select through the truncation (the 16-bit select then unpacks each
    packed pair: PRMT, SEL, PRMT; 9104 instructions and 1054 bytes of spills CAUSAL D = 128,
    against 8200 / 8 before), and with only the select opaque it still moved the fp32 ->
    bf16 truncation of P across the loop's back edge (a phi of truncations becomes a
    truncation of a phi: the loop carried P as 64 fp32 registers, not 32 packed, converted
    one by one at the loop top and repacked by 32 PRMT a tile, and spilled more); with the
    conversion inside the statement neither can happen. The select passes p's bits or +0,
    so the operand is bitwise the old p * keep's (p >= 0). Not ASM (tests/test_fwd_gluon.py
    under the interpreter, which has no inline PTX): tl.where, the same operation."""
    if ASM:
        tl.static_assert((dtype == tl.bfloat16) or (dtype == tl.float16), "DROPOUT: the P operand is bf16 / fp16")
        if dtype == tl.bfloat16:
            return tl.inline_asm_elementwise(
                "{ .reg .pred k0, k1; .reg .b32 a, b; setp.ge.u32 k0, $3, $5; setp.ge.u32 k1, $4, $6; "
                "selp.b32 a, $1, 0, k0; selp.b32 b, $2, 0, k1; cvt.rn.bf16x2.f32 $0, b, a; }",
                "=r,r,r,r,r,r,r", [p, x, keep_min], dtype=tl.bfloat16, is_pure=True, pack=2)
        else:
            return tl.inline_asm_elementwise(
                "{ .reg .pred k0, k1; .reg .b32 a, b; setp.ge.u32 k0, $3, $5; setp.ge.u32 k1, $4, $6; "
                "selp.b32 a, $1, 0, k0; selp.b32 b, $2, 0, k1; cvt.rn.f16x2.f32 $0, b, a; }",
                "=r,r,r,r,r,r,r", [p, x, keep_min], dtype=tl.float16, is_pure=True, pack=2)
    else:
        return tl.where(x >= keep_min, p, 0.0).to(dtype)


@gluon.jit
def _dropout_setup(RNG, dropout_p, rng_rows, rng_stride, q_row, q_col, WG: gl.constexpr, HALF_M: gl.constexpr,
                   BLOCK_N: gl.constexpr, HEAD_DIM: gl.constexpr, s_layout: gl.constexpr, CB_ONCE: gl.constexpr,
                   LEAN_KEEP: gl.constexpr):
    """DROPOUT, once a block and warpgroup: (rk, cb, cs_group, cs_mult, cut), cut the
    integer keep_min (LEAN_KEEP) or the float form's threshold. rk
    (HALF_M,) the row keys of this warpgroup's rows (q_row: the block's first row in the
    (B * Nq) rows, so b * Nq + its row; head q_col // HEAD_DIM); cb (BLOCK_N,) the in-group
    column keys when a tile is a whole group (BLOCK_N == DROPOUT_GROUP: the default
    tiles), else the in-group seed cs_in (the tile's keys hashed per tile)."""
    seed = gl.load(RNG)
    rng_offset = gl.load(RNG + 1)
    rows = gl.arange(0, HALF_M, layout=gl.SliceLayout(1, s_layout))
    rk = dropout_block_row_keys(seed, rng_offset, q_col // HEAD_DIM, q_row + WG * HALF_M, rows, rng_rows, rng_stride)
    cs_in, cs_group, cs_mult = dropout_col_seeds(seed)
    if CB_ONCE:
        cb = dropout_in_group_key(cs_in, gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout)))
    else:
        cb = cs_in
    if LEAN_KEEP:
        cut = dropout_keep_min(dropout_p)
    else:
        cut = dropout_threshold(dropout_p)
    return rk, cb, cs_group, cs_mult, cut


@gluon.jit
def _dropout_tile(p, rk, cb, cs_group, cs_mult, cut, start_n, dtype: gl.constexpr, s_layout: gl.constexpr,
                  CB_ONCE: gl.constexpr, LEAN_KEEP: gl.constexpr):
    """p (HALF_M, BLOCK_N) with the dropped elements zeroed: the P fed to the P V wgmma (l
    keeps the undropped sum; 1 / (1 - p) is applied once, in the epilogue). start_n: the
    tile's first key index within the sequence. LEAN_KEEP: the integer keep test (cut =
    keep_min), dropped inside the packing conversion, so p comes back as dtype (bf16 /
    fp16) and the caller's p.to(dtype) is a no-op; else the float form (cut = the
    threshold), p fp32 as before."""
    BLOCK_N: gl.constexpr = p.shape[1]
    gl.static_assert(BLOCK_N <= DROPOUT_GROUP, "DROPOUT: a key tile must lie in one column group")
    if CB_ONCE:
        cb_t = cb
    else:
        cb_t = dropout_in_group_key(cb, start_n % DROPOUT_GROUP
                                    + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout)))
    if LEAN_KEEP:
        out = dropout_keep_select(p, dropout_tile_hash(rk, cb_t, cs_group, cs_mult, start_n), cut, dtype, True)
    else:
        out = p * dropout_tile_scale(rk, cb_t, cs_group, cs_mult, start_n, cut)
    return out


@gluon.jit
def _consume_tile(j, q, k_smem, v_smem, k_ready, v_ready, kv_empty, turn, s_zero, p16, acc, m_i, l_i, qk_scale,
                  diag, wspan, rk, cb, cs_group, cs_mult, keep_min, key0_g, WG: gl.constexpr,
                  BLOCK_N: gl.constexpr, NUM_STAGES: gl.constexpr,
                  NEG_SCALE: gl.constexpr, PINGPONG: gl.constexpr, MASKED: gl.constexpr,
                  s_layout: gl.constexpr, p_layout: gl.constexpr, row_o: gl.constexpr, WINDOW: gl.constexpr,
                  DROPOUT: gl.constexpr, CB_ONCE: gl.constexpr, LEAN_KEEP: gl.constexpr,
                  q_free=0, q_last=0, EARLY_Q: gl.constexpr = False, LEAN_MASK: gl.constexpr = False,
                  SIDES: gl.constexpr = 0, KEY_BOUND: gl.constexpr = False, KEY_HALF: gl.constexpr = False):
    """Tile j >= 1 of one consumer: S_j = Q K_j^T and O += P_{j-1} V_{j-1} in flight
    together, the softmax of S_j (masked when MASKED) under the P V wgmma, stage j - 1
    released, O rescaled. Returns (P_j as the A operand, O, m, l). DROPOUT: P_j dropped
    (_dropout_tile) after l took its undropped sum; key0_g + j * BLOCK_N is the tile's
    first key index. KEY_HALF (VARLEN_HALF): tile j computed BLOCK_N / 2 keys wide (S of
    the K stage's first half; s_zero, s_layout and the returned P that width).
    Session 27, H200: a never-taken branch before the full wgmma wait (so that ptxas keeps
    the wait below the softmax's exponentials, under this consumer's P V) measured 1-3.4%
    slower (bench/NOTES.md, "Session 27", call 1: the other consumer already fills those
    cycles); removed."""
    dtype: gl.constexpr = q.dtype
    stage = j % NUM_STAGES
    prev = (j - 1) % NUM_STAGES
    # S_j = Q K_j^T, then O += P_{j-1} V_{j-1}, both in flight
    mbarrier.wait(k_ready.index(stage), (j // NUM_STAGES) & 1)
    mbarrier.wait(v_ready.index(prev), ((j - 1) // NUM_STAGES) & 1)
    _turn_wait(turn, j, WG, PINGPONG)
    if KEY_HALF:
        # (VARLEN_HALF) the sequence's last key tile, at most BLOCK_N / 2 keys: S of its first half only
        # (s_zero and s_layout are the (HALF_M, BLOCK_N / 2) ones)
        k_tile = k_smem.index(stage).slice(0, BLOCK_N // 2)                 # (BLOCK_N / 2, HEAD_DIM) smem
    else:
        k_tile = k_smem.index(stage)                                        # (BLOCK_N, HEAD_DIM) smem
    s_tok = warpgroup_mma(q, k_tile.permute((1, 0)), s_zero, use_acc=False, is_async=True)
    o_tok = warpgroup_mma(p16, v_smem.index(prev), acc, is_async=True)
    _turn_pass(turn, WG, PINGPONG)                                           # PINGPONG: the other's turn
    # S_j done (groups retire in order), P V still running: softmax of tile j meanwhile
    s = warpgroup_mma_wait(1, deps=[s_tok])
    if kv_empty.shape[0] == 2 * NUM_STAGES:
        # SPLIT_EMPTY: K_j no longer read (its S retired): its stage may take K_{j + NUM_STAGES}
        # under this tile's softmax and P V
        mbarrier.arrive(kv_empty.index(stage))
    if EARLY_Q:
        # EARLY_Q: S of the block's last ring tile (q_last) was this warpgroup's last read of
        # its Q slice: free it for the next block's Q now, under this tile's softmax, its P V
        # and the epilogue (which no longer stages O in Q's buffer)
        mbarrier.arrive(q_free, pred=j == q_last)
    if MASKED:
        if LEAN_MASK:
            # WINDOW's cheaper mask (_softmax_step_lean): one compare a score, one-sided past n_left
            p, m_i, l_i, alpha = _softmax_step_lean(s, m_i, l_i, qk_scale, diag - j * BLOCK_N, wspan, s_layout,
                                                    SIDES, NEG_SCALE)
        else:
            p, m_i, l_i, alpha = _softmax_step_masked(s, m_i, l_i, qk_scale, diag - j * BLOCK_N, wspan, s_layout,
                                                      WINDOW, KEY_BOUND, NEG_SCALE)
    else:
        p, m_i, l_i, alpha = _softmax_step(s, m_i, l_i, qk_scale, NEG_SCALE)
    if DROPOUT:
        p = _dropout_tile(p, rk, cb, cs_group, cs_mult, keep_min, key0_g + j * BLOCK_N, dtype, s_layout, CB_ONCE,
                          LEAN_KEEP)
    acc = warpgroup_mma_wait(0, deps=[o_tok])
    if kv_empty.shape[0] == 2 * NUM_STAGES:
        mbarrier.arrive(kv_empty.index(NUM_STAGES + prev))                   # SPLIT_EMPTY: V_{j-1} no longer read
    else:
        mbarrier.arrive(kv_empty.index(prev))                                # K_{j-1}, V_{j-1} no longer read
    acc = acc * gl.expand_dims(gl.convert_layout(alpha, row_o), 1)
    p16 = gl.convert_layout(p.to(dtype), p_layout)
    return p16, acc, m_i, l_i


@gluon.jit
def _zero_v_tail(v_tile, lim):
    """VARLEN_PAGED (session 51): rows lim .. BLOCK_N - 1 of a landed V stage (BLOCK_N, D) set to 0 before this
    consumer's P V reads it. A paged cache's rows past a sequence (the rest of its last page) may hold anything,
    NaN included: their scores are masked to p = 0, but 0 * NaN is NaN in the wgmma. By 16-row chunks (the ones
    reaching past lim: loaded, selected, stored back), then the async-proxy fence and a warpgroup barrier before the
    wgmma. Both consumers zero the same rows of the same stage: the other's wgmma reads those rows only after its own
    stores of the same zeros, so whichever store lands last it reads 0 (a benign race: equal values); the stage goes
    back to the loader only after both consumers' arrivals, each made after its own stores and wgmma."""
    BLOCK_N: gl.constexpr = v_tile.shape[0]
    HEAD_DIM: gl.constexpr = v_tile.shape[1]
    CH: gl.constexpr = 16
    TPR: gl.constexpr = HEAD_DIM // 8                                        # threads a row, 16-byte vectors
    layout: gl.constexpr = gl.BlockedLayout([1, 8], [32 // TPR, TPR], [4, 1], [1, 0])
    for c in gl.static_range(BLOCK_N // CH):
        if (c + 1) * CH > lim:
            chunk = v_tile.slice(c * CH, CH)                                 # (CH, D) smem
            x = chunk.load(layout)
            rows = c * CH + gl.arange(0, CH, layout=gl.SliceLayout(1, layout))
            chunk.store(gl.where(gl.expand_dims(rows >= lim, 1), gl.zeros_like(x), x))
    fence_async_shared()
    gl.thread_barrier()


@gluon.jit
def _consume_last_half(half, g, q, k_smem, v_smem, k_ready, v_ready, kv_empty, turn, p16, acc, m_i, l_i, qk_scale,
                       diag_g, WG: gl.constexpr, HALF_M: gl.constexpr, BLOCK_N: gl.constexpr,
                       NUM_STAGES: gl.constexpr, NEG_SCALE: gl.constexpr, s_layout: gl.constexpr,
                       p_layout: gl.constexpr, row_o: gl.constexpr, PAGED: gl.constexpr = False, kv_lim=0):
    """KEY_HALF (VARLEN_HALF, session 51; _fwd_consume's doc): the block's last P V wgmmas, from ring tile g (the
    sequence's last key tile) on. half: tile g holds at most BLOCK_N / 2 of the sequence's keys and is not the peel
    (the loops stopped before it, p16 is tile g - 1's P): its S (HALF_M, BLOCK_N / 2) against the K stage's first
    half, masked against the key bound (diag_g), the P V of tile g - 1 in flight meanwhile (_consume_tile with
    KEY_HALF), then its own P V against V's first half. Otherwise (the loops ran through tile g, p16 is its P):
    tile g's P V, as _fwd_consume without KEY_HALF. Both release tile g's stage once. Returns (O, m, l)."""
    HALF_N: gl.constexpr = BLOCK_N // 2
    last = g % NUM_STAGES
    if half:
        sh_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                            instr_shape=[16, HALF_N, 16])
        row_sh: gl.constexpr = gl.SliceLayout(1, sh_layout)
        sh_zero = gl.zeros([HALF_M, HALF_N], gl.float32, sh_layout)          # (HALF_M, HALF_N), never read
        # m, l in the half-width S's row layout (the same rows a thread: a relabelling) and back
        ph16, acc, m_h, l_h = _consume_tile(g, q, k_smem, v_smem, k_ready, v_ready, kv_empty, turn, sh_zero, p16,
                                            acc, gl.convert_layout(m_i, row_sh), gl.convert_layout(l_i, row_sh),
                                            qk_scale, diag_g, ZERO, ZERO, ZERO, ZERO, ZERO, ZERO, ZERO, WG,
                                            BLOCK_N, NUM_STAGES, NEG_SCALE, False, True, sh_layout, p_layout, row_o,
                                            False, False, False, False, KEY_BOUND=True, KEY_HALF=True)
        m_i = gl.convert_layout(m_h, gl.SliceLayout(1, s_layout))
        l_i = gl.convert_layout(l_h, gl.SliceLayout(1, s_layout))
        mbarrier.wait(v_ready.index(last), (g // NUM_STAGES) & 1)
        if PAGED:
            _zero_v_tail(v_smem.index(last), kv_lim)
        o_tok = warpgroup_mma(ph16, v_smem.index(last).slice(0, HALF_N), acc, is_async=True)
        acc = warpgroup_mma_wait(0, deps=[o_tok])
    else:
        mbarrier.wait(v_ready.index(last), (g // NUM_STAGES) & 1)
        if PAGED:
            _zero_v_tail(v_smem.index(last), kv_lim)
        o_tok = warpgroup_mma(p16, v_smem.index(last), acc, is_async=True)
        acc = warpgroup_mma_wait(0, deps=[o_tok])
    mbarrier.arrive(kv_empty.index(last))
    return acc, m_i, l_i


@gluon.jit
def _stamp(TLP, slot, SMID: gl.constexpr = False):
    """TIMELINE (session 41 probe): %globaltimer (ns), or %smid, into TLP[slot], TLP the block's row of the int64
    (blocks, 8) buffer (one-block kernel: the CTA's linear id; PERSISTENT, session 42: pid_bh * n_m + pid_m). Every
    thread of the calling warpgroup stores (the same slot: one of the values wins)."""
    if SMID:
        v = gl.inline_asm_elementwise("mov.u32 $0, %smid;", "=r,r", [slot], dtype=gl.int32, is_pure=False,
                                      pack=1).to(gl.int64)
    else:
        v = gl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l,r", [slot], dtype=gl.int64, is_pure=False,
                                      pack=1)
    gl.store(TLP + slot, v)


@gluon.jit
def _fwd_consume(q_smem, k_smem, v_smem, q_bar, k_ready, v_ready, kv_empty, turn, q_free, o_desc, LSE,
                 q_row, q_col, lse_off, n_tiles, n_left, n_full, diag, wspan, qk_scale, t0, q_phase,
                 RNG, dropout_p, rng_rows, rng_stride, key0,
                 WG: gl.constexpr, HALF_M: gl.constexpr, BLOCK_N: gl.constexpr, HEAD_DIM: gl.constexpr,
                 NUM_STAGES: gl.constexpr, NEG_SCALE: gl.constexpr, PINGPONG: gl.constexpr, CAUSAL: gl.constexpr,
                 PERSISTENT: gl.constexpr, WINDOW: gl.constexpr, DROPOUT: gl.constexpr,
                 O=0, o_stride=0, EARLY_Q: gl.constexpr = False, LEAN_MASK: gl.constexpr = False,
                 TLP=0, TIMELINE: gl.constexpr = False, O_STAGE: gl.constexpr = False,
                 VARLEN: gl.constexpr = False, KEY_BOUND: gl.constexpr = False, row_lim=0,
                 VARLEN_FAST: gl.constexpr = False, KEY_HALF: gl.constexpr = False, PAGED: gl.constexpr = False,
                 kv_lim=0):
    """One consumer warpgroup on one block: n_tiles K / V tiles (the loader's count), the
    first n_full (>= 1) with the plain softmax, the rest masked (CAUSAL; n_full == n_tiles
    otherwise). Tile 0 is peeled (nothing to overlap) and masked when CAUSAL. diag (CAUSAL):
    the last key index visible to this CTA's first query row (pid_m * BLOCK_M + Nk - Nq).
    t0: the CTA's K / V tiles consumed before this block (the ring's running count: block
    tile j is ring tile g = t0 + j), q_phase: q_bar's parity for this block; both 0
    (constexprs) in the one-block kernel. PERSISTENT: arrives on q_free once this block's
    O has left Q's buffer.
    WINDOW: tiles [1, n_left) are masked too (the window's left edge; n_left >= 1), then
    [n_left, n_full) unmasked, [n_full, n_tiles) masked; diag is relative to the block's
    first loaded key tile and the mask also hides keys before diag_r - wspan (row r's).
    Barriers, every variant: the peel and the loops cover the ring tiles t0 .. t0 +
    n_tiles - 1 once each, in order, without gaps (1 <= n_left <= n_full <= n_tiles,
    _tile_coords), whatever the split. For each such tile g the consumer waits k_ready[g %
    NUM_STAGES] and v_ready[g % NUM_STAGES] at parity (g // NUM_STAGES) & 1 once and
    arrives on kv_empty[g % NUM_STAGES] once (in the step of tile g + 1, or after the loops
    for the last). Both consumers get the same n_tiles (from the same _tile_coords) and the
    loader loads exactly those n_tiles tiles, so each loaded stage gets its 2 kv_empty
    arrivals even where a tile is wholly hidden from one warpgroup (it is masked to p = 0,
    not skipped), and the phases depend on g alone, not on which loop a tile falls in.
    DROPOUT: every tile's P is dropped with the library's mask before its P V wgmma
    (_dropout_tile; key0: the block's first loaded key, t_lo * BLOCK_N under WINDOW), l
    sums the undropped P, the epilogue divides by l * (1 - p); lse is the undropped one.
    Without DROPOUT the dropout arguments are the constexpr 0 (nothing captured).
    EARLY_Q (PERSISTENT, session 29 helper, offline): q_free is arrived on as soon as the
    S wgmma of the block's last ring tile t0 + n_tiles - 1 completed (the peel when n_tiles
    is 1, else inside _consume_tile of whichever loop holds that tile: exactly one arrival a
    block), and O leaves by plain global stores from the accumulator's registers into O (the
    output's (B * Nq, H * D) rows, o_stride = H * D elements apart) instead of through Q's buffer,
    so that the loader can land the next block's Q while this block's last softmax, P V and
    epilogue run (the session-25 PERSISTENT kernel waited for the O store first: the Q
    load's whole latency, and the store's, sat between every two blocks). The arithmetic of
    every row is unchanged (O is the same bf16 / fp16 values, stored another way).
    LEAN_MASK (WINDOW, session-30 helper, offline): the peel and the masked loops take
    _softmax_step_lean (both edges in one predicate; the right edge alone in the right-edge
    loop; the left edge alone in the peel when diag >= BLOCK_N - 1): the same kept scores and
    arithmetic, fewer instructions.
    VARLEN (session 49): one block of a packed sequence; row_lim = the rows of the block that
    exist (the sequence's Nq - the block's first row, may be < 0 for a warpgroup past the end):
    O leaves by masked stores from registers into O (rows o_stride elements apart) and lse by
    masked stores, so no row of the next sequence is written. KEY_BOUND (VARLEN without CAUSAL):
    diag is the sequence's last key for every row (not offset by the warpgroup), the peel and
    the tiles [n_full, n_tiles) (the ragged last key tile) are masked against it. VARLEN_FAST: the peel
    unmasked when the sequence's keys fill it (KEY_BOUND; a uniform branch), and O of a warpgroup whose
    rows all exist by TMA through its Q half (the dense kernel's epilogue).
    KEY_HALF (VARLEN_HALF, KEY_BOUND only, session 51): when the sequence's last key tile holds at most BLOCK_N / 2
    keys and is not the peel (n_tiles >= 2; a uniform branch, the same for both consumers), its S and P V wgmmas
    run BLOCK_N / 2 keys wide (_consume_last_half; the loader still lands the whole tile, so the barriers and the
    ring's phases are unchanged). Its other half holds keys past the sequence, masked to p = 0 without KEY_HALF:
    every row keeps the same scores; only the order of l's sum over the tile's columns (and the wgmma's over its
    keys) changes with the width, so the outputs are close to, not bitwise, those without it.
    PAGED (VARLEN_PAGED, session 51): K / V from a paged cache; kv_lim the sequence's keys in the block's last loaded
    tile (<= 0: none): before the last P V, V's rows from kv_lim on are zeroed (_zero_v_tail: a page's rows past the
    sequence may hold NaN). Every earlier tile lies wholly inside the sequence's keys."""
    dtype: gl.constexpr = q_smem.dtype
    # wgmma accumulators of one warpgroup: S (HALF_M, BLOCK_N), O (HALF_M, HEAD_DIM)
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, BLOCK_N, 16])
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, HEAD_DIM, 16])
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    row_s: gl.constexpr = gl.SliceLayout(1, s_layout)
    row_o: gl.constexpr = gl.SliceLayout(1, o_layout)

    q = q_smem.index(WG)                                                     # (HALF_M, HEAD_DIM) smem
    m_i = gl.full([HALF_M], float("-inf"), gl.float32, row_s)
    l_i = gl.full([HALF_M], 0.0, gl.float32, row_s)
    acc = gl.zeros([HALF_M, HEAD_DIM], gl.float32, o_layout)                 # (HALF_M, HEAD_DIM)
    s_zero = gl.zeros([HALF_M, BLOCK_N], gl.float32, s_layout)               # (HALF_M, BLOCK_N), never read
    if not KEY_BOUND:
        diag = diag + WG * HALF_M                                            # this warpgroup's first row's
    # _consume_tile takes the ring index g = t0 + j and masks against diag_g - g * BLOCK_N,
    # so diag_g = diag + t0 * BLOCK_N gives the block's own diag - j * BLOCK_N (int32: fine
    # while a CTA's K / V tiles stay under 2^31 / BLOCK_N = 16.7M)
    diag_g = diag + t0 * BLOCK_N
    # DROPOUT: the in-group column keys held for the whole block (32 registers a thread) when a
    # tile is a whole group, else hashed per tile (_dropout_setup / _dropout_tile). Hashing
    # them per tile at BLOCK_N = 128 too spilled more in the masked variants (sm_90a, session
    # 26: CAUSAL 8 -> 280 bytes, WINDOW 1564 -> 1940; the hash is loop-invariant there)
    CB_ONCE: gl.constexpr = BLOCK_N == DROPOUT_GROUP
    # The keep test: the integer compare + select (4 instructions an element) in the unmasked
    # variants, the float form (5) in the masked ones. H200, session 26 (bench/gpu/
    # s26_gluon_dropout_fwd_ab.py ab, s26/call1 against s26/call4, time against the Gluon
    # forward without dropout, D = 128, p = 0.1): plain 4k 1.19-1.22x -> 1.16-1.17x, 16k
    # persistent 1.18-1.22x -> 1.16-1.20x; CAUSAL 4k 1.21-1.23x -> 1.24-1.26x, 16k
    # 1.17-1.19x -> 1.29-1.32x (its one-block variant spills 24 bytes with the integer form,
    # one STL / LDL pair in a diagonal loop, against 8 outside the loops). WINDOW (not
    # routed with dropout) keeps the float form with CAUSAL, as measured last. Session 27,
    # H200: the integer test in CAUSAL one-block tiles too, at setmaxnreg 248 / 232 / 24 (no
    # spill in the tile loops), measured 5-12% slower than the float test; removed.
    LEAN_KEEP: gl.constexpr = (not CAUSAL) and (not WINDOW)
    if DROPOUT:
        rk, cb, cs_group, cs_mult, keep_min = _dropout_setup(RNG, dropout_p, rng_rows, rng_stride, q_row, q_col,
                                                             WG, HALF_M, BLOCK_N, HEAD_DIM, s_layout, CB_ONCE,
                                                             LEAN_KEEP)
        key0_g = key0 - t0 * BLOCK_N                                         # tile g's first key: key0_g + g * BLOCK_N
    else:
        rk = ZERO
        cb = ZERO
        cs_group = ZERO
        cs_mult = ZERO
        keep_min = ZERO
        key0_g = ZERO

    # tile 0: S_0 and its softmax; nothing to overlap yet
    if TIMELINE and WG == 0:
        _stamp(TLP, 0)
        _stamp(TLP, 6, True)
    mbarrier.wait(q_bar, q_phase)
    if TIMELINE and WG == 0:
        _stamp(TLP, 1)
    mbarrier.wait(k_ready.index(t0 % NUM_STAGES), (t0 // NUM_STAGES) & 1)
    if TIMELINE and WG == 0:
        _stamp(TLP, 2)
    _turn_wait(turn, t0, WG, PINGPONG)
    s_tok = warpgroup_mma(q, k_smem.index(t0 % NUM_STAGES).permute((1, 0)), s_zero, use_acc=False, is_async=True)
    _turn_pass(turn, WG, PINGPONG)
    s = warpgroup_mma_wait(0, deps=[s_tok])
    if TIMELINE and WG == 0:
        _stamp(TLP, 3)
    if kv_empty.shape[0] == 2 * NUM_STAGES:
        mbarrier.arrive(kv_empty.index(t0 % NUM_STAGES))                     # SPLIT_EMPTY: K_0 no longer read
    if EARLY_Q:
        q_last = t0 + n_tiles - 1                                            # the block's last ring tile
        # a one-tile block: the peel's S was the last read of Q (_consume_tile's doc)
        mbarrier.arrive(q_free, pred=n_tiles == 1)
    else:
        q_last = ZERO
    if LEAN_MASK:
        # WINDOW, LEAN_MASK: the peeled tile (_softmax_step_lean). diag is this warpgroup's first
        # row's last visible key from the tile's first: at >= BLOCK_N - 1 every row sees the
        # tile's last key, so only the left edge cuts it (the common case; at (1024, 0) every
        # block but a sequence's first, the window's left edge being the peel there); else both.
        # One block a CTA only: the second copy of the peel's softmax spilled 88-92 bytes in the
        # PERSISTENT kernels (sm_90a, offline), which take both edges always
        if PERSISTENT:
            p, m_i, l_i, alpha = _softmax_step_lean(s, m_i, l_i, qk_scale, diag, wspan, s_layout, BOTH, NEG_SCALE)
        elif diag >= BLOCK_N - 1:
            p, m_i, l_i, alpha = _softmax_step_lean(s, m_i, l_i, qk_scale, diag, wspan, s_layout, LEFT, NEG_SCALE)
        else:
            p, m_i, l_i, alpha = _softmax_step_lean(s, m_i, l_i, qk_scale, diag, wspan, s_layout, BOTH, NEG_SCALE)
    elif KEY_BOUND and VARLEN_FAST:
        if diag >= BLOCK_N - 1:
            p, m_i, l_i, alpha = _softmax_step(s, m_i, l_i, qk_scale, NEG_SCALE)
        else:
            p, m_i, l_i, alpha = _softmax_step_masked(s, m_i, l_i, qk_scale, diag, wspan, s_layout, WINDOW,
                                                      KEY_BOUND, NEG_SCALE)
    elif CAUSAL or WINDOW or KEY_BOUND:
        p, m_i, l_i, alpha = _softmax_step_masked(s, m_i, l_i, qk_scale, diag, wspan, s_layout, WINDOW, KEY_BOUND,
                                                  NEG_SCALE)
    else:
        p, m_i, l_i, alpha = _softmax_step(s, m_i, l_i, qk_scale, NEG_SCALE)
    if DROPOUT:
        p = _dropout_tile(p, rk, cb, cs_group, cs_mult, keep_min, key0, dtype, s_layout, CB_ONCE, LEAN_KEEP)
    p16 = gl.convert_layout(p.to(dtype), p_layout)                           # (HALF_M, BLOCK_N) A operand
    # (DROPOUT with LEAN_KEEP: p is dtype already, _dropout_tile)

    if WINDOW:
        # the window's left-edge tiles after the peeled one (masked; for the lower warpgroup
        # possibly hidden from all its rows: p = 0, still waited for and released) ...
        for j in range(t0 + 1, t0 + n_left):
            p16, acc, m_i, l_i = _consume_tile(j, q, k_smem, v_smem, k_ready, v_ready, kv_empty, turn, s_zero,
                                               p16, acc, m_i, l_i, qk_scale, diag_g, wspan, rk, cb, cs_group, cs_mult,
                                               keep_min, key0_g, WG, BLOCK_N, NUM_STAGES,
                                               NEG_SCALE, PINGPONG, True, s_layout, p_layout, row_o, WINDOW,
                                               DROPOUT, CB_ONCE, LEAN_KEEP, q_free, q_last, EARLY_Q, LEAN_MASK, BOTH)
        # ... then the fully visible ones: no mask work
        for j in range(t0 + n_left, t0 + n_full):
            p16, acc, m_i, l_i = _consume_tile(j, q, k_smem, v_smem, k_ready, v_ready, kv_empty, turn, s_zero,
                                               p16, acc, m_i, l_i, qk_scale, diag_g, wspan, rk, cb, cs_group, cs_mult,
                                               keep_min, key0_g, WG, BLOCK_N, NUM_STAGES,
                                               NEG_SCALE, PINGPONG, False, s_layout, p_layout, row_o, WINDOW,
                                               DROPOUT, CB_ONCE, LEAN_KEEP, q_free, q_last, EARLY_Q)
    else:
        # the fully visible tiles: no mask work
        for j in range(t0 + 1, t0 + n_full):
            p16, acc, m_i, l_i = _consume_tile(j, q, k_smem, v_smem, k_ready, v_ready, kv_empty, turn, s_zero,
                                               p16, acc, m_i, l_i, qk_scale, diag_g, wspan, rk, cb, cs_group, cs_mult,
                                               keep_min, key0_g, WG, BLOCK_N, NUM_STAGES,
                                               NEG_SCALE, PINGPONG, False, s_layout, p_layout, row_o, WINDOW,
                                               DROPOUT, CB_ONCE, LEAN_KEEP, q_free, q_last, EARLY_Q)
    if KEY_HALF:
        # the last key tile at most half full and not the peel: computed BLOCK_N / 2 wide, after the loop below
        half = (n_tiles > 1) & (diag - (n_tiles - 1) * BLOCK_N < BLOCK_N // 2)
        n_main = n_tiles - half.to(gl.int32)
    else:
        n_main = n_tiles
    if CAUSAL or WINDOW or KEY_BOUND:
        # the diagonal tiles (and, for the upper warpgroup, tiles hidden from all its rows
        # that the lower one needs: masked to p = 0, still waited for and released)
        # (LEAN_MASK: these tiles lie at or past n_left, so every row's left bound is at or before
        # their first key: the right compare alone, SIDES = RIGHT)
        for j in range(t0 + n_full, t0 + n_main):
            p16, acc, m_i, l_i = _consume_tile(j, q, k_smem, v_smem, k_ready, v_ready, kv_empty, turn, s_zero,
                                               p16, acc, m_i, l_i, qk_scale, diag_g, wspan, rk, cb, cs_group, cs_mult,
                                               keep_min, key0_g, WG, BLOCK_N, NUM_STAGES,
                                               NEG_SCALE, PINGPONG, True, s_layout, p_layout, row_o, WINDOW,
                                               DROPOUT, CB_ONCE, LEAN_KEEP, q_free, q_last, EARLY_Q, LEAN_MASK, RIGHT,
                                               KEY_BOUND)

    # the last tile's P V
    if TIMELINE and WG == 0:
        _stamp(TLP, 4)
    if KEY_HALF:
        acc, m_i, l_i = _consume_last_half(half, t0 + n_tiles - 1, q, k_smem, v_smem, k_ready, v_ready, kv_empty,
                                           turn, p16, acc, m_i, l_i, qk_scale, diag_g, WG, HALF_M, BLOCK_N,
                                           NUM_STAGES, NEG_SCALE, s_layout, p_layout, row_o, PAGED, kv_lim)
    else:
        if O_STAGE:
            # O_STAGE (session 42): the last tile's S was this warpgroup's last read of Q: the next block's Q may land
            # under this P V and the epilogue (O leaves through the last K stage, below)
            mbarrier.arrive(q_free)
        last = (t0 + n_tiles - 1) % NUM_STAGES
        mbarrier.wait(v_ready.index(last), ((t0 + n_tiles - 1) // NUM_STAGES) & 1)
        if PAGED:
            _zero_v_tail(v_smem.index(last), kv_lim)
        _turn_wait(turn, t0 + n_tiles, WG, PINGPONG)
        o_tok = warpgroup_mma(p16, v_smem.index(last), acc, is_async=True)
        _turn_pass(turn, WG, PINGPONG)
        acc = warpgroup_mma_wait(0, deps=[o_tok])
        if kv_empty.shape[0] == 2 * NUM_STAGES:
            mbarrier.arrive(kv_empty.index(NUM_STAGES + last))                   # SPLIT_EMPTY: V's stage
        elif not O_STAGE:
            mbarrier.arrive(kv_empty.index(last))

    # epilogue: normalise once, lse in natural log, O through TMA from this half of Q's buffer
    if DROPOUT:
        l_out = l_i * (1.0 - dropout_p)                                      # kept values scale by 1 / (1 - p)
    else:
        l_out = l_i
    if CAUSAL or WINDOW or KEY_BOUND:
        # rows that see no key (only when Nq > Nk (+ win_right); VARLEN: a sequence without keys):
        # l = 0 and acc = 0; O = 0, lse = +inf
        seen = l_i > 0.0
        acc = acc / gl.expand_dims(gl.convert_layout(gl.where(seen, l_out, 1.0), row_o), 1)
        lse = gl.where(seen, (m_i + gl.log2(l_i)) * LN2, float("inf"))     # (HALF_M,)
    else:
        acc = acc / gl.expand_dims(gl.convert_layout(l_out, row_o), 1)
        lse = (m_i + gl.log2(l_i)) * LN2                                     # (HALF_M,)
    offs_m = gl.arange(0, HALF_M, layout=row_s)
    # this warpgroup's rows: WG * HALF_M on (the first GPU run, 2026-12-01, stored both halves
    # at offs_m alone: rows HALF_M.. never written, rows ..HALF_M raced; the output was right)
    if VARLEN:
        gl.store(LSE + lse_off + WG * HALF_M + offs_m, lse, mask=WG * HALF_M + offs_m < row_lim)
    else:
        gl.store(LSE + lse_off + WG * HALF_M + offs_m, lse)
    if VARLEN and VARLEN_FAST and not EARLY_Q:
        if row_lim >= (WG + 1) * HALF_M:
            # every row of this half exists: TMA through its Q half, as the dense kernel
            _store_o_tma(o_desc, q, acc, q_row + WG * HALF_M, q_col)
        else:
            _store_rows(O, acc, q_row, q_col, o_stride, row_lim, WG, HALF_M, HEAD_DIM, o_layout, True)
    elif VARLEN:
        _store_rows(O, acc, q_row, q_col, o_stride, row_lim, WG, HALF_M, HEAD_DIM, o_layout, True)
    elif EARLY_Q:
        _store_rows(O, acc, q_row, q_col, o_stride, ZERO, WG, HALF_M, HEAD_DIM, o_layout, False)
        if TIMELINE and WG == 0:
            _stamp(TLP, 5)
    elif O_STAGE:
        # O through this warpgroup's half of the last tile's K buffer (BLOCK_N = 2 * HALF_M rows, the same 128-byte
        # swizzle as Q / O's boxes): both warpgroups' last S read all of K_last, so write only once q_free's phase
        # of this block completed (both arrived above); the stage goes back to the loader after the store
        mbarrier.wait(q_free, q_phase)
        _store_o_tma(o_desc, k_smem.index(last).slice(WG * HALF_M, HALF_M), acc, q_row + WG * HALF_M, q_col)
        mbarrier.arrive(kv_empty.index(last))
        if TIMELINE and WG == 0:
            _stamp(TLP, 5)
    else:
        _store_o_tma(o_desc, q, acc, q_row + WG * HALF_M, q_col)
        if TIMELINE and WG == 0:
            _stamp(TLP, 5)
        if PERSISTENT:
            # this half of Q's buffer is free for the next block's Q (the loader waits for both)
            mbarrier.arrive(q_free)


@gluon.jit
def _store_o_tma(o_desc, buf, acc, row, col):
    """O (HALF_M, HEAD_DIM) of one warpgroup through the shared buffer buf (its Q half, or O_STAGE's
    half of the last K stage) by TMA at [row, col] of o's (rows, heads * D) view; returns after the
    store completed (buf is free again)."""
    buf.store(acc.to(buf.dtype))
    fence_async_shared()
    tma.async_copy_shared_to_global(o_desc, [row, col], buf)
    tma.store_wait(0)


@gluon.jit
def _store_rows(O, acc, q_row, q_col, o_stride, row_lim, WG: gl.constexpr, HALF_M: gl.constexpr,
                HEAD_DIM: gl.constexpr, o_layout: gl.constexpr, MASKED: gl.constexpr):
    """O (HALF_M, HEAD_DIM) of warpgroup WG straight from the wgmma accumulator layout into O's rows
    q_row + WG * HALF_M.. (o_stride elements apart): each thread holds 2 rows x HEAD_DIM / 8 column pairs,
    so a warp's store writes 8 rows x 16 contiguous bytes (4-byte stores, 32 a thread at D = 128, once a
    block). Row offsets in int64: (B * Nq) * H * D may pass 2^31 elements. EARLY_Q: every row; VARLEN
    (MASKED): the block's rows below row_lim only, since a TMA store of a block's last rows would write
    over the next sequence's. (Each form keeps the index arithmetic it was measured with: the SASS of both
    is byte-identical to their inline forms before this helper, session 49.)"""
    if MASKED:
        r_o = WG * HALF_M + gl.arange(0, HALF_M, layout=gl.SliceLayout(1, o_layout))           # (HALF_M,)
        rows_o = (q_row + r_o).to(gl.int64) * o_stride
    else:
        rows_o = (q_row + WG * HALF_M + gl.arange(0, HALF_M, layout=gl.SliceLayout(1, o_layout))).to(gl.int64) \
            * o_stride
    cols_o = q_col + gl.arange(0, HEAD_DIM, layout=gl.SliceLayout(0, o_layout))                 # (HEAD_DIM,)
    ptrs = O + gl.expand_dims(rows_o, 1) + gl.expand_dims(cols_o, 0)
    if MASKED:
        gl.store(ptrs, acc.to(O.dtype.element_ty), mask=gl.expand_dims(r_o < row_lim, 1))
    else:
        gl.store(ptrs, acc.to(O.dtype.element_ty))


@gluon.jit
def _fwd_drain(q_bar, k_ready, v_ready, kv_empty, q_free, t0, n_tiles, q_phase, NUM_STAGES: gl.constexpr):
    """NUM_CONSUMERS = 3: a consumer whose query rows lie past the sequence's end (the last
    block of a sequence whose Nq is not a multiple of BLOCK_M) on one block: no wgmma, no
    store, but exactly the waits and arrivals of _fwd_consume: q_bar at q_phase, then for
    each of the block's ring tiles g = t0 .. t0 + n_tiles - 1 k_ready and v_ready at parity
    (g // NUM_STAGES) & 1 and one arrival on kv_empty, then one on q_free.
    Why every wait, though nothing is read: (1) an arrival on kv_empty[s] before tile g
    landed would count toward the stage's previous phase (tile g - NUM_STAGES, perhaps still
    read by the others) and let the loader overwrite it; (2) a parity wait is right only
    when the barrier is at most one phase off: a consumer that skipped observing a phase
    (say K of tile g - NUM_STAGES, or this block's Q, still in flight when it moves on: TMA
    completions are unordered) could later pass its wait on tile g (or the next block's Q)
    one phase early, on the stale parity. Waiting for every phase in order, as the live
    consumers do, keeps each barrier within one phase of this consumer (the loader cannot
    run further ahead: it needs this consumer's kv_empty / q_free arrivals first)."""
    mbarrier.wait(q_bar, q_phase)
    for g in range(t0, t0 + n_tiles):
        mbarrier.wait(k_ready.index(g % NUM_STAGES), (g // NUM_STAGES) & 1)
        mbarrier.wait(v_ready.index(g % NUM_STAGES), (g // NUM_STAGES) & 1)
        mbarrier.arrive(kv_empty.index(g % NUM_STAGES))
    mbarrier.arrive(q_free)


@gluon.jit
def _fwd_skip_tiles(k_ready, v_ready, kv_empty, g_lo, g_hi, NUM_STAGES: gl.constexpr):
    """NUM_CONSUMERS = 3, CAUSAL (one block a CTA), or OWN_TILES (2 consumers, CAUSAL one block
    a CTA, SPLIT_EMPTY too: then V's stage gets its own arrival): release the ring tiles g_lo .. g_hi - 1
    that this consumer does not compute (wholly above its rows, or all of the block's for a
    consumer past the sequence's end): for each, k_ready and v_ready at parity
    (g // NUM_STAGES) & 1, then one arrival on kv_empty, as _fwd_drain's loop. The waits
    order the arrival after the stage's previous phase (tile g - NUM_STAGES) completed:
    this consumer released g - NUM_STAGES before, and an early arrival for g would count
    toward that phase while another consumer may still read it (the loader loads tile g only
    once that phase is complete, so k_ready(g) passing proves it). Every tile the block
    loads is waited for by its last live consumer too (it computes all n_load), so no TMA
    load is left in flight when the CTA ends."""
    for g in range(g_lo, g_hi):
        mbarrier.wait(k_ready.index(g % NUM_STAGES), (g // NUM_STAGES) & 1)
        mbarrier.wait(v_ready.index(g % NUM_STAGES), (g // NUM_STAGES) & 1)
        mbarrier.arrive(kv_empty.index(g % NUM_STAGES))
        if kv_empty.shape[0] == 2 * NUM_STAGES:
            mbarrier.arrive(kv_empty.index(NUM_STAGES + g % NUM_STAGES))     # SPLIT_EMPTY (OWN_TILES): V's stage


@gluon.jit
def _fwd_consume_tail(q_smem, k_smem, v_smem, q_bar, k_ready, v_ready, kv_empty, turn, q_free, o_desc, LSE,
                      q_row, q_col, lse_off, n_tiles, n_left, n_full, diag, wspan, qk_scale, t0, q_phase,
                      RNG, dropout_p, rng_rows, rng_stride, key0,
                      WG: gl.constexpr, HALF_M: gl.constexpr, BLOCK_N: gl.constexpr, HEAD_DIM: gl.constexpr,
                      NUM_STAGES: gl.constexpr, NEG_SCALE: gl.constexpr, PINGPONG: gl.constexpr,
                      CAUSAL: gl.constexpr, PERSISTENT: gl.constexpr, WINDOW: gl.constexpr, DROPOUT: gl.constexpr,
                      O, o_stride, EARLY_Q: gl.constexpr, LEAN_MASK: gl.constexpr, TLP, TIMELINE: gl.constexpr,
                      O_STAGE: gl.constexpr, VARLEN: gl.constexpr, KEY_BOUND: gl.constexpr, row_lim,
                      VARLEN_FAST: gl.constexpr, KEY_HALF: gl.constexpr = False, PAGED: gl.constexpr = False,
                      kv_lim=0):
    """VARLEN_TAIL (session 50): the second consumer of a VARLEN block, whose HALF_M rows may all lie past the
    sequence's end (the last block of a sequence whose tail holds at most HALF_M rows): then it computes and
    stores nothing and only releases the block's ring tiles (_fwd_skip_tiles: the waits and arrivals, so the
    ring's phases are those of _fwd_consume), and the first consumer runs alone on the tensor cores; otherwise
    _fwd_consume itself. (The one-block kernel: no q_free to arrive on, PINGPONG off.)"""
    if row_lim > WG * HALF_M:
        _fwd_consume(q_smem, k_smem, v_smem, q_bar, k_ready, v_ready, kv_empty, turn, q_free, o_desc, LSE,
                     q_row, q_col, lse_off, n_tiles, n_left, n_full, diag, wspan, qk_scale, t0, q_phase,
                     RNG, dropout_p, rng_rows, rng_stride, key0,
                     WG, HALF_M, BLOCK_N, HEAD_DIM, NUM_STAGES, NEG_SCALE, PINGPONG, CAUSAL, PERSISTENT, WINDOW,
                     DROPOUT, O, o_stride, EARLY_Q, LEAN_MASK, TLP, TIMELINE, O_STAGE, VARLEN, KEY_BOUND, row_lim,
                     VARLEN_FAST, KEY_HALF, PAGED, kv_lim)
    else:
        _fwd_skip_tiles(k_ready, v_ready, kv_empty, t0, t0 + n_tiles, NUM_STAGES)


@gluon.jit
def _fwd_consume_own(q_smem, k_smem, v_smem, q_bar, k_ready, v_ready, kv_empty, turn, q_free, o_desc, LSE,
                     q_row, q_col, lse_off, n_load, n_full, diag, qk_scale,
                     WG: gl.constexpr, HALF_M: gl.constexpr, BLOCK_N: gl.constexpr, HEAD_DIM: gl.constexpr,
                     NUM_STAGES: gl.constexpr, NEG_SCALE: gl.constexpr):
    """OWN_TILES (session 38): a 2-consumer CAUSAL one-block consumer that computes only the key tiles its
    own 64 rows reach and releases the rest unread. The 2-consumer kernel otherwise computes all of the
    block's n_load tiles in both warpgroups, masking to p = 0 the ones wholly above a warpgroup's rows
    (_fwd_consume's doc). Warpgroup 0's last row reaches key diag + HALF_M - 1, the block's last row
    diag + BLOCK_M - 1, so with BLOCK_N = 64 (D = 256) warpgroup 0 owns one tile fewer than the block
    in every block (n_own = 2p + 1 of 2p + 2 at Nq = Nk):
    at N = 512 4 of the 40 warpgroup tiles a head, 10% of the S and P V wgmmas; with BLOCK_N = 128 (D = 64
    / 128 routes) never a whole tile, so nothing changes there.
      n_own = clamp(cdiv(diag_w + HALF_M, BLOCK_N), 1, n_load), diag_w = diag + WG * HALF_M (its first row's
      last visible key): the tiles its last row reaches (>= 1: tile 0 is peeled; rows that see no key,
      Nq > Nk, mask it all as before: O = 0, lse = +inf);
      n_full = min(n_full_w, n_own) (_tile_coords' count for the warpgroup, already <= n_own).
    Tiles [0, n_own) run through _fwd_consume unchanged; [n_own, n_load) are waited for and released
    (_fwd_skip_tiles, after the epilogue: no later tile needs their stages). A skipped tile is one that
    the masked path turned into p = 0, m unchanged, alpha = exp2(0) = 1 exactly, so each row's arithmetic
    is the same: outputs bitwise those of the kernel without OWN_TILES (tests/test_fwd_gluon_own_tiles.py)."""
    d_w = diag + WG * HALF_M
    n_own = gl.minimum(gl.maximum(gl.cdiv(gl.maximum(d_w + HALF_M, 0), BLOCK_N), 1), n_load)
    n_full_own = gl.minimum(n_full, n_own)
    _fwd_consume(q_smem, k_smem, v_smem, q_bar, k_ready, v_ready, kv_empty, turn, q_free, o_desc, LSE,
                 q_row, q_col, lse_off, n_own, ONE, n_full_own, diag, ZERO, qk_scale, ZERO, ZERO,
                 ZERO, ZERO, ZERO, ZERO, ZERO,
                 WG, HALF_M, BLOCK_N, HEAD_DIM, NUM_STAGES, NEG_SCALE, False, True, False, False, False)
    _fwd_skip_tiles(k_ready, v_ready, kv_empty, n_own, n_load, NUM_STAGES)


@gluon.jit
def _fwd_consume_causal3(q_smem, k_smem, v_smem, q_bar, k_ready, v_ready, kv_empty, turn, q_free, o_desc, LSE,
                         q_row, q_col, lse_off, n_load, diag, qk_scale, pid_m, seqlen_q,
                         WG: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, HEAD_DIM: gl.constexpr,
                         NUM_STAGES: gl.constexpr, NEG_SCALE: gl.constexpr):
    """NUM_CONSUMERS = 3, CAUSAL, one block a CTA: consumer WG of the 192-row block pid_m
    (rows pid_m * BLOCK_M + WG * HALF_M .. + HALF_M - 1 of the sequence). diag: the last key
    visible to the block's first row (pid_m * BLOCK_M + Nk - Nq), n_load: the tiles the
    block's last row reaches (_tile_coords, clamped to [1, Nk / BLOCK_N]): what the loader
    loads, into ring tiles 0 .. n_load - 1.
    Per consumer, with d0 = diag + WG * HALF_M (its first row's last visible key):
      n_own  = clamp(cdiv(d0 + HALF_M, BLOCK_N), 1, n_load): the tiles its last row reaches
               (at least 1: tile 0 is peeled; a consumer none of whose rows sees a key,
               Nq > Nk, masks it all: O = 0, lse = +inf);
      n_full = clamp((d0 + 1) // BLOCK_N, 1, n_own): the tiles fully visible to its first row.
    It computes tiles [0, n_own) with _fwd_consume exactly as a 2-consumer half does ([1,
    n_full) unmasked, the peel and [n_full, n_own) masked) and only drains [n_own, n_load)
    (_fwd_skip_tiles, after its epilogue: the tile(s) wholly above its rows, which the lower
    consumers need). Why not mask them to p = 0 as the 2-consumer kernel does: with 192-row
    blocks and 128-key tiles the consumers' needs differ by a tile in every block (Nq = Nk:
    block p = 2q needs 3q + 1, 3q + 1, 3q + 2 tiles for consumers 0, 1, 2, block 2q + 1
    3q + 2, 3q + 3, 3q + 3), so masking would compute 3 wasted tiles every 2 blocks (6% of
    the work at N = 2k, 3% at 4k). With d0 a multiple of 64 (Nq, Nk multiples of 64 and
    128) the two counts give each consumer at most one masked tile besides the peel, and
    n_load - n_own <= 1 (its last row is within 128 keys of the block's last); a row's tiles,
    their order, masks and arithmetic are those of the 2-consumer causal kernel's row (both
    split rows into the same 64-row groups with the same per-group n_tiles, n_full when
    Nk - Nq is a multiple of 128), so the outputs should match it bitwise.
    Past the sequence's end (only consumers 1 / 2 of a sequence's last block when Nq is not
    a multiple of 192; consumer 0 is always live, n_m = cdiv(Nq, BLOCK_M)): no wgmma, no
    store, all n_load tiles drained. It does not wait for q_bar: nothing here reuses Q's
    buffer, and consumer 0 waits q_bar, whose transaction count covers all three slices, so
    no Q load is in flight when the CTA ends. Every stage still gets its 3 kv_empty
    arrivals per tile, so the loader (which loads n_load tiles for all) needs no change."""
    HALF_M: gl.constexpr = BLOCK_M // 3
    row0 = pid_m * BLOCK_M + WG * HALF_M                 # this consumer's first query row (sequence index)
    if row0 < seqlen_q:
        d0 = diag + WG * HALF_M
        n_own = gl.minimum(gl.maximum(gl.cdiv(gl.maximum(d0 + HALF_M, 0), BLOCK_N), 1), n_load)
        n_full = gl.minimum(gl.maximum(gl.maximum(d0 + 1, 0) // BLOCK_N, 1), n_own)
        _fwd_consume(q_smem, k_smem, v_smem, q_bar, k_ready, v_ready, kv_empty, turn, q_free, o_desc, LSE,
                     q_row, q_col, lse_off, n_own, ONE, n_full, diag, ZERO, qk_scale, ZERO, ZERO,
                     ZERO, ZERO, ZERO, ZERO, ZERO,
                     WG, HALF_M, BLOCK_N, HEAD_DIM, NUM_STAGES, NEG_SCALE, False, True, False, False, False)
        _fwd_skip_tiles(k_ready, v_ready, kv_empty, n_own, n_load, NUM_STAGES)
    else:
        _fwd_skip_tiles(k_ready, v_ready, kv_empty, 0, n_load, NUM_STAGES)


@gluon.jit
def _varlen_block(SCHED, i, n_slots, batch, VARLEN_ORDER: gl.constexpr):
    """VARLEN PERSISTENT (session 50): (slot, head) of the CTA's block i of the (slots, H) blocks, slot fastest
    (a head's blocks, neighbours in the heaviest-first order, share a sequence's K / V in L2), through the
    table's dispatch order with VARLEN_ORDER; slot >= SCHED[batch] is a spare (the grid's upper bound)."""
    slot = i % n_slots
    h = i // n_slots
    if VARLEN_ORDER:
        slot = gl.load(SCHED + 3 * (batch + 1) + slot)
    return slot, h


@gluon.jit
def _fwd_load_persistent_varlen(q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_bar, q_free, k_ready, v_ready,
                                kv_empty, total_q, group, n_slots, nheads, pid, n_prog, SCHED, batch,
                                HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
                                NUM_STAGES: gl.constexpr, VARLEN_ORDER: gl.constexpr):
    """VARLEN PERSISTENT loader (session 50; plain, EARLY_Q): _fwd_load_persistent's EARLY_Q order (the block's
    first K / V tile, then Q once both consumers' last S of the previous block read theirs, then the rest) over
    the CTA's blocks pid, pid + n_prog, ... of a packed batch (_varlen_block, _tile_coords_varlen), spares
    skipped by every partition alike."""
    HALF_M: gl.constexpr = BLOCK_M // 2
    t0 = 0
    it = 0
    n_blocks = gl.load(SCHED + batch)
    for i in range(pid, n_slots * nheads, n_prog):
        slot, h = _varlen_block(SCHED, i, n_slots, batch, VARLEN_ORDER)
        if slot < n_blocks:
            q_row, q_col, kv_row, kv_col, n_load, n_left0, n_left1, n_full0, n_full1, diag, lse_off, key0, row_lim = \
                _tile_coords_varlen(SCHED, slot, batch, h, total_q, group, HEAD_DIM, BLOCK_M, BLOCK_N, False)
            n_pre = gl.minimum(n_load, 1)
            for j in range(0, n_pre):
                _load_kv(k_desc, v_desc, k_smem, v_smem, k_ready, v_ready, kv_empty, t0 + j, kv_row + j * BLOCK_N,
                         kv_col, NUM_STAGES)
            mbarrier.wait(q_free, (it & 1) ^ 1)
            mbarrier.expect(q_bar, 2 * q_desc.block_type.nbytes)
            tma.async_copy_global_to_shared(q_desc, [q_row, q_col], q_bar, q_smem.index(0))
            tma.async_copy_global_to_shared(q_desc, [q_row + HALF_M, q_col], q_bar, q_smem.index(1))
            for j in range(n_pre, n_load):
                _load_kv(k_desc, v_desc, k_smem, v_smem, k_ready, v_ready, kv_empty, t0 + j, kv_row + j * BLOCK_N,
                         kv_col, NUM_STAGES)
            t0 += n_load
            it += 1


@gluon.jit
def _fwd_consume_persistent_varlen(q_smem, k_smem, v_smem, q_bar, k_ready, v_ready, kv_empty, turn, q_free, o_desc,
                                   LSE, total_q, group, n_slots, nheads, pid, n_prog, SCHED, batch, qk_scale, O,
                                   o_stride, WG: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
                                   HEAD_DIM: gl.constexpr, NUM_STAGES: gl.constexpr, NEG_SCALE: gl.constexpr,
                                   VARLEN_ORDER: gl.constexpr, VARLEN_FAST: gl.constexpr):
    """VARLEN PERSISTENT consumer (session 50; plain, EARLY_Q): _fwd_consume on the loader's blocks with the
    one-block VARLEN kernel's per-block arguments (KEY_BOUND, row_lim), q_free arrived after the block's last S
    (EARLY_Q) and O by masked stores from registers (VARLEN_FAST's peel; not its TMA store, Q's buffer being the
    next block's by then)."""
    HALF_M: gl.constexpr = BLOCK_M // 2
    t0 = 0
    it = 0
    n_blocks = gl.load(SCHED + batch)
    for i in range(pid, n_slots * nheads, n_prog):
        slot, h = _varlen_block(SCHED, i, n_slots, batch, VARLEN_ORDER)
        if slot < n_blocks:
            q_row, q_col, kv_row, kv_col, n_load, n_left0, n_left1, n_full0, n_full1, diag, lse_off, key0, row_lim = \
                _tile_coords_varlen(SCHED, slot, batch, h, total_q, group, HEAD_DIM, BLOCK_M, BLOCK_N, False)
            if WG == 0:
                n_left = n_left0
                n_full = n_full0
            else:
                n_left = n_left1
                n_full = n_full1
            _fwd_consume(q_smem, k_smem, v_smem, q_bar, k_ready, v_ready, kv_empty, turn, q_free, o_desc, LSE,
                         q_row, q_col, lse_off, n_load, n_left, n_full, diag, ZERO, qk_scale, t0, it & 1,
                         ZERO, ZERO, ZERO, ZERO, key0,
                         WG, HALF_M, BLOCK_N, HEAD_DIM, NUM_STAGES, NEG_SCALE, False, False, True, False, False,
                         O, o_stride, True, False, ZERO, False, False, True, True, row_lim, VARLEN_FAST)
            t0 += n_load
            it += 1


@gluon.jit
def _fwd_consume_persistent(q_smem, k_smem, v_smem, q_bar, k_ready, v_ready, kv_empty, turn, q_free, o_desc, LSE,
                            seqlen_q, seqlen_k, nheads, group, n_m, n_bh, band, pid, n_prog, SCHED, qk_scale,
                            win_left, win_right, wspan, RNG, dropout_p, rng_rows, rng_stride,
                            WG: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, HEAD_DIM: gl.constexpr,
                            NUM_STAGES: gl.constexpr, NEG_SCALE: gl.constexpr, CAUSAL: gl.constexpr,
                            SCHEDULED: gl.constexpr, WINDOW: gl.constexpr, DROPOUT: gl.constexpr,
                            NUM_CONSUMERS: gl.constexpr, O=0, o_stride=0, EARLY_Q: gl.constexpr = False,
                            LEAN_MASK: gl.constexpr = False, TLP=0, TIMELINE: gl.constexpr = False,
                            O_STAGE: gl.constexpr = False):
    """PERSISTENT consumer: _fwd_consume on the tiles pid, pid + n_prog, ... (the loader's
    order), t0 the running K / V tile count and it the block count, as in the loader.
    EARLY_Q (2 consumers): q_free after the block's last S, O by global stores (_fwd_consume).
    NUM_CONSUMERS = 3 (plain only): the last query block of a sequence may end inside the
    block (Nq a multiple of BLOCK_M / 3, not of BLOCK_M); a consumer whose rows lie past
    the sequence's end computes nothing and stores nothing, it only drains the block's
    tiles (_fwd_drain: the same waits and arrivals, so the phases are unchanged)."""
    HALF_M: gl.constexpr = BLOCK_M // NUM_CONSUMERS              # rows a consumer (a half with 2)
    t0 = 0
    it = 0
    lo, hi, step = _block_range(SCHED, pid, n_m, n_bh, n_prog, SCHEDULED)
    for i in range(lo, hi, step):
        pid_m, pid_bh = _block_of(SCHED, i, n_m, n_bh, band, n_prog, CAUSAL, SCHEDULED)
        q_row, q_col, kv_row, kv_col, n_load, n_left0, n_left1, n_full0, n_full1, diag, lse_off, key0 = _tile_coords(
            pid_m, pid_bh, seqlen_q, seqlen_k, nheads, group, win_left, win_right, HEAD_DIM, BLOCK_M, BLOCK_N,
            CAUSAL, WINDOW)
        if WG == 0:
            n_left = n_left0
            n_full = n_full0
        else:
            n_left = n_left1
            n_full = n_full1
        if NUM_CONSUMERS == 3:
            if pid_m * BLOCK_M + WG * HALF_M < seqlen_q:
                _fwd_consume(q_smem, k_smem, v_smem, q_bar, k_ready, v_ready, kv_empty, turn, q_free, o_desc, LSE,
                             q_row, q_col, lse_off, n_load, n_left, n_full, diag, wspan, qk_scale, t0, it & 1,
                             RNG, dropout_p, rng_rows, rng_stride, key0,
                             WG, HALF_M, BLOCK_N, HEAD_DIM, NUM_STAGES, NEG_SCALE, False, CAUSAL, True, WINDOW,
                             DROPOUT)
            else:
                _fwd_drain(q_bar, k_ready, v_ready, kv_empty, q_free, t0, n_load, it & 1, NUM_STAGES)
        else:
            _fwd_consume(q_smem, k_smem, v_smem, q_bar, k_ready, v_ready, kv_empty, turn, q_free, o_desc, LSE,
                         q_row, q_col, lse_off, n_load, n_left, n_full, diag, wspan, qk_scale, t0, it & 1,
                         RNG, dropout_p, rng_rows, rng_stride, key0,
                         WG, HALF_M, BLOCK_N, HEAD_DIM, NUM_STAGES, NEG_SCALE, False, CAUSAL, True, WINDOW, DROPOUT,
                         O, o_stride, EARLY_Q, LEAN_MASK, TLP + (pid_bh * n_m + pid_m).to(gl.int64) * 8, TIMELINE,
                         O_STAGE)
        t0 += n_load
        it += 1


# win_left / win_right not specialised (a 1 would become a constexpr, multiples of 16 get
# their own compile): every window shares one compiled kernel a variant, the one the
# offline report (bench/gluon_fwd_compile.py, plain i32) compiles
@gluon.jit(do_not_specialize=["win_left", "win_right", "rng_rows", "rng_stride"])
def attn_fwd_gluon_kernel(
    q_desc, k_desc, v_desc, o_desc,  # host TensorDescriptors over (B * N, heads * D) views; boxes q / o
                                     # (HALF_M, D), k / v (BLOCK_N, D)
    LSE,                             # (B, H, Nq) fp32 contiguous
    seqlen_q, seqlen_k, nheads, group, qk_scale,
    batch,                           # B; read by PERSISTENT only (the tile count), last so the
                                     # other parameters keep their offsets
    band,                            # PERSISTENT CAUSAL only: batch x heads a band (_tile_of), >= 1
    SCHED,                           # SCHEDULED only: int32 (num_programs + 1 + n_m * B * H,): each
                                     # CTA's first entry, then the blocks (launchers/schedule.py)
    win_left, win_right,             # WINDOW only: the window's sides, >= 0 (Nq + Nk: unbounded)
    RNG,                             # DROPOUT only: int64 (seed, offset) of the call (the library's rng state)
    dropout_p, rng_rows, rng_stride,  # DROPOUT only: p (fp32, 0 < p < 1), B * Nq, Nk (the counter layout)
    O,                               # EARLY_Q only: o's data, B * Nq rows of H * D elements (rows packed:
                                     # the launcher checks), stored from registers
    HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, NUM_STAGES: gl.constexpr,
    NEG_SCALE: gl.constexpr, PINGPONG: gl.constexpr = False, CAUSAL: gl.constexpr = False,
    PERSISTENT: gl.constexpr = False, SCHEDULED: gl.constexpr = False, WINDOW: gl.constexpr = False,
    DROPOUT: gl.constexpr = False, NUM_CONSUMERS: gl.constexpr = 2, EARLY_Q: gl.constexpr = False,
    LEAN_MASK: gl.constexpr = False, SPLIT_EMPTY: gl.constexpr = False, OWN_TILES: gl.constexpr = False,
    TIMELINE: gl.constexpr = False, O_STAGE: gl.constexpr = False, VARLEN: gl.constexpr = False,
    VARLEN_ORDER: gl.constexpr = False, VARLEN_FAST: gl.constexpr = False, VARLEN_TAIL: gl.constexpr = False,
    VARLEN_HALF: gl.constexpr = False,
    BLOCK_TABLE=None, bt_stride=None,   # VARLEN_PAGED: the block table (B, max_blocks) int32, its row stride
    PAGE_SIZE: gl.constexpr = 0,        # VARLEN_PAGED (session 51): the cache's page size (a multiple of BLOCK_N)
):
    HALF_M: gl.constexpr = BLOCK_M // NUM_CONSUMERS          # rows a consumer warpgroup (a half with 2)
    dtype: gl.constexpr = q_desc.dtype
    gl.static_assert((NUM_CONSUMERS == 2) or (NUM_CONSUMERS == 3), "NUM_CONSUMERS: 2 or 3")
    gl.static_assert(HALF_M * NUM_CONSUMERS == BLOCK_M, "BLOCK_M: a multiple of NUM_CONSUMERS")
    if NUM_CONSUMERS == 3:
        # the plain PERSISTENT forward, or (session 29, offline) the CAUSAL one block a CTA
        gl.static_assert(((PERSISTENT and not CAUSAL) or (CAUSAL and not PERSISTENT))
                         and not (WINDOW or DROPOUT or SCHEDULED or PINGPONG),
                         "NUM_CONSUMERS = 3: the plain PERSISTENT or the CAUSAL one-block forward only")
    gl.static_assert(not (CAUSAL and WINDOW), "CAUSAL and WINDOW are exclusive (causal is the window (Nq + Nk, 0))")
    # (SCHEDULED with WINDOW, session 42 offline: the host's deal of window blocks, launchers/schedule.py
    # window_schedule; the partitions read any block list the same way)
    gl.static_assert((not SCHEDULED) or PERSISTENT, "SCHEDULED: a deal for the PERSISTENT kernel")
    # D = 256 (a session-31 helper; routed in session 32): plain / CAUSAL, one block a CTA or
    # PERSISTENT, 2 consumers, BLOCK_N 64 x 2 stages (D256 in the docstring). SPLIT_EMPTY: K's and
    # V's stages released apart (2 consumers only: _fwd_drain / _fwd_skip_tiles release both at once)
    gl.static_assert((HEAD_DIM != 256) or (NUM_CONSUMERS == 2 and not (WINDOW or DROPOUT or EARLY_Q or LEAN_MASK)),
                     "HEAD_DIM = 256: the 2-consumer plain / CAUSAL forward (no window, dropout, EARLY_Q)")
    gl.static_assert((not SPLIT_EMPTY) or NUM_CONSUMERS == 2, "SPLIT_EMPTY: 2 consumers only")
    # OWN_TILES (session 38; launchers.policy.GLUON_FWD_CAUSAL_OWN_TILES): each consumer of the CAUSAL
    # one-block 2-consumer kernel computes only its own rows' key tiles (_fwd_consume_own)
    gl.static_assert((not OWN_TILES) or (CAUSAL and NUM_CONSUMERS == 2 and not (PERSISTENT or PINGPONG or WINDOW
                                                                                 or DROPOUT)),
                     "OWN_TILES: the CAUSAL one-block 2-consumer forward without pingpong, window or dropout")
    if WINDOW:
        wl = win_left
        wr = win_right
        wspan = win_left + win_right
    else:
        # without WINDOW the window values are constexprs, so that no partition captures
        # (and the SASS does not change by) the two unused parameters
        wl = ZERO
        wr = ZERO
        wspan = ZERO
    # EARLY_Q (a session-29 helper, offline; launchers.policy.GLUON_FWD_WINDOW_EARLY_Q): the
    # PERSISTENT 2-consumer kernel with the next block's Q loaded under this block's last tile
    # (_fwd_consume's doc). Without it O / o_rs are bound to the constexpr 0 below (not
    # captured: the other variants' SASS is unchanged)
    gl.static_assert((not EARLY_Q) or (PERSISTENT and NUM_CONSUMERS == 2 and not DROPOUT),
                     "EARLY_Q: the PERSISTENT 2-consumer forward without dropout")
    gl.static_assert((not O_STAGE) or (PERSISTENT and NUM_CONSUMERS == 2 and not EARLY_Q and not SPLIT_EMPTY
                                       and not DROPOUT and BLOCK_N == BLOCK_M), "O_STAGE: the PERSISTENT "
                     "2-consumer forward, BLOCK_N == BLOCK_M, without EARLY_Q / SPLIT_EMPTY / DROPOUT (not measured)")
    # LEAN_MASK (a session-30 helper, routed in session 31; launchers.policy.GLUON_FWD_WINDOW_LEAN_MASK): the
    # WINDOW consumers' masked tiles with one compare a score (_softmax_step_lean), bitwise the same
    # D = 128 only: at D = 64 it spilled 8 bytes (one register, once a block; sm_90a offline),
    # and D = 64 windows do not take the Gluon kernel (launchers.policy.GLUON_FWD_WINDOW_MIN_N)
    gl.static_assert((not LEAN_MASK) or (WINDOW and NUM_CONSUMERS == 2 and not DROPOUT and HEAD_DIM == 128),
                     "LEAN_MASK: the 2-consumer WINDOW forward at D = 128, without dropout")
    # VARLEN (session 49; launchers/forward_gluon.fwd_varlen): a packed batch, one block a CTA,
    # grid (slots, H), q / k / v / o descriptors over the (total, heads * D) views, seqlen_q = total_q
    # (lse is (H, total_q)), SCHED the int32 tables of _tile_coords_varlen (+ CAUSAL: the slots'
    # dispatch order, heaviest first, after them); O by masked stores (_fwd_consume's VARLEN). DROPOUT (session 51,
    # one block a CTA): the packed counter layout (rng_rows = total_q, rng_stride = max_seqlen_k): rows by the packed
    # row (q_row), columns by the key's index in its sequence (key0 = 0), as the packed Triton forwards draw it
    # WINDOW (session 51, one block a CTA, no dropout): the window (win_left, 0) per sequence (_tile_coords_varlen)
    gl.static_assert((not VARLEN) or (NUM_CONSUMERS == 2 and not (PINGPONG or O_STAGE
                                                                   or OWN_TILES or SPLIT_EMPTY or TIMELINE)
                                       and HEAD_DIM != 256 and PERSISTENT == EARLY_Q
                                       and not (PERSISTENT and (CAUSAL or VARLEN_TAIL or DROPOUT or WINDOW))
                                       and not (WINDOW and (CAUSAL or DROPOUT or LEAN_MASK))),
                     "VARLEN: the 2-consumer plain / CAUSAL forward one block a CTA, or plain PERSISTENT with "
                     "EARLY_Q (session 50, no dropout), D = 64 / 128")
    KEY_BOUND: gl.constexpr = VARLEN and (not CAUSAL) and (not WINDOW)
    # VARLEN_HALF (session 51): a plain packed block's last key tile, when at most half full, computed BLOCK_N / 2
    # keys wide (_fwd_consume's KEY_HALF)
    gl.static_assert((not VARLEN_HALF) or (KEY_BOUND and not (PERSISTENT or DROPOUT)),
                     "VARLEN_HALF: the plain VARLEN forward one block a CTA, without dropout")
    # VARLEN_PAGED (session 51; launchers/forward_gluon.fwd_varlen_paged): K / V from a paged cache, k_desc / v_desc
    # over its (blocks * PAGE_SIZE, Hk * D) view, tile rows through BLOCK_TABLE (_fwd_load's PAGE), the last tile's V
    # rows past the sequence zeroed (_zero_v_tail); cu_seqlens_k in SCHED gives the key lengths only
    # (an offline compile that leaves PAGE_SIZE out of its signature binds None: no default is applied there)
    PAGED: gl.constexpr = PAGE_SIZE is not None and PAGE_SIZE > 0
    gl.static_assert((not PAGED) or (VARLEN and not (PERSISTENT or DROPOUT) and PAGE_SIZE % BLOCK_N == 0),
                     "VARLEN_PAGED: the VARLEN forward one block a CTA, no dropout, pages of whole key tiles")
    if EARLY_Q or VARLEN:
        o_ptr = O
        # o's row stride: nheads * HEAD_DIM (the launcher passes packed rows only), computed
        # here so that the compiler knows it a multiple of HEAD_DIM and packs each thread's
        # column pairs into 4-byte stores (a runtime stride argument gave 2-byte ones)
        o_rs = nheads * HEAD_DIM
    else:
        o_ptr = ZERO
        o_rs = ZERO
    # TIMELINE (session 41 probe): SCHED (unused by the one-block kernel) is an int64 (CTAs, 8) buffer of stamps
    gl.static_assert((not TIMELINE) or (not SCHEDULED and NUM_CONSUMERS == 2 and not OWN_TILES),
                     "TIMELINE: the 2-consumer forward, one block or PERSISTENT (not SCHEDULED)")
    if TIMELINE:
        if PERSISTENT:
            tl_ptr = SCHED                  # rows per block: _fwd_consume_persistent
        else:
            tl_ptr = SCHED + (gl.program_id(0) + gl.program_id(1) * gl.num_programs(0)).to(gl.int64) * 8
    else:
        tl_ptr = ZERO
    if DROPOUT:
        rng_ptr = RNG
        drop_p = dropout_p
        drop_rows = rng_rows
        drop_stride = rng_stride
    else:
        # as the window's: constexprs, so that the kernels without DROPOUT keep their SASS
        rng_ptr = ZERO
        drop_p = ZERO
        drop_rows = ZERO
        drop_stride = ZERO
    if VARLEN and not PERSISTENT:
        # (slot fastest: a head's blocks, neighbours in the heaviest-first order, share its sequences' K / V in L2;
        # session 50 measured grid (H, slots) 5-11% slower, bench/gpu/s50_varlen_heads_ab.py)
        slot = gl.program_id(0)
        h_v = gl.program_id(1)
        if VARLEN_ORDER:
            slot = gl.load(SCHED + 3 * (batch + 1) + slot)             # heaviest first (fwd.py's ORDER)
        if slot >= gl.load(SCHED + batch):
            return                                                     # the grid is an upper bound
        q_row, q_col, kv_row, kv_col, n_load, n_left0, n_left1, n_full0, n_full1, diag, lse_off, key0, row_lim = \
            _tile_coords_varlen(SCHED, slot, batch, h_v, seqlen_q, group, HEAD_DIM, BLOCK_M, BLOCK_N, CAUSAL, wl,
                                WINDOW)
        if PAGED:
            b_pg = find_sequence(SCHED, slot, batch)
            bt_row = BLOCK_TABLE + b_pg.to(gl.int64) * bt_stride              # the sequence's block-table row
            seqlen_k_pg = gl.load(SCHED + 2 * batch + 3 + b_pg) - gl.load(SCHED + 2 * batch + 2 + b_pg)
            kv_lim = seqlen_k_pg - key0 - (n_load - 1) * BLOCK_N               # its keys in the last loaded tile
        else:
            bt_row = ZERO
            kv_lim = ZERO
    elif not PERSISTENT:
        # grid (n_m, B * H), one block a CTA. Query block fastest (one head's blocks share
        # K / V in L2); CAUSAL: the last blocks see the most key tiles and go first (heavy
        # first, as fwd_ws.py's HEAVY_FIRST). WINDOW: blocks of (nearly) equal cost, in order
        if CAUSAL:
            pid_m = gl.num_programs(0) - 1 - gl.program_id(0)
        else:
            pid_m = gl.program_id(0)
        pid_bh = gl.program_id(1)                # batch * nheads + head
        q_row, q_col, kv_row, kv_col, n_load, n_left0, n_left1, n_full0, n_full1, diag, lse_off, key0 = _tile_coords(
            pid_m, pid_bh, seqlen_q, seqlen_k, nheads, group, wl, wr, HEAD_DIM, BLOCK_M, BLOCK_N, CAUSAL, WINDOW)
    q_smem = gl.allocate_shared_memory(dtype, [NUM_CONSUMERS, HALF_M, HEAD_DIM], q_desc.layout)  # (C, HALF_M, D)
    k_smem = gl.allocate_shared_memory(dtype, [NUM_STAGES, BLOCK_N, HEAD_DIM], k_desc.layout)   # (S, BLOCK_N, D)
    v_smem = gl.allocate_shared_memory(dtype, [NUM_STAGES, BLOCK_N, HEAD_DIM], v_desc.layout)   # (S, BLOCK_N, D)
    q_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    k_ready = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    v_ready = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    # kv_empty[s] (s < NUM_STAGES): stage s free again; SPLIT_EMPTY: kv_empty[s] K's stage s and
    # kv_empty[NUM_STAGES + s] V's, released apart (the partitions read the split from the shape)
    if SPLIT_EMPTY:
        kv_empty = gl.allocate_shared_memory(gl.int64, [2 * NUM_STAGES, 1], mbarrier.MBarrierLayout())
    else:
        kv_empty = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    turn = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())               # PINGPONG
    mbarrier.init(q_bar, count=1)
    mbarrier.init(turn.index(0), count=1)
    mbarrier.init(turn.index(1), count=1)
    for i in gl.static_range(NUM_STAGES):
        mbarrier.init(k_ready.index(i), count=1)
        mbarrier.init(v_ready.index(i), count=1)
        mbarrier.init(kv_empty.index(i), count=NUM_CONSUMERS)    # one arrival per consumer warpgroup
    if SPLIT_EMPTY:
        for i in gl.static_range(NUM_STAGES):
            mbarrier.init(kv_empty.index(NUM_STAGES + i), count=NUM_CONSUMERS)   # V's stage i
    if PERSISTENT:
        # O of a block leaves through Q's buffer: the next block's Q load waits until both
        # consumers' TMA stores are done (one arrival each, after tma.store_wait)
        q_free = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
        mbarrier.init(q_free, count=NUM_CONSUMERS)
    else:
        q_free = q_bar                               # never touched (PERSISTENT only)
    fence_async_shared()

    WG0: gl.constexpr = 0
    WG1: gl.constexpr = 1
    if PERSISTENT:
        # grid (num_programs,): CTA pid takes tiles pid, pid + num_programs, ... of the n_m x
        # (B * H) blocks (_tile_of's order); every partition walks the same list itself.
        # PINGPONG's turn parities count issues per block and do not continue across blocks.
        gl.static_assert(not PINGPONG, "PERSISTENT does not support PINGPONG")
        if NUM_CONSUMERS == 3:
            n_m = gl.cdiv(seqlen_q, BLOCK_M)     # the last block of a sequence may end inside it
        else:
            n_m = seqlen_q // BLOCK_M
        n_bh = batch * nheads
        pid = gl.program_id(0)
        n_prog = gl.num_programs(0)
        if NUM_CONSUMERS == 3:
            # three consumer warpgroups free-running on the same K / V ring (no turn order, as
            # the 2-consumer PERSISTENT kernel), the loader's warp padded to a fourth: 512
            # threads, setmaxnreg CONSUMER_REGS_3 for the workers. (The argument tuples are
            # spelled out: a tuple bound to a name first loses its constexprs' constness.)
            WG2: gl.constexpr = 2
            gl.warp_specialize([
                (_fwd_consume_persistent, (q_smem, k_smem, v_smem, q_bar, k_ready, v_ready, kv_empty, turn, q_free,
                                           o_desc, LSE, seqlen_q, seqlen_k, nheads, group, n_m, n_bh, band, pid, n_prog,
                                           SCHED, qk_scale, wl, wr, wspan, rng_ptr, drop_p, drop_rows, drop_stride,
                                           WG0, BLOCK_M, BLOCK_N, HEAD_DIM, NUM_STAGES,
                                           NEG_SCALE, CAUSAL, SCHEDULED, WINDOW, DROPOUT, NUM_CONSUMERS)),
                (_fwd_consume_persistent, (q_smem, k_smem, v_smem, q_bar, k_ready, v_ready, kv_empty, turn, q_free,
                                           o_desc, LSE, seqlen_q, seqlen_k, nheads, group, n_m, n_bh, band, pid, n_prog,
                                           SCHED, qk_scale, wl, wr, wspan, rng_ptr, drop_p, drop_rows, drop_stride,
                                           WG1, BLOCK_M, BLOCK_N, HEAD_DIM, NUM_STAGES,
                                           NEG_SCALE, CAUSAL, SCHEDULED, WINDOW, DROPOUT, NUM_CONSUMERS)),
                (_fwd_consume_persistent, (q_smem, k_smem, v_smem, q_bar, k_ready, v_ready, kv_empty, turn, q_free,
                                           o_desc, LSE, seqlen_q, seqlen_k, nheads, group, n_m, n_bh, band, pid, n_prog,
                                           SCHED, qk_scale, wl, wr, wspan, rng_ptr, drop_p, drop_rows, drop_stride,
                                           WG2, BLOCK_M, BLOCK_N, HEAD_DIM, NUM_STAGES,
                                           NEG_SCALE, CAUSAL, SCHEDULED, WINDOW, DROPOUT, NUM_CONSUMERS)),
                (_fwd_load_persistent, (q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_bar, q_free, k_ready, v_ready,
                                        kv_empty, seqlen_q, seqlen_k, nheads, group, n_m, n_bh, band, pid, n_prog,
                                        SCHED, wl, wr, HEAD_DIM, BLOCK_M, BLOCK_N, NUM_STAGES, CAUSAL, SCHEDULED,
                                        WINDOW, NUM_CONSUMERS)),
            ], [4, 4, LOADER_WARPS], [CONSUMER_REGS_3, CONSUMER_REGS_3, LOADER_REGS])
        elif VARLEN:
            # (session 50) a packed batch, plain: the (slots, H) blocks, slots = cdiv(total_q, BLOCK_M) + B (an
            # upper bound; spares skipped), each partition walking the CTA's list (_varlen_block)
            n_slots = gl.cdiv(seqlen_q, BLOCK_M) + batch
            gl.warp_specialize([
                (_fwd_consume_persistent_varlen, (q_smem, k_smem, v_smem, q_bar, k_ready, v_ready, kv_empty, turn,
                                                  q_free, o_desc, LSE, seqlen_q, group, n_slots, nheads, pid, n_prog,
                                                  SCHED, batch, qk_scale, o_ptr, o_rs, WG0, BLOCK_M, BLOCK_N,
                                                  HEAD_DIM, NUM_STAGES, NEG_SCALE, VARLEN_ORDER, VARLEN_FAST)),
                (_fwd_consume_persistent_varlen, (q_smem, k_smem, v_smem, q_bar, k_ready, v_ready, kv_empty, turn,
                                                  q_free, o_desc, LSE, seqlen_q, group, n_slots, nheads, pid, n_prog,
                                                  SCHED, batch, qk_scale, o_ptr, o_rs, WG1, BLOCK_M, BLOCK_N,
                                                  HEAD_DIM, NUM_STAGES, NEG_SCALE, VARLEN_ORDER, VARLEN_FAST)),
                (_fwd_load_persistent_varlen, (q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_bar, q_free,
                                               k_ready, v_ready, kv_empty, seqlen_q, group, n_slots, nheads, pid,
                                               n_prog, SCHED, batch, HEAD_DIM, BLOCK_M, BLOCK_N, NUM_STAGES,
                                               VARLEN_ORDER)),
            ], [4, LOADER_WARPS], [CONSUMER_REGS, LOADER_REGS])
        else:
            gl.warp_specialize([
                (_fwd_consume_persistent, (q_smem, k_smem, v_smem, q_bar, k_ready, v_ready, kv_empty, turn, q_free,
                                           o_desc, LSE, seqlen_q, seqlen_k, nheads, group, n_m, n_bh, band, pid, n_prog,
                                           SCHED, qk_scale, wl, wr, wspan, rng_ptr, drop_p, drop_rows, drop_stride,
                                           WG0, BLOCK_M, BLOCK_N, HEAD_DIM, NUM_STAGES,
                                           NEG_SCALE, CAUSAL, SCHEDULED, WINDOW, DROPOUT, NUM_CONSUMERS, o_ptr, o_rs,
                                           EARLY_Q, LEAN_MASK, tl_ptr, TIMELINE, O_STAGE)),
                (_fwd_consume_persistent, (q_smem, k_smem, v_smem, q_bar, k_ready, v_ready, kv_empty, turn, q_free,
                                           o_desc, LSE, seqlen_q, seqlen_k, nheads, group, n_m, n_bh, band, pid, n_prog,
                                           SCHED, qk_scale, wl, wr, wspan, rng_ptr, drop_p, drop_rows, drop_stride,
                                           WG1, BLOCK_M, BLOCK_N, HEAD_DIM, NUM_STAGES,
                                           NEG_SCALE, CAUSAL, SCHEDULED, WINDOW, DROPOUT, NUM_CONSUMERS, o_ptr, o_rs,
                                           EARLY_Q, LEAN_MASK, tl_ptr, TIMELINE, O_STAGE)),
                (_fwd_load_persistent, (q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_bar, q_free, k_ready, v_ready,
                                        kv_empty, seqlen_q, seqlen_k, nheads, group, n_m, n_bh, band, pid, n_prog,
                                        SCHED, wl, wr, HEAD_DIM, BLOCK_M, BLOCK_N, NUM_STAGES, CAUSAL, SCHEDULED,
                                        WINDOW, NUM_CONSUMERS, EARLY_Q, O_STAGE)),
            ], [4, LOADER_WARPS], [CONSUMER_REGS, LOADER_REGS])
        mbarrier.invalidate(q_free)
    elif NUM_CONSUMERS == 3:
        # CAUSAL, one block a CTA, three 64-row consumers (_fwd_consume_causal3: each its own
        # tile count within the block's n_load, the rest drained; a consumer past the sequence's
        # end drains all n_load). Spelled out as the PERSISTENT one (constexpr constness).
        # Of _tile_coords' results this reads the block's q_row, lse_off, diag and n_load (the
        # union of the consumers' tiles); its n_full0 / n_full1 (96-row halves) go unused.
        WG2b: gl.constexpr = 2
        gl.warp_specialize([
            (_fwd_consume_causal3, (q_smem, k_smem, v_smem, q_bar, k_ready, v_ready, kv_empty, turn, q_free, o_desc,
                                    LSE, q_row, q_col, lse_off, n_load, diag, qk_scale, pid_m, seqlen_q,
                                    WG0, BLOCK_M, BLOCK_N, HEAD_DIM, NUM_STAGES, NEG_SCALE)),
            (_fwd_consume_causal3, (q_smem, k_smem, v_smem, q_bar, k_ready, v_ready, kv_empty, turn, q_free, o_desc,
                                    LSE, q_row, q_col, lse_off, n_load, diag, qk_scale, pid_m, seqlen_q,
                                    WG1, BLOCK_M, BLOCK_N, HEAD_DIM, NUM_STAGES, NEG_SCALE)),
            (_fwd_consume_causal3, (q_smem, k_smem, v_smem, q_bar, k_ready, v_ready, kv_empty, turn, q_free, o_desc,
                                    LSE, q_row, q_col, lse_off, n_load, diag, qk_scale, pid_m, seqlen_q,
                                    WG2b, BLOCK_M, BLOCK_N, HEAD_DIM, NUM_STAGES, NEG_SCALE)),
            (_fwd_load, (q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_bar, k_ready, v_ready, kv_empty,
                         q_row, q_col, kv_row, kv_col, n_load, HALF_M, BLOCK_N, NUM_STAGES, NUM_CONSUMERS)),
        ], [4, 4, LOADER_WARPS], [CONSUMER_REGS_3, CONSUMER_REGS_3, LOADER_REGS])
    elif VARLEN:
        gl.warp_specialize([
            (_fwd_consume, (q_smem, k_smem, v_smem, q_bar, k_ready, v_ready, kv_empty, turn, q_free, o_desc, LSE,
                            q_row, q_col, lse_off, n_load, n_left0, n_full0, diag, wspan, qk_scale, ZERO, ZERO,
                            rng_ptr, drop_p, drop_rows, drop_stride, key0, WG0,
                            HALF_M, BLOCK_N, HEAD_DIM, NUM_STAGES, NEG_SCALE, PINGPONG, CAUSAL, PERSISTENT, WINDOW,
                            DROPOUT, o_ptr, o_rs, NO, NO, tl_ptr, TIMELINE, NO, VARLEN, KEY_BOUND, row_lim,
                            VARLEN_FAST, VARLEN_HALF, PAGED, kv_lim)),
            (_fwd_consume_tail if VARLEN_TAIL else _fwd_consume,
             (q_smem, k_smem, v_smem, q_bar, k_ready, v_ready, kv_empty, turn, q_free, o_desc, LSE,
              q_row, q_col, lse_off, n_load, n_left1, n_full1, diag, wspan, qk_scale, ZERO, ZERO,
              rng_ptr, drop_p, drop_rows, drop_stride, key0, WG1,
              HALF_M, BLOCK_N, HEAD_DIM, NUM_STAGES, NEG_SCALE, PINGPONG, CAUSAL, PERSISTENT, WINDOW,
              DROPOUT, o_ptr, o_rs, NO, NO, tl_ptr, TIMELINE, NO, VARLEN, KEY_BOUND, row_lim,
              VARLEN_FAST, VARLEN_HALF, PAGED, kv_lim)),
            (_fwd_load, (q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_bar, k_ready, v_ready, kv_empty,
                         q_row, q_col, kv_row, kv_col, n_load, HALF_M, BLOCK_N, NUM_STAGES, NUM_CONSUMERS,
                         bt_row, PAGE_SIZE, key0)),
        ], [4, LOADER_WARPS], [CONSUMER_REGS, LOADER_REGS])
    elif OWN_TILES:
        # CAUSAL one block a CTA, 2 consumers, each computing only its rows' tiles (_fwd_consume_own)
        gl.warp_specialize([
            (_fwd_consume_own, (q_smem, k_smem, v_smem, q_bar, k_ready, v_ready, kv_empty, turn, q_free, o_desc, LSE,
                                q_row, q_col, lse_off, n_load, n_full0, diag, qk_scale,
                                WG0, HALF_M, BLOCK_N, HEAD_DIM, NUM_STAGES, NEG_SCALE)),
            (_fwd_consume_own, (q_smem, k_smem, v_smem, q_bar, k_ready, v_ready, kv_empty, turn, q_free, o_desc, LSE,
                                q_row, q_col, lse_off, n_load, n_full1, diag, qk_scale,
                                WG1, HALF_M, BLOCK_N, HEAD_DIM, NUM_STAGES, NEG_SCALE)),
            (_fwd_load, (q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_bar, k_ready, v_ready, kv_empty,
                         q_row, q_col, kv_row, kv_col, n_load, HALF_M, BLOCK_N, NUM_STAGES, NUM_CONSUMERS)),
        ], [4, LOADER_WARPS], [CONSUMER_REGS, LOADER_REGS])
    else:
        # ZERO (module constexpr): t0 and q_phase of the one block
        gl.warp_specialize([
            (_fwd_consume, (q_smem, k_smem, v_smem, q_bar, k_ready, v_ready, kv_empty, turn, q_free, o_desc, LSE,
                            q_row, q_col, lse_off, n_load, n_left0, n_full0, diag, wspan, qk_scale, ZERO, ZERO,
                            rng_ptr, drop_p, drop_rows, drop_stride, key0, WG0,
                            HALF_M, BLOCK_N, HEAD_DIM, NUM_STAGES, NEG_SCALE, PINGPONG, CAUSAL, PERSISTENT, WINDOW,
                            DROPOUT, ZERO, ZERO, NO, LEAN_MASK, tl_ptr, TIMELINE)),
            (_fwd_consume, (q_smem, k_smem, v_smem, q_bar, k_ready, v_ready, kv_empty, turn, q_free, o_desc, LSE,
                            q_row, q_col, lse_off, n_load, n_left1, n_full1, diag, wspan, qk_scale, ZERO, ZERO,
                            rng_ptr, drop_p, drop_rows, drop_stride, key0, WG1,
                            HALF_M, BLOCK_N, HEAD_DIM, NUM_STAGES, NEG_SCALE, PINGPONG, CAUSAL, PERSISTENT, WINDOW,
                            DROPOUT, ZERO, ZERO, NO, LEAN_MASK, tl_ptr, TIMELINE)),
            (_fwd_load, (q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_bar, k_ready, v_ready, kv_empty,
                         q_row, q_col, kv_row, kv_col, n_load, HALF_M, BLOCK_N, NUM_STAGES, NUM_CONSUMERS)),
        ], [4, LOADER_WARPS], [CONSUMER_REGS, LOADER_REGS])

    mbarrier.invalidate(q_bar)
    mbarrier.invalidate(turn.index(0))
    mbarrier.invalidate(turn.index(1))
    for i in gl.static_range(NUM_STAGES):
        mbarrier.invalidate(k_ready.index(i))
        mbarrier.invalidate(v_ready.index(i))
        mbarrier.invalidate(kv_empty.index(i))
    if SPLIT_EMPTY:
        for i in gl.static_range(NUM_STAGES):
            mbarrier.invalidate(kv_empty.index(NUM_STAGES + i))
