"""Tile configurations of the prefill kernels: defaults, autotuning candidates, pruning.

A config is (BLOCK_M, BLOCK_N, num_warps, num_stages). For the forward and dQ
kernels BLOCK_M is the query rows a program owns and BLOCK_N the key rows of a
tile; for the dK/dV kernel BLOCK_N is the key rows a program owns and BLOCK_M the
query rows of a tile.

Tuning modes (FLASHTRITON_AUTOTUNE):
  "0" (default, and what the tests use): the tuned defaults below, no tuning. On the
       H200 they came out of a full sweep (bench/tune.py) and the runners-up were
       within 5-15%, so tuning at run time buys little.
  "1": time TUNER_SHORTLIST once per key (head-dim block, dtype, mask kind,
       sequence-length bucket); a first call in a new bucket pays the tuning,
       capped at launchers/tuning.TUNE_BUDGET_S per kernel.
Sweep candidates (CANDIDATES) pass the pruning rule `prune`; the bench sweeps them.
Under the Triton interpreter small fixed tiles are used, so that the small test
shapes still cross several tiles and every masking path.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import triton


@dataclass(frozen=True)
class Tile:
    block_m: int
    block_n: int
    num_warps: int
    num_stages: int

    def as_triton(self) -> triton.Config:
        return triton.Config({"BLOCK_M": self.block_m, "BLOCK_N": self.block_n},
                             num_warps=self.num_warps, num_stages=self.num_stages)


INTERPRETER_TILE = Tile(32, 32, 4, 1)

# Defaults for Hopper (H200), by kernel and BLOCK_D: the non-spilling tiles of the
# compile report (bench/compile_report.py), then the fastest of the GPU sweep
# (bench/tune.py). Both runs are logged in bench/NOTES.md.
DEFAULTS = {
    "fwd": {16: Tile(128, 64, 4, 4), 32: Tile(128, 64, 4, 4), 64: Tile(128, 64, 4, 4),
            128: Tile(128, 128, 8, 3), 256: Tile(128, 64, 8, 2)},
    # N <= SHORT_SEQLEN. (128, 64, 8, 4) before 2026-11-30; graph replays at D = 64, N = 512
    # / 1k, 16k tokens (bench/gpu/s12_fwd_short_ab.py): non-causal 186 / 238 -> 313 / 370
    # TFLOP/s, causal 178 / 251 -> 191 / 269 (FA2 CUDA 262 / 288 non-causal).
    # D = 128 (session 13, s13_tiles_ab.py fwd128; unmasked D = 128 calls up to 1k run fwd.py,
    # launchers.policy.FWD_SHORT_ON_FWD_PY): (64, 64, 4, 3) 372 / 424 at 512 / 1k; (128,
    # 64, 8, 3) 294 / 365; (128, 64, 4, 3) 265 / 304; (64, 128, 4, 3) 253 / 335.
    "fwd_short": {16: Tile(128, 64, 4, 3), 32: Tile(128, 64, 4, 3), 64: Tile(128, 64, 4, 3),
                  128: Tile(64, 64, 4, 3)},
    "dkdv": {16: Tile(32, 128, 4, 2), 32: Tile(32, 128, 4, 2), 64: Tile(32, 128, 4, 2),
             128: Tile(64, 64, 4, 2), 256: Tile(128, 64, 8, 1)},
    "dq": {16: Tile(128, 64, 8, 3), 32: Tile(128, 64, 8, 3), 64: Tile(128, 64, 8, 3),
           128: Tile(128, 64, 8, 3), 256: Tile(128, 32, 8, 3)},
    # dK/dV at D = 256: (128, 64, 8, 1) in the query-rows layout (launchers.backward.
    # DKDV_QUERY_ROWS), 2026-11-30: backward 9.67 / 4.70 ms at N = 8k (causal) against
    # 10.47 / 6.20 for (64, 64, 8, 2) in the key-rows layout (bench/gpu/s11_dkdv_ab.py).
    # Sliding windows of at most WINDOW_BAND keys: sweep of 2026-11-29 (H200, window
    # (1024, 0), N = 16k, `bench.tune --window 1024 --seqlen 16384`): fwd 336 band
    # TFLOP/s against 285 for the default tile, dq 243 against 234 (its tile retimed in
    # session 22: below); dK/dV's default won (again in session 22: (64, 128, 8, 2) 1.8x
    # and (128, 64, 8, 2) 1.15x its backward time).
    "fwd_window": {128: Tile(64, 64, 4, 3)},
    # Causal (or windowed) calls with N <= SHORT_MASKED_SEQLEN["fwd"] at D = 128 (fwd.py;
    # unmasked ones take fwd_ws.py): graph replays, 16k tokens, 2026-11-30 (bench/gpu/
    # s12_fwd_short_ab.py 128c and 128c-long): the default (128, 128, 8, 3) 185 / 273 / 357
    # / 418 / 456 TFLOP/s at N = 512 / 1k / 2k / 4k / 8k, this tile 241 / 340 / 383 / 465 /
    # 445; (128, 64, 4 or 8, 3) 177-182 / 228-266, (64, 128, 4, 3) 141 / 217 at 512 / 1k.
    # D = 64 (session 13, s12_fwd_short_ab.py 64c and 64c-long, each tile twice in
    # alternating order): against the short default (128, 64, 4, 3) 192 / 268 -> 233 / 311
    # at N = 512 / 1k; against DEFAULTS["fwd"] (128, 64, 4, 4) 327 / 370 -> 371 / 394 at
    # 2k / 4k; (64, 64, 4, 4) and 32- or 128-key tiles slower.
    # D = 256 (session 13, s13_tiles_ab.py fwd256; fwd.py runs causal D = 256 only below
    # launchers.policy.FWD_SHORT_ON_FWD_PY's 512 or where fwd_ws.py cannot): 242 / 313
    # TFLOP/s at N = 512 / 1k against (128, 64, 8, 2)'s 202 / 265; 64-key tiles 152-204.
    "fwd_short_masked": {128: Tile(64, 64, 4, 3), 64: Tile(64, 64, 4, 3), 256: Tile(64, 32, 4, 2)},
    # Masked calls (causal or any window) at D = 64: dK/dV in the query-rows layout
    # (launchers.backward.DKDV_QUERY_ROWS), 2026-11-30, against (32, 128, 4, 2) in key rows:
    # causal backward +3 / +9 / +10 / +10% at N = 512 / 1k / 2k / 4k (prefill grids, 16k
    # tokens), window (1024, 0) at 16k +10% (bench/gpu/s11_dkdv_ab.py). Unmasked calls keep
    # their tile: non-causal at 1k it timed 15% slower, in an A/B with the plans off, where
    # such calls are partly host-bound (bench/NOTES.md, "Session 11": not conclusive).
    "dkdv_masked": {64: Tile(64, 64, 4, 3)},
    # D = 256 up to SHORT_SEQLEN: (64, 32, 4, 2) in the query-rows layout against the
    # default (128, 64, 8, 1), backward TFLOP/s (bf16, 16k tokens, H = 8, dQ at its
    # default, two rounds; bench/gpu/s19_d256_bwd_tiles.py, H200, 2026-11-30): non-causal
    # 157 -> 162 / 194 -> 200 at N = 512 / 1k, causal 100 -> 104 / 146 -> 154; (64, 64, 8,
    # 2) level, 4-warp or one-stage 64-row tiles 10-25% slower; dQ's default was the best.
    "dkdv_short": {256: Tile(64, 32, 4, 2)},
    # dQ under a window since session 22, with host-made descriptors (launchers.common.
    # host_desc_default): window (1024, 0) at 16k backward 1174-1183 us against 1243-1245
    # for session 4's (64, 32, 4, 2), (128, 64, 8, 3) 1212-1217, (128, 32, 8, 2) 1380; Flex
    # 1248 in the same process (bench/gpu/s22_window_tiles_ab.py, H200, 2026-11-30).
    "dq_window": {128: Tile(64, 64, 4, 2)},
    # The paged varlen forward (kernels/fwd_paged.py: pointer loads through the block table,
    # pipelined by Triton). First choice (session 49): fwd.py's short-sequence tiles, 64-key
    # tiles so that pages of 64 keys or more need one table lookup a tile; measured in
    # bench/NOTES.md, "Session 49".
    "fwd_paged": {16: Tile(128, 64, 4, 3), 32: Tile(128, 64, 4, 3), 64: Tile(128, 64, 4, 3),
                  128: Tile(128, 64, 8, 3), 256: Tile(64, 64, 4, 2)},
}

# float32 inputs. Their dots run on FMA units (true fp32, no tensor cores, unless
# FLASHTRITON_ALLOW_TF32=1), and the bf16 tiles above neither fit shared memory
# (2026-11-29, H200: the D = 128 forward tile asked for 320 KiB of the 227 KiB,
# OutOfResources) nor registers: compiled for sm_90a, the first fp32 tiles that fit
# shared memory spilled 30-390 KB per thread and took 10-50 s in ptxas each, which
# made the GPU test run time out. These small tiles spill 5-12 KB and compile in
# 2-5 s (python -m flashtriton.bench.compile_report, logged in bench/NOTES.md).
DEFAULTS_FP32 = {
    "fwd": {16: Tile(64, 32, 4, 2), 32: Tile(64, 32, 4, 2), 64: Tile(64, 32, 4, 2),
            128: Tile(64, 32, 4, 2), 256: Tile(32, 32, 4, 2)},
    "dkdv": {16: Tile(16, 32, 4, 2), 32: Tile(16, 32, 4, 2), 64: Tile(16, 32, 4, 2),
             128: Tile(16, 32, 4, 2), 256: Tile(16, 16, 4, 2)},
    "dq": {16: Tile(16, 32, 4, 2), 32: Tile(16, 32, 4, 2), 64: Tile(16, 32, 4, 2),
           128: Tile(16, 32, 4, 2), 256: Tile(16, 16, 4, 2)},
    "fwd_paged": {16: Tile(64, 32, 4, 2), 32: Tile(64, 32, 4, 2), 64: Tile(64, 32, 4, 2),
                  128: Tile(32, 32, 8, 2), 256: Tile(32, 32, 8, 2)},
    # fwd_paged at 128 / 256: 32 x 32 x 8 warps with maxnreg (session 70, H100, causal, 8 x 1024 queries and keys):
    # 5.8 / 15.4 ms against 8.9 / 17.2 for the 64 x 32 x 4 / 32 x 32 x 4 tile; on the dense forward the same tile
    # lost (0.5-0.8x at D = 64 / 128) and at 64 the paged forward too (0.69x).
    # Forwards of at most FP32_FEW_ROWS query rows (max_seqlen_q for varlen; default_tile's rows): the "fwd" tile
    # computed 64 rows for one (flash_attn_func at Nq = 1: 310 us forward at D = 64, Nk = 1k, B = 1, Hq = 32, H100,
    # session 60) and spilled more: compiled for sm_90a (QK_LEVELS, causal, LSE_LOG2; 2026-12-05) 3.7 / 9.1 / 137 /
    # 16.7 KB a thread at D = 64 / 128 / 192 / 256, against 0 / 1.6 / 6.6 / 6.6 KB at 16 x 32.
    # The paged forward ("fwd_paged") takes it too since session 69: at one query row (QK_LEVELS, causal, pages of
    # 16, sm_90a) its 64 x 32 / 32 x 32 tile had a stack frame of 5.7 / 8.9 / 11.3 / 11.3 KB a thread at D = 64 /
    # 128 / 192 / 256 (against 0.04 / 0.7 / 2.7 / 2.7 KB at 16 x 32). The driver reserves that for every resident
    # thread of the card (~3 GB a process at 11 KB), and ten test processes ran an H100 out of memory at launch.
    "fwd_few_rows": {16: Tile(16, 32, 4, 2), 32: Tile(16, 32, 4, 2), 64: Tile(16, 32, 4, 2),
                     128: Tile(16, 32, 4, 2), 256: Tile(16, 32, 4, 2)},
}
FP32_FEW_ROWS = 16

# float32 inputs whose dots run on the tensor cores: the dense forward and backward tiles, where listed (the rest:
# DEFAULTS_FP32). DEFAULTS_FP32_TC for FLASHTRITON_ALLOW_TF32=1 (tf32), DEFAULTS_FP32_X3 below for =x3 (Triton's
# tf32x3, three tf32 products a dot; session 71's single table, split in session 72). The FMA tiles above
# are too small for the MMA path: at D = 128 (H100, session 71, B 2, H 16, N 2048, bench/gpu/s71_tf32x3.py) tf32x3
# ran forward + backward in 51.7 ms with them and 13.3 ms with 32 x 128 x 8 (dK dV) / 128 x 32 x 8 (dQ), the
# forward 2.29 ms against 1.66 at 128 x 64 x 8.
DEFAULTS_FP32_TC = {
    "fwd": {16: Tile(128, 64, 8, 3), 32: Tile(128, 64, 8, 3), 64: Tile(128, 64, 8, 3), 128: Tile(128, 64, 8, 2),
            256: Tile(128, 64, 8, 1)},
    "dkdv": {16: Tile(64, 128, 8, 2), 32: Tile(64, 128, 8, 2), 64: Tile(64, 128, 8, 2), 128: Tile(32, 128, 8, 2),
             256: Tile(16, 64, 4, 2)},
    "dq": {16: Tile(128, 64, 8, 2), 32: Tile(128, 64, 8, 2), 64: Tile(128, 64, 8, 2), 128: Tile(128, 32, 8, 2),
           256: Tile(64, 16, 4, 2)},
}
# tf32x3's own table: its dots keep far less in shared memory than tf32's (sm_90a compiles, session 72: dK dV
# 32 x 64 x 4 s1 at D = 192 asks 128 KiB as tf32x3, 256 KiB as tf32, over the 227 KiB there), so wider 1-stage tiles
# fit it that do not fit tf32 (tests/test_fp32.py::test_regression_fp32_tc_tiles_compile_clean).
DEFAULTS_FP32_X3 = {
    "fwd": {**DEFAULTS_FP32_TC["fwd"], 128: Tile(128, 128, 8, 1), 256: Tile(128, 64, 8, 1)},
    "dkdv": {**DEFAULTS_FP32_TC["dkdv"], 128: Tile(64, 128, 8, 1), 256: Tile(32, 64, 4, 1)},
    "dq": {**DEFAULTS_FP32_TC["dq"], 128: Tile(128, 64, 8, 1), 256: Tile(128, 64, 8, 1)},
}
FP32_TC_TABLES = {"tf32": DEFAULTS_FP32_TC, "tf32x3": DEFAULTS_FP32_X3}   # dot precision -> its tiles
# Session 71's sweep (H100, tf32x3, B 2, H 16, N 2048, non-causal; bench/gpu/s71_x3_tiles.py, bench/NOTES.md
# "Session 71"; block_d 16 / 32 take 64's, not timed) chose block_d 64 / 128 and plain tf32 took the same table:
# - block_d 64: forward 128 x 64 x 8, 3 stages 0.590 ms (2 stages 0.621, 128 x 128 x 8 0.615, the FMA tile 0.814);
#   forward + backward dK dV 64 x 128 x 8 / dQ 128 x 64 x 8 3.19 ms (32 x 128 / 128 x 32 and 32 x 64 / 64 x 32 3.44);
# - block_d 128: forward 128 x 64 x 8 1.69 ms (128 x 32 x 8 1.87, the FMA tile 2.32); forward + backward 32 x 128 x 8
#   / 128 x 32 x 8 12.8 ms (32 x 64 x 4 / 64 x 32 x 4 15.6, 64 x 64 x 4 both 16.3, the FMA tiles 51.7);
# - block_d 256 (D = 192): forward 64 x 32 x 4 7.0 ms (64 x 32 x 8 14.5, 64 x 16 x 4 15.5, the FMA tile 20.6);
#   forward + backward 16 x 64 x 4 / 64 x 16 x 4 99.3 ms (32 x 32 x 4 both 369; ieee 218). The 8-warp pair 16 x 64
#   x 8 / 64 x 16 x 8 hit an illegal memory access there: compiled, it alone has a wgmma of N = 8 (the 16-wide score
#   tile over two warps). Session 72 (H200, bench/gpu/s71_ima_repro.py, each in a fresh process): the pair faults
#   as tf32x3 with either kernel alone on it, not as ieee or tf32 - the N = 8 tf32 wgmma fault of Triton's
#   (triton-lang/triton#10629) in tf32x3's lowering. Rule: 8-warp tiles here keep both sides >= 32
#   (tests/test_fp32.py::test_regression_fp32_tc_tiles_compile_clean).
# Session 72 (H200, bench/gpu/s72_x3_d192.py, s72_x3_tiles2.py; NOTES "Session 72"): 1-stage tiles.
# - tf32x3 block_d 256: forward 128 x 32 x 8 s1 5.99 ms at D = 192 (64 x 32 x 4 s2 7.02, 64 x 64 x 4 s1 6.51);
#   forward + backward 32 x 64 x 4 s1 / 64 x 32 x 4 s1 45.0 ms (16 x 64 x 4 / 64 x 16 x 4 85.9; 32 x 64 x 8 s1 /
#   64 x 32 x 8 s1 57.0); D = 256 6.04 / 44.2 ms (old 7.12 / 85.8), causal D = 192 3.82 / 29.4 (old 4.05 / 49.1).
# - tf32x3 block_d 128: forward 128 x 128 x 8 s1 1.59 ms (128 x 64 x 8 s2 1.71); forward + backward 64 x 128 x 8 s1
#   / 128 x 64 x 8 s1 9.51 ms (the tf32 table's 11.33).
# - tf32 block_d 256: forward 128 x 32 x 8 s1 1.85 ms at D = 192 (64 x 32 x 4 2.87; H200); then (H100,
#   bench/gpu/s72_tc_tables.py) 128 x 64 x 8 s1 1.47 ms (128 x 32 x 8 s1 1.79, 64 x 64 x 4 s1 2.00), taken in
#   session 73 after test_tf32_every_head_dim_gpu passed on it (below); backward stays on the old tiles (dQ 64 x 32
#   x 4 s1 13.83 ms against 13.97: level; 32 x 64 x 4 s1 dK dV does not fit tf32).
#   tf32 block_d 128: the table stands (forward 128 x 128 x 8 s1 0.714 ms against 0.655; backward 1-stage pairs
#   2.80-4.52 against 2.68).
# Session 73 (H100 80GB HBM3, bench/gpu/s73a.sh / s73b.sh, s72_tc_tables.py call4 / bd64; NOTES "Session 73"):
# - block_d 256 forward 128 x 64 x 8 s1 for both (196616 B compiled as tf32, 131200 as tf32x3): tf32 1.47 ms against
#   128 x 32 x 8 s1's 1.79 at D = 192 and 256; tf32x3 4.42 against 6.80 (D = 192) / 6.88 (D = 256), forward +
#   backward 46.5 against 48.9 ms (D = 192). 128 x 64 x 4 s1 9.50 ms as tf32x3 (D = 256).
# - tf32x3 block_d 64: the table stands (forward 128 x 64 x 8 s3 0.570 ms, 128 x 128 x 8 s2 / s1 0.615 / 0.708;
#   forward + backward 3.10 ms, 1-stage dK dV / dQ 128 x 128 x 8 4.26, 64 x 128 / 128 x 64 x 8 3.46).
# Session 74 (H100 80GB HBM3, bench/gpu/s74c.sh / s74d.sh, s72_tc_tables.py bwd256 / dkdv256; NOTES "Session 74"):
# - tf32x3 block_d 256 dQ 128 x 64 x 8 s1 (131080 B): forward + backward 41.1 ms against 64 x 32 x 4 s1's 47.0 at D
#   = 192, 41.5 against 47.3 at D = 256. dK dV stands at 32 x 64 x 4 s1: 64 x 64 x 4 s1 level, 32 x 64 x 8 s1 43.7
#   ms, 64 x 32 x 4 / 8 s1 192-210 ms. As tf32 these dQ tiles do not fit (328-459 KB of shared memory asked).

# ptxas's register budget (.maxnreg, Triton's maxnreg option) for true-fp32 (ieee) kernels: kernel (DEFAULTS_FP32
# name) -> the block_d it applies at, all with 255 registers. The fp32 FMA dots want more than 255 registers, and
# ptxas, left to itself, sizes a kernel that must spill for occupancy: 168 / 128 / 64 registers (3 / 2 / 4 CTAs a
# SM) and, for some tiles, 32, which puts tens of KB of spill traffic a thread in the key loop (sm_90a offline,
# session 69, bench/gpu/s69_stack_audit.py). Chosen by GPU timing (H100, sessions 69-70, bench/NOTES.md "Session
# 70"; outputs bitwise equal with and without):
# - the paged forward at block_d 128 / 256 (ptxas alone: 32 registers, 35 / 46 KB of spill stores / loads at
#   D = 128): 5.2x / 5.9x faster with its old tile, and the 32 x 32 x 8 tile above 1.5x / 1.1x more;
# - the dQ at 128 / 256: forward + backward 1.04x at D = 128, 1.46x / 1.49x at D = 192 (causal / not);
# Not listed, measured: the forward at 256 (6-9% slower: 255 registers leave one CTA a SM where ptxas's 168 fit
# two), at 64 / 128 (within 4%), the dK dV at 128 / 256 (within 1%), the paged forward at 64 (within 1%).
FP32_MAXNREG_AT = {"fwd_paged": (128, 256), "dq": (128, 256)}
FP32_MAXNREG = 255


def _load_tile_overrides():
    """FLASHTRITON_TILES=path.json replaces defaults: {"fwd": {"128": [BM, BN, warps, stages]}, ...}.
    bench/tune.py writes such a file (tiles.json) from its sweep. Keys name DEFAULTS tables,
    so a "dkdv" entry at 256 does not reach calls up to SHORT_SEQLEN, which read
    "dkdv_short" (default_table picks the table per call)."""
    path = os.environ.get("FLASHTRITON_TILES")
    if not path:
        return
    import json
    with open(path) as f:
        table = json.load(f)
    for kernel, by_d in table.items():
        for d, tile in by_d.items():
            DEFAULTS.setdefault(kernel, {})[int(d)] = Tile(*tile)


_load_tile_overrides()

SMEM_BYTES = 227 * 1024  # Hopper: dynamic shared memory per block


def _smem_estimate(kernel: str, t: Tile, block_d: int, elem: int) -> int:
    """Bytes of shared memory the pipelined tiles need (operands only)."""
    if kernel == "fwd":     # Q resident, K and V tiles per stage
        return elem * block_d * (t.block_m + 2 * t.num_stages * t.block_n)
    if kernel == "dq":      # Q, dO resident, K and V tiles per stage
        return elem * block_d * (2 * t.block_m + 2 * t.num_stages * t.block_n)
    # dkdv: K, V resident, Q and dO tiles per stage
    return elem * block_d * (2 * t.block_n + 2 * t.num_stages * t.block_m)


def live_values_per_thread(kernel: str, t: Tile, block_d: int) -> float:
    """fp32 tile values each thread keeps live across the inner loop: the accumulators
    plus the score-sized tiles (and, for dK/dV, the resident K and V tiles)."""
    threads = 32 * t.num_warps
    if kernel == "fwd":     # acc (BM, D) + s/p (BM, BN)
        return (t.block_m * block_d + t.block_m * t.block_n) / threads
    if kernel == "dq":      # dq (BM, D) + s/p and dp (BM, BN)
        return (t.block_m * block_d + 2 * t.block_m * t.block_n) / threads
    # dkdv: dk, dv (BN, D) + k, v (BN, D) in bf16 + s/p and dp (BN, BM)
    return (3 * t.block_n * block_d + 2 * t.block_n * t.block_m) / threads


# Limits of live_values_per_thread. fwd and dq: calibrated on 2026-11-29 against ptxas
# for sm_90a (Triton 3.6.0, every candidate at D = 64, 128, 256): at or under 160 no
# tile spilled; the first over it spilled 12 to 3,500 bytes. dK/dV: every tile with a
# 64-row key block or more spills a little at D = 128 (ptxas: 172 B to 1.5 KB, also
# with pointer loads instead of TMA), yet larger tiles can still win (FlexAttention's
# Hopper default is such a tile), so its limit only drops the hopeless ones.
LIVE_LIMIT = {"fwd": 160, "dq": 160, "dkdv": 256}


def prune(kernel: str, tiles, block_d: int, elem: int = 2):
    """Pruning rule: drop a tile whose pipelined operands overflow shared memory, whose
    live fp32 values per thread exceed LIVE_LIMIT (it would spill registers), or, for
    dK/dV, whose key block is under 64 rows (its transposed dots then have M < 64 and
    compile to mma.sync, HMMA, instead of Hopper's warpgroup wgmma)."""
    return [t for t in tiles
            if _smem_estimate(kernel, t, block_d, elem) <= SMEM_BYTES
            and live_values_per_thread(kernel, t, block_d) <= LIVE_LIMIT[kernel]
            and not (kernel == "dkdv" and t.block_n < 64)]


CANDIDATES = {
    "fwd": [Tile(bm, bn, w, s) for bm in (64, 128) for bn in (64, 128) for w in (4, 8) for s in (2, 3, 4)],
    "dkdv": [Tile(bm, bn, w, s) for bm in (16, 32, 64) for bn in (64, 128) for w in (4, 8) for s in (2, 3)],
    "dq": [Tile(bm, bn, w, s) for bm in (64, 128) for bn in (32, 64) for w in (4, 8) for s in (2, 3)],
}


# What FLASHTRITON_AUTOTUNE=1 times: the three fastest tiles of the H200 sweeps
# (bench/gpu/tune-r1.txt, call 3 in bench/NOTES.md) per kernel and head dim; all were
# within 5-15% of each other, so a longer list would cost compile time for little.
# Head dims without a list keep their default (nothing to tune).
TUNER_SHORTLIST = {
    "fwd": {64: [Tile(128, 64, 4, 4), Tile(128, 64, 4, 3), Tile(128, 64, 8, 4)],
            128: [Tile(128, 128, 8, 3), Tile(128, 64, 8, 3), Tile(128, 64, 8, 4)]},
    "dkdv": {64: [Tile(32, 128, 4, 2), Tile(32, 64, 4, 2), Tile(32, 64, 4, 3)],
             128: [Tile(64, 64, 4, 2), Tile(32, 64, 4, 3), Tile(64, 128, 8, 2)]},
    "dq": {64: [Tile(128, 64, 8, 3), Tile(64, 64, 4, 2), Tile(128, 32, 4, 3)],
           128: [Tile(128, 64, 8, 3), Tile(64, 32, 4, 3), Tile(64, 64, 4, 2)]},
}


def tuner_candidates(kernel: str, block_d: int, seqlen: int, elem: int = 2, masked: bool = False,
                     fp32_dots: str = "ieee"):
    """The tiles the autotuner may pick (the GPU tests run every one of them).
    float32 keeps its one default: its FMA dots make big tiles spill and compile
    for tens of seconds (DEFAULTS_FP32); fp32_dots as default_tile takes it."""
    if elem == 4:
        return [default_tile(kernel, block_d, seqlen, elem, fp32_dots=fp32_dots)]
    tiles = [t for t in TUNER_SHORTLIST.get(kernel, {}).get(block_d, [])
             if _smem_estimate(kernel, t, block_d, elem) <= SMEM_BYTES]
    default = default_tile(kernel, block_d, seqlen, elem, masked=masked)
    return tiles if default in tiles else [default] + tiles


def autotune_enabled() -> bool:
    return os.environ.get("FLASHTRITON_AUTOTUNE", "0") == "1"


def seqlen_bucket(n: int) -> int:
    """Sequence lengths share a tuning result within a power-of-two bucket, 128 to 16k."""
    return min(max(triton.next_power_of_2(max(n, 1)), 128), 16384)


# Sequences up to SHORT_SEQLEN use the "<kernel>_short" defaults where present: a short
# program cannot hide a deep pipeline's prologue, and tiles with less shared memory let
# two programs share an SM.
SHORT_SEQLEN = 1024


# Masked calls use the "<kernel>_short_masked" defaults up to this length (default
# SHORT_SEQLEN): the causal forward's 64-row tile leads up to 4k (see DEFAULTS).
SHORT_MASKED_SEQLEN = {"fwd": 4096}


# A sliding window whose band (keys a row sees) is at most WINDOW_BAND uses the
# "<kernel>_window" defaults where present: each program then runs only a few tiles,
# so its prologue and epilogue weigh more than in a long causal or full program.
WINDOW_BAND = 4096


# The DEFAULTS tables default_table may pick for a kernel, by suffix.
DEFAULT_TABLES = ("", "_window", "_short_masked", "_masked", "_short")


def default_table(kernel: str, block_d: int, seqlen: int, window_band: int | None = None,
                  masked: bool = False) -> str:
    """The DEFAULTS table whose entry default_tile returns (16-bit inputs): the window's
    for a sliding window of at most WINDOW_BAND keys, then for masked calls (causal or
    windowed) "<kernel>_short_masked" up to SHORT_MASKED_SEQLEN (else SHORT_SEQLEN) and
    "<kernel>_masked", then "<kernel>_short" up to SHORT_SEQLEN, then "<kernel>"; each
    where it has block_d."""
    def has(suffix):
        return block_d in DEFAULTS.get(kernel + suffix, {})
    if window_band is not None and window_band <= WINDOW_BAND and has("_window"):
        return kernel + "_window"
    if masked and seqlen <= SHORT_MASKED_SEQLEN.get(kernel, SHORT_SEQLEN) and has("_short_masked"):
        return kernel + "_short_masked"
    if masked and has("_masked"):
        return kernel + "_masked"
    if seqlen <= SHORT_SEQLEN and has("_short"):
        return kernel + "_short"
    return kernel


def default_tile(kernel: str, block_d: int, seqlen: int, elem: int = 2, window_band: int | None = None,
                 masked: bool = False, rows: int | None = None, fp32_dots: str = "ieee") -> Tile:
    """The tile used without tuning; elem is the input's bytes per element, window_band
    the keys a row sees under a sliding window (None: no window), masked whether the call
    is causal or windowed, rows the forward's query rows (max_seqlen_q; None: not known),
    fp32_dots the float32 dots' precision ("ieee"; "tf32" / "tf32x3": the tensor-core tables, FP32_TC_TABLES).
    16-bit inputs: the entry of default_table's table."""
    if elem == 4:
        if kernel in ("fwd", "fwd_paged") and rows is not None and rows <= FP32_FEW_ROWS:
            return DEFAULTS_FP32["fwd_few_rows"][block_d]
        table = FP32_TC_TABLES.get(fp32_dots, {}).get(kernel, {})
        if block_d in table:
            return table[block_d]
        return DEFAULTS_FP32[kernel][block_d]
    return DEFAULTS[default_table(kernel, block_d, seqlen, window_band, masked)][block_d]


def sweep_candidates(kernel: str, block_d: int, elem: int):
    """Every tile bench/tune.py sweeps: CANDIDATES after the pruning rule."""
    return prune(kernel, CANDIDATES[kernel], block_d, elem)
