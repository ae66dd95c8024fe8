"""Where the prefill launchers run the warp-specialized kernels (kernels/fwd_ws.py,
bwd_ws.py and their varlen versions): the rules (warp_spec_mode and the warp_spec_*
predicates), the FLASHTRITON_WARP_SPEC switch and the kernels' tile tables, with the
measurements behind them."""
from __future__ import annotations

import dataclasses
import functools
import math
import os

import torch

from ..kernels import configs
from ..kernels.fwd_gluon import CONSUMERS3_CONFIG as GLUON_CONSUMERS3_TILES
from ..kernels.fwd_gluon import DEFAULT_CONFIG as GLUON_TILES
from ..kernels.fwd_gluon import PLAIN_CAUSAL_ONLY as GLUON_PLAIN_CAUSAL_ONLY
from . import plans
from .common import AttnParams, _flat_view, interpreting, sm_count
from ..kernels.bwd_gluon_d256 import D256_CONFIG as GLUON_BWD_D256_TILE
from ..kernels.bwd_gluon_fused import FUSED_CONFIG, FUSED_WIDE_CONFIG
from .forward_gluon import rows_view_ok
from .sharing import gpu_shared

# The warp-specialized forward (kernels/fwd_ws.py): its tile per BLOCK_D. num_warps=4 is
# what Triton's Hopper pass turns into one producer and two consumer warpgroups (12
# warps); 2 stages (3 overflow shared memory at 128 x 128: 257 KB). D = 64: one tile a
# program it lost to fwd.py at N >= 2k (327-383 against 354-405 TFLOP/s, H200, 2026-11-29,
# bench/gpu/s6_ws_ab.py; 128 x 64 tiles gave wrong results under the specialization then),
# so it runs only persistent and unmasked (WS_FWD_PERSISTENT_PLAIN_ONLY).
# D = 256: 128 x 128 needs 263 KB of shared memory; 128 x 64 with one stage fits (197 KB,
# 12 warps, no spills) and is right: 486 / 550 / 585 / 613 TFLOP/s at N = 1k / 2k / 4k /
# 16k against 353 / 383 / 401 / 406 for fwd.py and 308-326 for FA2's CUDA kernel
# (bench/gpu/s8_d256_fwd_ab.py, H200, 2026-11-29); 128 x 32 with 2 stages 402-490, with
# 3 stages NaN.
WARP_SPEC_TILES = {64: configs.Tile(128, 128, 4, 2), 128: configs.Tile(128, 128, 4, 2),
                   256: configs.Tile(128, 64, 4, 1)}
# BLOCK_D -> the shortest max(Nq, Nk) from which its fwd_ws.py takes dense unmasked
# forwards without dropout, and only those that launch persistent (more query blocks than
# SMs, q / k / v with a common._flat_view: persistent_only_ok); masks and dropout stay on
# fwd.py (not measured at D = 64) but under FLASHTRITON_WARP_SPEC=1 (the tests); varlen
# never (WS_VARLEN_BLOCK_DS). D = 64 (128, 128, 4, 2): 168 registers, no spill, 115 KB of
# shared memory (sm_90a). H200, 2026-11-30, 16k tokens, H = 32, graph replays
# (bench/gpu/s22_short_fwd_ab.py): non-causal 348-350 / 382-385 / 394-404 / 403-410 /
# 416-417 TFLOP/s at N = 512 / 1k / 2k / 4k / 16k against fwd.py's 312-317 / 370-375 /
# 384 / 403-406 / 417; causal lost (208 / 263 / 303 / 328 / 346 against 230-235 / 309-313
# / 357-360 / 378-388 / 409-413), and 128 x 64 tiles lost everywhere (1 or 2 programs an SM).
WS_FWD_PERSISTENT_PLAIN_ONLY = {64: 512}
# BLOCK_Ds whose varlen calls take the warp-specialized kernels, per kernel: "fwd"
# (fwd_ws_varlen.py) and "bwd" (bwd_ws_varlen.py, where launchers.backward also allows).
# D = 128 both, measured in session 7. D = 256 forward since session 23: 16k tokens in 8
# random lengths 128..4096, H = 8, bf16, non-causal, forward TFLOP/s two rounds: 513-519
# against fwd.py's 464-468, the same error against float64 (H200, 2026-12-01,
# bench/gpu/s23_varlen_d256_ab.py). Not the D = 256 backward, which has no
# warp-specialized tile (until session 22 a varlen backward there looked one up, a
# KeyError on Hopper found by review: tests/test_varlen.py::
# test_regression_varlen_d256_warp_spec); not D = 64 (WS_FWD_PERSISTENT_PLAIN_ONLY).
WS_VARLEN_BLOCK_DS = {"fwd": {128, 256}, "bwd": {128}}
# BLOCK_D -> the shortest min(Nq, Nk) from which an unmasked dense forward takes the
# hand-scheduled Gluon kernel (kernels/fwd_gluon.py) instead of fwd_ws.py. D = 128,
# session 23 (H200, 2026-12-01, bf16, 16k tokens, H = 16, kernel-only TFLOP/s against
# fwd_ws.py through flash_attn_func, two rounds; bench/gpu/s23_gluon_fwd_ab.py, s23/call6):
# 565-575 / 581-586 / 571-613 against 547-548 / 548 / 540-553 at N = 4k / 8k / 16k, outputs
# bitwise equal; at 1k / 2k 489-490 / 536-539 against 481-521 / 519-530 (one tile a
# program, no persistent loop yet: not taken there). D = 64 (3 stages; H = 32, graph
# replays, s23/call8, bench/gpu/s23_gluon_causal_ab.py d64): 16k 441 / 441 against the
# library's 425 / 425 (fwd_ws.py), 4k 424 / 367 against 424 / 402 (4 stages 423 / 420,
# 6 stages 415 / 414), outputs bitwise equal: taken from 16k only.
# Session 24 (H200, 2026-12-01, the PERSISTENT kernel, GLUON_FWD_PERSISTENT; graph
# replays, two rounds, bench/gpu/s24_route_ab.py, s24/call3), against fwd_ws.py as
# routed before: D = 128 1k 529 / 521 against 504 / 501, 2k 591 / 526 against 529 / 535,
# 4k 623 / 608 against 549 / 553, 16k 647 / 641 against 559 / 556; 512 439 / 436 against
# 459 / 454 (and eager, its host path not replayable, 165 / 363 against 457 / 452): from
# 1k. D = 64: 4k 430 / 426 against 411 / 409, 16k 449 / 445 against 427 / 422; 2k 410 /
# 387 against 413 / 409, 1k 375 / 377 against 391 / 385: from 4k.
# Session 29 (three consumers at D = 64, GLUON_FWD_CONSUMERS; graph replays, two rounds,
# bench/gpu/s29_gluon_fwd_3wg_ab.py, s29/call1-2): 2k 456 / 458 (fwd_ws.py 413 / 409 above),
# 1k 380 / 391 (fwd_ws.py 391 / 385: level, not taken): D = 64 from 2k. That 2k holds for
# the three-consumer kernel only (the two-consumer one measured level with fwd_ws.py there):
# with GLUON_FWD_CONSUMERS[64] back at 2 or GLUON_FWD_PERSISTENT["plain"] off, set 4096 again.
# D = 256 (session 32, the kernel's D = 256 tile: BLOCK_N 64 x 2 stages with SPLIT_EMPTY, a
# session-31 helper's; H200, 2026-12-02, bf16, H = 8, 16k tokens, graph replays, two rounds,
# bench/gpu/s32_gluon_fwd_d256_ab.py, s32/callA), PERSISTENT against the route before (fwd_ws.py)
# and cuDNN: 2k 686 / 673 against 570 / 562 (cuDNN 646 / 644), 4k 708 / 684 against 583 / 589
# (658 / 664), 16k 729 / 721 against 613 / 611 (674 / 686); outputs bitwise equal to fwd_ws.py's.
# Predicted 0.88-0.98x cuDNN: 1.06-1.07x. Then 1k (s32/callF, the same script): 611 / 599 against
# 517 / 506 (cuDNN 605 / 584): from 1k. Session 33 (s33/callC, bench/gpu/s32_gluon_fwd_d256_ab.py
# with S32_CASES=512,c512,c1024, H = 8, 16k tokens, graph replays, two rounds): 512 519 / 510
# against fwd_ws.py's 434 / 433 (cuDNN 516 / 497; without SPLIT_EMPTY 394): from 512.
# plans.clear() after changing this table.
GLUON_FWD_MIN_N = {128: 1024, 64: 2048, 256: 512}
# The same for the library's canonical causal forwards (window_right == 0, no left
# window): BLOCK_D -> the shortest min(Nq, Nk) from which they take the Gluon kernel's
# CAUSAL variant (fully visible key tiles unmasked, the diagonal ones masked, heaviest
# query blocks first). D = 128, H200, 2026-12-01, bf16, 16k tokens, H = 16, graph replays,
# two rounds (bench/gpu/s23_gluon_causal_ab.py causal, s23/call8): 8k 529 / 565 against
# the library's 462 / 495 (fwd_ws.py, which masks every tile), 16k 610 / 613 against 498 /
# 497, 2k level (446 / 447 against 449 / 437); 4k not measured. Ping-pong 546 / 551 and
# 601 / 599: level. Outputs within one bf16 ulp of fwd_ws.py's (2.0e-3), error against
# float64 within the criterion at 9 causal shapes (Nq < Nk, Nq > Nk, BLOCK_N 64).
# Session 24 (s24/call3, graph replays, one CTA a block): D = 128 4k 481 / 507 against
# fwd_ws.py's 475 / 473 (2k level: 449 / 447 against 446 / 436; 512 / 1k behind: 230 /
# 351 against 288 / 380): from 4k. D = 64 16k 432 / 407 against 413 / 395 (4k 363 against
# 386, behind): from 16k. Session 30: D = 64 from 4k with THREE consumers (GLUON_FWD_CAUSAL_
# CONSUMERS: 393 / 393 against fwd_ws.py's 386 / 383 at 4k; 2k behind). That length holds only
# for the 3-consumer one-block kernel: should CAUSAL_CONSUMERS[64] go back to 2 (or causal
# become persistent), set D = 64 back to 16384. D = 256 (session 32, s32/callA, one block a CTA,
# as GLUON_FWD_MIN_N's note): 4k 587 / 576 against fwd_ws.py's 518 / 520 (cuDNN 582 / 562), 16k
# 677 / 662 against 579 / 539 (608 / 608); 2k (s32/callG) 516 / 506 against 465 / 461 (524 / 514):
# from 2k. Session 33 (s33/callC, as GLUON_FWD_MIN_N's note): 512 301 / 301 against fwd_ws.py's
# 288 / 288 (cuDNN 340 / 339), 1k 417 / 415 against 388 / 387 (445 / 440): D = 256 from 512.
# D = 128 from 2k (session 32; was 4k): two
# earlier runs put the one-block kernel ahead of fwd_ws.py at 2k (s24/call3 449 / 447 against
# 446 / 436, s31/callE 452 / 444 against 440 / 434); the session-32 grid row checks it.
GLUON_FWD_CAUSAL_MIN_N: dict[int, int] = {128: 2048, 64: 4096, 256: 512}
# Whether those Gluon forwards run PERSISTENT (kernels/fwd_gluon.py: grid = the SM count,
# each CTA looping over its blocks), key "plain" / "causal". Session 24 (H200,
# 2026-12-01, bf16, 16k tokens, H = 16, D = 128, kernel-only, two rounds, outputs
# bitwise equal; bench/gpu/s24_gluon_persistent_ab.py, s24/call2): non-causal +10-12%
# at 512, +8-20% at 1k, +3-8% at 2k, +6-8% at 4k, +2-4% at 16k (640 TFLOP/s); causal
# with the first tile order (heaviest first across all heads) -3% at 512 and -10-16%
# from 1k (its waves read every head's K / V). The banded order (s24/call3, graph
# replays): D = 128 4k 494 / 501 against one-block's 481 / 507, 16k 534 / 533 against
# 613 / 570 (bands of 1/4 and all the L2: 447 and 549); D = 64 16k 427 / 425 against
# 432 / 407: the static deal evens the SMs' loads worse than the hardware's block
# scheduler does one block a CTA. Causal stays one block a CTA.
GLUON_FWD_PERSISTENT = {"plain": True, "causal": False}
# Consumer warpgroups of the plain PERSISTENT Gluon forward per BLOCK_D (kernels/fwd_gluon.py
# NUM_CONSUMERS): 2 (the kernel measured so far: one loader warp, two 64-row consumers, 128
# query rows a CTA) or 3 (session 29, offline: three 64-row consumers, 192 rows a CTA, at a
# head dim of fwd_gluon.CONSUMERS3_CONFIG, D = 64 only). Why 3 at D = 64: the softmax of a
# 64 x 128 tile is the same work at D = 64 as at 128 while its two matmuls halve, and the
# session 28 profile (D = 64, N = 4k) read the tensor pipe 45.8% busy with 3 warps a
# scheduler; FlashAttention-3 runs head dim 64 with 3 consumer warpgroups. Measured (H200,
# 2026-12-01, bf16, H = 32, 16k tokens, kernel-only graph replays, two rounds, outputs
# bitwise the 2-consumer kernel's; bench/gpu/s29_gluon_fwd_3wg_ab.py, s29/call1-2), TFLOP/s
# 2 -> 3 consumers (cuDNN in the same run): 512 302 / 302 -> 327 / 327 (377), 1k 375 / 376
# -> 380 / 391 (422), 2k 421 / 413 -> 456 / 458 (453), 4k 437 / 430 -> 451 / 482 (451),
# 16k 449 / 449 -> 516 / 516 (459); 4 stages level with 3. Predicted +8-20% at 4k / 16k:
# +10% / +15%. Launch plans key on the call, not on this table: plans.clear() after
# changing it.
GLUON_FWD_CONSUMERS: dict[int, int] = {64: 3}
# The same for the causal Gluon forward (one block a CTA, GLUON_FWD_PERSISTENT["causal"] False):
# 3 takes kernels/fwd_gluon.py's NUM_CONSUMERS = 3 CAUSAL variant (192-row blocks, each 64-row
# consumer computing only the key tiles its rows reach, the block's other tiles drained; a
# session-29 helper, offline). Measured (H200, 2026-12-01, bf16, H = 32, 16k tokens, kernel-
# only graph replays, two rounds, outputs bitwise the 2-consumer kernel's; bench/gpu/
# s30_gluon_causal_3wg_ab.py, s30/callB), TFLOP/s 2 -> 3 consumers (the route before: fwd_ws.py
# below 16k; cuDNN): 2k 314 / 313 -> 309 / 306 (fwd_ws 353; 390), 4k 369 / 375 -> 393 / 393
# (386 / 383; 419), 16k 432 / 408 -> 470 / 471 (430; 446). Predicted 1.08-1.18x at 4k-16k:
# 1.05x / 1.09x. Routed with GLUON_FWD_CAUSAL_MIN_N[64] 16k -> 4k (2k stays on fwd_ws.py).
# Launch plans key on the call: plans.clear() after changing it.
GLUON_FWD_CAUSAL_CONSUMERS: dict[int, int] = {64: 3}
# The causal Gluon forward (one block a CTA, 2 consumers) with OWN_TILES (kernels/fwd_gluon.py
# _fwd_consume_own, session 38): each 64-row consumer computes only the key tiles its rows reach instead of
# masking the rest to p = 0; bitwise the same outputs. It skips a whole tile only where BLOCK_N < BLOCK_M
# (D = 256's 64-key tiles: warpgroup 0 one tile in every block); the D = 64 / 128 routes' 128-key tiles
# never skip one. Head dim -> the longest max(Nq, Nk) that takes it. Measured (H200, 2026-12-03, D = 256
# causal, 16k tokens, H = 8, kernel-only graph replays, two rounds; bench/gpu/s38_own_tiles_ab.py, s38/call 4):
# 512 +3.5 / +4.2% bf16, +3.5 / +4.1% fp16 (303 -> 314 TFLOP/s: 1.506x FA2's 209); 1k +2.3 / +2.5%, +2.0 /
# +4.0%; 2k +0.9 / +1.3%, -1.1 / +2.7%; 4k -0.7 / +2.6%, -4.1 / +3.5%. The rule written before the run (>= 1%
# in both rounds at 512 and 1k, no round below -0.5% at 2k / 4k) holds to 1k only: from 2k the gain is
# inside the power-capped GPU's round-to-round noise (bench/NOTES.md "Session 38").
# Launch plans key on the call: plans.clear() after changing it.
GLUON_FWD_CAUSAL_OWN_TILES: dict[int, int] = {256: 1024}
# Sliding-window forwards (a left and / or right edge, not the canonical causal) take the
# Gluon kernel's WINDOW variant (one block a CTA) from this min(Nq, Nk), per BLOCK_D.
# Session 25 (H200, 2026-12-01, bf16, 16k tokens, H = 16, D = 128, window (1024, 0),
# kernel-only TFLOP/s of the band's FLOPs, two rounds, bench/gpu/s25_gluon_window_ab.py
# ab, s25/call1): 4k 412 / 400 against the library's fwd_ws.py 373 / 363, 16k 422 / 415
# against 377 / 332 (PERSISTENT 411 / 397 and 429 / 419: level, not taken); outputs
# within the f64 criterion, the PERSISTENT one bitwise the one-block one. Eager (16k,
# B = 1, do_bench, bench/gpu/s25_route_probe.py, s25/call7): 304 us a call against
# fwd_ws.py's 353 once launch plans replay the Gluon launch (call 6, unreplayable: 595 us,
# 494 us of host time a call). D = 64 and shorter N not measured: not taken.
GLUON_FWD_WINDOW_MIN_N: dict[int, int] = {128: 4096}
# Gluon forwards that run PERSISTENT with O_STAGE (kernels/fwd_gluon.py, session 42: each consumer frees Q right
# after its tile loops, the loader lands the next block's Q under the last P V and the epilogue, and O leaves by TMA
# through the last tile's K stage; bitwise the same outputs), by gluon_kind ("plain" / "causal" / "window") ->
# {BLOCK_D: (the shortest min(Nq, Nk), the longest max(Nq, Nk))}. Causal calls take the host's longest-first deal
# (SCHEDULED, launchers/schedule.py) with it, windows replace EARLY_Q with it. Measured (H200, 2026-12-03, D = 128,
# 16k tokens, H = 16, kernel-only graph replays, three rounds, outputs bitwise; bench/gpu/s42_o_stage_ab.py, s42
# call 3), best TFLOP/s: causal 2k bf16 one block 487 -> scheduled O_STAGE 557 (cuDNN 527), fp16 485 -> 547 (519);
# causal 4k 578 -> 571, 566 -> 547 and 16k 714 -> 695 (level or behind: not taken); window (1024, 0) 16k EARLY_Q
# 480 -> 503 band TFLOP/s; plain 2k 668 -> 693 (cuDNN 672), 8k 680 -> 671 (level). Call 4 (`python
# bench/gpu/s42_o_stage_ab.py route`, against the route before, bf16): causal 1k 405 -> 433 (cuDNN 447; the route
# before was fwd_ws.py: gluon_fwd lets O_STAGE's range below GLUON_FWD_CAUSAL_MIN_N), 2k 489 -> 551 (522), 4k 571 ->
# 594 (571; medians 555 -> 563: with call 3's 578 -> 571, level: not taken); plain 1k 585 -> 627 (615), 4k 691 ->
# 700 (669); window (1024, 0) 4k 443 -> 457. D = 64 (2 consumers against the routed 3-consumer / fwd_ws.py
# kernels): causal 2k 392 -> 373, 4k 403 -> 411, plain 2k 493 -> 460: not taken. The TIMELINE stamps
# (bench/gpu/s42_timeline_probe.py) show the consumers' Q wait a block 1.2 us -> 0.06 us (median). Since session 43
# windows take the host's longest-first deal too (schedule.window_schedule; the round robin's SM end max / mean was
# 1.070 at 16k): (1024, 0) 16k 505 -> 535, 4k 481 -> 503 band TFLOP/s (bench/gpu/s43_window_sched_ab.py, s43 call 1).
# Causal up to 8k since session 43 (bench/gpu/s43_causal8k_ab.py, s43 call 6; kernel-only, three rounds, bitwise):
# one block -> scheduled O_STAGE 637 / 574 / 581 -> 675 / 622 / 614 bf16 (+5.7-8.4%; cuDNN 611 / 532 / 531), fp16
# 620 / 575 / 560 -> 654 / 587 / 585 (+2.1-5.5%); predicted +1-4%. 4k inside the range was level in session 42.
# Launch plans key on the call: plans.clear() after changing it.
# D = 64 causal 4k, bf16 only (session 45, `bash bench/gpu/s45a.sh`: the 2-consumer O_STAGE scheduled kernel against
# the routed 3-consumer one-block one, kernel-only, three rounds, bitwise): bf16 419 / 416 / 407 against 404 / 404 /
# 394 (+3.7 / +3.0 / +3.3%; sessions 43 / 44 +4.3-6.9 / +3.0-5.3%), fp16 418 / 405 / 396 against 403 / 394 / 392
# (+3.7 / +2.8 / +1.0%: the rule, >= 2% every round, fails again), so the entry is bf16's alone
# (GLUON_FWD_O_STAGE_DTYPES). cuDNN 435 / 426 / 416 (bf16) in the same rounds.
# fp16 too since session 46 (`bash bench/gpu/s46b.sh`, nine rounds; rule written before the run: median of the
# per-round ratios >= 1.02 and no round below 1.00): 421 / 416 / 409 / 410 / 395 / 401 / 409 / 417 / 390 against
# 406 / 403 / 390 / 385 / 390 / 387 / 391 / 394 / 390, median 1.037, lowest 1.000; cuDNN 437 .. 395 (median of the
# per-round ratios 1.00 after, 0.965 before). 8k stays on the one-block kernel in both dtypes (the 3-consumer
# O_STAGE3 form: median 1.013 / 1.014 with rounds at 0.978 / 0.985, bench/wip/gluon-fwd-o-stage3.md).
# D = 128 plain from 512 since session 52 (`bench/gpu/s52_short_routes_grid.py`, the grid's own protocol: do_bench
# with its L2 flush, eager, five rotated rounds, the candidate the library's route with this table patched; rule
# written before the run: median per-round ratio >= 1.03, no round below 1.00, bf16 and fp16): 512 against the route
# before (fwd_ws.py) bf16 480 / 446 TFLOP/s (median ratio 1.085, lowest 1.064; again 1.084 / 1.041), fp16 467 / 422
# (1.097 / 1.025); cuDNN 481 / 485 / 462 in the same rounds; graph replays 481 / 446. (The plain persistent
# kernel without O_STAGE: 0.97-0.99x the route there.) D = 64 plain 512 / 1k too (calls 8-9, the same protocol and
# rule; the 2-consumer O_STAGE kernel, not the routed 3-consumer one, which read 0.94 / 1.01x the route there):
# against fwd_ws.py bf16 361 / 346 (median ratio 1.043, lowest 1.032) and 406 / 386 (1.052 / 1.044), fp16 358 / 344
# (1.044 / 1.035) and 391 / 377 (1.065 / 1.011); cuDNN 379 / 415 (bf16), 374 / 405 (fp16). From 2k the 3-consumer
# kernel stays (session 42: the 2-consumer O_STAGE kernel 460 against its 493 at plain 2k).
GLUON_FWD_O_STAGE: dict[str, dict[int, tuple[int, int]]] = {
    "plain": {128: (512, 4096), 64: (512, 1024)}, "causal": {64: (4096, 4096), 128: (1024, 8192)},
    "window": {128: (4096, 1 << 30)}}
# Entries of GLUON_FWD_O_STAGE that hold for some dtypes only: (kind, BLOCK_D) -> the dtypes; absent = every dtype.
# Empty since session 46 (D = 64 causal 4k, bf16's alone in session 45, now holds for fp16 too).
GLUON_FWD_O_STAGE_DTYPES: dict[tuple[str, int], frozenset] = {}
# Sliding-window forwards that take the WINDOW variant as PERSISTENT with EARLY_Q (kernels/
# fwd_gluon.py: the next block's Q loaded under this block's last tile, O by global stores;
# a session-29 helper): BLOCK_D -> the shortest min(Nq, Nk) from which. Measured level (H200,
# 2026-12-01, window (1024, 0), D = 128, H = 16, 16k, kernel-only graph replays, outputs bitwise;
# bench/gpu/s30_gluon_window_ab.py, s30/callB): 425 / 424 band TFLOP/s against the one-block
# kernel's 422 / 400 and the persistent one's 422 / 359; predicted +8-14%. Empty = off (the
# one-block WINDOW kernel). Session 31 (same setup, bench/gpu/s31_window_lean_mask_ab.py, s31/
# callA) measured it together with LEAN_MASK: 447 / 433 band TFLOP/s at 16k against the
# one-block kernel's 424 / 401 (+5.4%, best of two rounds; 0.724x causal), 426 / 421 against
# 419 / 386 at 4k (+1.7%), outputs bitwise: routed from 4k, always with LEAN_MASK (below).
# Launch plans key on the call: plans.clear() after changing it.
GLUON_FWD_WINDOW_EARLY_Q: dict[int, int] = {128: 4096}
# Sliding-window forwards whose WINDOW kernel runs with LEAN_MASK (kernels/fwd_gluon.py
# _softmax_step_lean: the masked tiles with one compare and one select a score, the right-edge
# loop one-sided; a session-30 helper; bitwise the same outputs):
# BLOCK_D -> the shortest min(Nq, Nk) from which. Session 31 (bench/gpu/s31_window_lean_mask_ab.py,
# s31/callA; D = 128, window (1024, 0), kernel-only graph replays, two rounds): alone 430 / 393
# band TFLOP/s at 16k against 424 / 401 (+1.4% best), 419 / 411 against 419 / 386 at 4k; with
# EARLY_Q +5.4% / +1.7% (above), outputs bitwise: routed with EARLY_Q from 4k. Launch plans key
# on the call: plans.clear() after changing it.
GLUON_FWD_WINDOW_LEAN_MASK: dict[int, int] = {128: 4096}
# Dropout forwards (0 < p < 1) on the Gluon kernel's DROPOUT variant (the library's mask
# bitwise): kind ("plain" / "causal" / "window", as gluon_fwd / gluon_fwd_window tell them
# apart) -> {BLOCK_D: the shortest min(Nq, Nk)}. Session 26 (H200, 2026-12-01, bf16, 16k
# tokens, H = 16, D = 128, p = 0.1, CUDA-graph replays, two rounds, bench/gpu/
# s26_gluon_dropout_fwd_ab.py ab, s26/call1), TFLOP/s: plain 4k 539 / 523 against the
# library's dropout forward (fwd_ws.py) 483 / 488, 16k 526 / 552 against 494 / 503 (1.18-
# 1.26x the time of the Gluon forward without dropout, predicted 1.08-1.15x); causal 4k
# 442 / 437 against fwd.py's 355 / 351, 16k 532 / 534 against 424 / 422. Outputs within
# the f64 criterion, plain bitwise the library's. Measured at 4k and 16k only, so taken
# from 4k; "window" (1.5-2 KB of spills offline) and D = 64 not measured: not taken.
GLUON_FWD_DROPOUT_MIN_N: dict[str, dict[int, int]] = {"plain": {128: 4096}, "causal": {128: 4096}}
# The fused Gluon backward (kernels/bwd_gluon_fused.py: dK, dV and dQ in one kernel, dQ
# reduce-added in fp32 by TMA, so dq's last bits vary run to run): calls with
# deterministic=False (flash-attn's default) take it from this min(Nq, Nk), per kind and
# BLOCK_D. Session 25 (H200, 2026-12-01, bf16, 16k tokens, H = 16 (D = 128) / 32 (D = 64),
# whole backward incl. the delta preprocess against flash_attn_func's backward as routed
# before, best of two rounds, bench/gpu/s25_gluon_fused_ab.py quick / shapes, s25/call1
# and call3): D = 128 non-causal 1.08 / 1.09 / 1.12 / 1.16 / 1.15x at 1k / 2k / 4k / 8k /
# 16k (515 TFLOP/s at 16k), 512 0.96x (not taken); causal 1.37 / 1.26 / 1.21 / 1.29 / 1.23x
# at 1k..16k; D = 64 non-causal 0.97 / 1.00 / 1.03 / 1.02x at 2k / 4k / 8k / 16k, causal
# 1.30 / 1.34 / 1.19 / 1.14x at 1k / 2k / 4k / 16k (call 6). Every case within the f64
# criterion; cuDNN's backward 1.01-1.07x faster than it (D = 64 non-causal 1.12x).
# Session 26 (same method, s26/call4): causal 512 (B = 32), D = 128 0.41 / 0.41 ms against
# the library's 0.56 / 0.56 (1.39x; cuDNN 0.40 / 0.41), D = 64 (H = 32) 0.52 / 0.52 against
# 0.68 / 0.68 (1.32x; cuDNN 0.51): causal from 512. Shorter lengths not measured.
# "window" (session 28, 2026-12-01): the kernel's WINDOW variant (any other window: only the
# band's query tiles a key block, edge tiles masked), written and compiled offline (0 spills
# in the tile loops, D = 128 / 64), its tile schedule checked on CPU (tests/
# test_bwd_gluon_window.py). First GPU runs (H200, bf16, window (1024, 0), 16k tokens, H =
# 2048 / D, whole backward incl. the delta preprocess against today's route (bwd.py's dK/dV
# + dQ kernels), CUDA-graph replays, two rounds; bench/gpu/s28_gluon_bwd_window_ab.py,
# s28/call2 + call3; 90 GPU tests passed): D = 128 16k 0.895 / 0.899 ms against 1.177 /
# 1.179 (1.31x; 0.73x the fused causal's band TFLOP/s, predicted 0.79x), 4k 1.42x (0.82x),
# 2k 1.50x (0.92x), 1k 0.99x (the band is nearly the whole causal triangle there); D = 64
# 16k 1.27x (0.74x), 4k 1.31x (0.83x), 2k 1.38x (0.93x). Gradients within the f64 criterion,
# 1e-3 of window-current's. Routed from 2k.
# Session 30 (s30/callA2, the WIDE tile below): D = 64 plain from 2k (8k before): the wide
# fused backward 382 / 379 TFLOP/s at 2k, 403 / 394 at 4k, against bwd_ws.py's 367 / 377
# (session 29's grid) and the 64-row fused kernel's 358 / 379.
GLUON_BWD_FUSED_MIN_N = {"plain": {128: 1024, 64: 2048}, "causal": {128: 512, 64: 512},
                         "window": {128: 2048, 64: 2048}}

# The fused backward's WIDE tile (kernels/bwd_gluon_fused.FUSED_WIDE_CONFIG: BLOCK_M = 128
# query rows a ring tile instead of 64), by gluon_kind ("plain" / "causal"; not "window",
# not with dropout) -> the head dims that take it, for calls whose Nq is a multiple of 128
# (others keep the 64-row tile; launchers.backward_gluon.fused_block_m). Written and compiled
# offline by a session-29 helper. Measured (H200, 2026-12-01, bf16, H = 32, 16k tokens, the
# library's whole backward with the fused route forced, CUDA-graph replays, two rounds; dk /
# dv bitwise the 64-row kernel's, dq within fp32 order; bench/gpu/s30_fused_bwd_d64_ab.py,
# s30/callA2), TFLOP/s 64-row -> wide (cuDNN): non-causal 2k 358 / 356 -> 382 / 379 (397 /
# 384), 4k 379 / 370 -> 403 / 394 (421 / 410), 8k 392 / 393 -> 411 / 408 (439 / 437), 16k 402
# / 400 -> 423 / 426 (444 / 450); causal 2k 303 / 304 -> 333 / 331 (321 / 317), 4k 350 / 346
# -> 386 / 378 (367 / 365), 8k 383 / 383 -> 422 / 413 (404 / 406), 16k 405 / 402 -> 445 / 442
# (433 / 433). Predicted +6-15% non-causal at 8k / 16k, +3-10% causal: +5-6% / +10%. Routed
# for both at D = 64; the route's lengths stay GLUON_BWD_FUSED_MIN_N's.
GLUON_BWD_FUSED_WIDE: dict[str, frozenset[int]] = {"plain": frozenset({64}), "causal": frozenset({64})}
# The 64-row fused tile's own shortest min(Nq, Nk), by gluon_kind and head dim, where it is
# longer than GLUON_BWD_FUSED_MIN_N's (which are then the WIDE tile's): calls the WIDE tile
# cannot take (Nq not a multiple of 128, or the table above emptied) need this length.
# Session 30 (s30/callA2): plain D = 64 at 2k, the 64-row kernel 358 / 356 TFLOP/s against
# bwd_ws.py's 367 / 377 (wide 382 / 379), so it keeps session 25's 8k (review, session 30).
GLUON_BWD_FUSED_NARROW_MIN_N = {"plain": {64: 8192}}

# The D = 256 fused Gluon backward (kernels/bwd_gluon_d256.py: a softmax warpgroup computing S^T,
# dP^T, P^T, dS^T and dQ, two warpgroups each owning dK / dV for one half of the head dim, a
# loader; 64 keys a CTA, 64-row query tiles, 2 stages; a session-32 helper): gluon_kind ("plain"
# / "causal"; no window, no dropout) -> the shortest min(Nq, Nk) from which dense D = 256
# backwards take it (launchers/backward_gluon_d256.bwd_into). Measured (H200, 2026-12-02, bf16,
# H = 8, 16k tokens, the whole backward incl. the delta preprocess, CUDA-graph replays, two
# rounds; bench/gpu/s32_gluon_bwd_d256_ab.py, s32/callC; its 50 GPU tests passed), TFLOP/s
# against the route before (bwd_ws.py / bwd.py) and cuDNN: 2k 306 / 307 against 264 / 264
# (347 / 340), 4k 319 / 323 against 282 / 280 (372 / 358), 16k 331 / 337 against 296 / 293
# (359 / 361); causal 4k 293 / 299 against 265 / 263 (345 / 339), 16k 336 / 342 against 314 /
# 316 (376 / 378). Predicted 340-395 (0.95-1.1x cuDNN): 0.87-0.93x. The V2 variant (dQ by
# red.global.add from the registers, dq_atomic=True) measured 0.91-0.95x this one: not routed.
# Then (s32/callF) 1k 277 / 277 against 249 / 240 (cuDNN 301 / 300), causal 2k 267 / 267 against
# 222 / 221 (301 / 302). From the shortest lengths measured (the script's rule: >= 2% over the
# route in both rounds): plain 1k, causal 2k. Session 33 (s33/callC, the same measurement,
# bench/gpu/s32_gluon_bwd_d256_ab.py with S32B_CASES=512,c512,c1024): 512 234 / 234 against 203 / 201
# (cuDNN 242 / 240), causal 512 170 / 170 against 134 / 134 (179 / 177), causal 1k 224 / 224
# against 182 / 179 (243 / 244): both from 512.
GLUON_BWD_D256_MIN_N = {"plain": 512, "causal": 512}

# The D = 256 backward's split path (session 33, issue 4; launchers/backward_gluon_d256.bwd_into(...,
# split_dq=True)): the same kernel with DKDV_ONLY (dK / dV only), then the Gluon dQ kernel
# (kernels/bwd_gluon_dq.py at D = 256) writing dq in q's dtype: FlashAttention-2's split, which
# the probes of s33/callA price at ~2,040 us for dK / dV alone against the fused kernel's
# 4,250-4,324 (N = 4k, B = 4, H = 8). By gluon_kind -> the shortest Nq that takes it (within
# GLUON_BWD_D256_MIN_N's route; Nq a multiple of 128). Written offline (session 33); measured
# in session 34 (H200, 2026-12-02, bf16, H = 8, 16k tokens, whole backward incl. the delta
# preprocess, CUDA-graph replays, two rounds; bench/gpu/s34_d256_split_dq_ab.py, s34/callA and
# callA2), TFLOP/s fused -> split with the table's dQ tile, both rounds (cuDNN): 512 233 -> 321 / 324
# (236), 1k 277 -> 381 / 384 (294), 2k 305 -> 407 / 419 (345), 4k 321 -> 437 / 446 (368), 16k 334 ->
# 429 / 439 (357); causal 512 170 -> 217 / 219 (180), 1k 224 -> 287 / 287 (248), 2k 267 -> 337 / 335
# (306), 4k 298 -> 370 / 367 (343), 16k 339 -> 427 / 426 (377). Predicted 1.10-1.21x the fused
# kernel: 1.25-1.38x, 1.09-1.37x cuDNN (the dQ pass ran faster than the 450-550 TFLOP/s modelled).
# Routed from 512 (the shortest length measured), both kinds.
GLUON_BWD_D256_SPLIT_DQ: dict = {"plain": 512, "causal": 512}
# The dQ kernel's tiles on the split path by gluon_kind (launchers/backward_gluon_d256's dq_tile:
# BLOCK_N, K_STAGES, V_STAGES, V_EARLY); a kind not named takes kernels/bwd_gluon_dq.default_config
# (32-key tiles, 3 / 3 stages). Plain: 64-key tiles, 2 / 1 stages, V_EARLY (216 B of spills
# offline) measured 1.02-1.05x the default at 512-4k and level at 16k (s34/callA): taken. Causal:
# the 64-key form spills 640 B offline (not timed); V_EARLY alone was level (0.98-1.02x): default.
GLUON_BWD_D256_SPLIT_DQ_TILE: dict = {"plain": (64, 2, 1, True)}
# The dQ kernel's launch order on the split path by gluon_kind (kernels/bwd_gluon_dq.py BAND: rank-major
# over bands of `band` heads, so every head's heaviest causal blocks start first; 0 / absent: the
# (Nq / 128, B * H) grid). Taken only where the band divides B * H and B * H >= 4 * band (a few bands
# to deal over). Session 35's dQ-only A/B (H200, bf16, H = 8, 16k tokens, s35/callB): band 4 +4-9% at
# 4k / 8k, 0.996x / 0.954x at 16k; as whole backwards (session 36, s36/callA,
# bench/gpu/s36_d256_dq_band_ab.py) band 4 +1.2-1.4% at 4k, noise at 8k / 16k: below the 2% asked. EMPTY = off.
GLUON_BWD_D256_SPLIT_DQ_BAND: dict = {}
# The split path writes every output once, in a fixed order (no atomics): deterministic=True
# D = 256 calls it takes go there too (before: bwd_ws.py / bwd.py, ~264-296 TFLOP/s). False keeps
# them on the Triton kernels (tests that exercise bwd.py at D = 256 set it).
GLUON_BWD_D256_SPLIT_DETERMINISTIC = True


def gluon_bwd_d256_split(params: AttnParams, seqlen_q: int) -> bool:
    """Whether a call gluon_bwd_d256 accepted takes the split path (GLUON_BWD_D256_SPLIT_DQ by
    gluon_kind, Nq from the table's length and a multiple of 128, the dQ kernel's query block)."""
    kind = gluon_kind(params)
    return kind in GLUON_BWD_D256_SPLIT_DQ and seqlen_q >= GLUON_BWD_D256_SPLIT_DQ[kind] and seqlen_q % 128 == 0


def gluon_bwd_d256_split_tile(params: AttnParams):
    """The split path's dq_tile for the call's gluon_kind (GLUON_BWD_D256_SPLIT_DQ_TILE; None: the
    dQ kernel's default_config)."""
    return GLUON_BWD_D256_SPLIT_DQ_TILE.get(gluon_kind(params))


def gluon_bwd_d256_split_band(params: AttnParams, batch_heads: int) -> int:
    """The split path's dq_band for the call's gluon_kind and B * H query heads
    (GLUON_BWD_D256_SPLIT_DQ_BAND; 0: the dQ kernel's default grid order)."""
    band = GLUON_BWD_D256_SPLIT_DQ_BAND.get(gluon_kind(params), 0)
    return band if band and batch_heads % band == 0 and batch_heads >= 4 * band else 0

# The fused backward's DEFER_DQ (kernels/bwd_gluon_fused.py: each tile's dQ wgmmas and reduce one
# ring tile later, so the two consumer warpgroups stop waiting for each other's dS^T of the same
# tile), by gluon_kind -> the head dims that take it; "plain" only (the kernel compiles it for
# the non-causal 64-row tile: causal spilled offline). Written and compiled offline by a helper
# (bench/NOTES.md "Offline (a helper, session 31): the fused backward at D = 128"). Measured level (H200, 2026-12-01, bf16, D = 128, H = 16, 16k
# tokens, non-causal, whole backward, graph replays, two rounds; bench/gpu/
# s31_fused_bwd_d128_ab.py, s30/callB): 2k 460 / 440 -> 459 / 443 TFLOP/s, 4k 490 / 488 -> 490 /
# 490, 16k 520 / 520 -> 458 (an outlier) / 520; predicted +3-8%. Not taken: EMPTY = off.
GLUON_BWD_FUSED_DEFER: dict[str, frozenset[int]] = {"plain": frozenset()}

# The fused backward's DQ_SPLIT_M (kernels/bwd_gluon_fused.py, the WIDE tile only: each consumer
# warpgroup computes dQ for its 64 of the tile's 128 query rows over the whole D = 64, m64n64k16
# wgmma steps, instead of all 128 rows for its D-half, m64n32k16 steps whose shared-memory operand
# bytes (3 KB a 16-cycle step) outrun the math), by gluon_kind ("plain" / "causal") -> the head
# dims that take it, where the WIDE tile runs (launchers.backward_gluon.fused_split_m). Written and
# compiled offline by a session-30 helper (bench/wip/fused-bwd-d64-dqm.md). Session 31 (H200,
# 2026-12-02, bf16, H = 32, 16k tokens, whole backward, CUDA graphs, two rounds; bench/gpu/
# s31_fused_bwd_dqm_ab.py, s31/callA), TFLOP/s best of two, against the WIDE tile without it:
# plain 2k 413 / 379 (+9.0%), 4k 447 / 407 (+9.9%), 8k 458 / 422 (+8.6%), 16k 460 / 424 (+8.5%),
# now 1.02-1.04x cuDNN (0.94-0.95x before); causal 4k +0.3%, 16k +2.3%. dk / dv bitwise, dq
# within the summation order (predicted +1.5-5%): routed for D = 64, both kinds.
GLUON_BWD_FUSED_DQ_SPLIT_M: dict[str, frozenset[int]] = {"plain": frozenset({64}), "causal": frozenset({64})}

# The fused causal backward's BAND launch order (kernels/bwd_gluon_fused.py _fused_pids, session 36), by
# head dim -> the CTAs a band aims at: band = the largest power of two <= that / (Nk / BLOCK_N) which
# divides B * Hk (none below 2). A fixed band size measured (H200, bf16, 16k tokens, H = 2048 / D, whole
# fused backward, graph replays, two rounds; bench/gpu/s36_fused_band_ab.py, s36/callB), TFLOP/s band 0
# -> best band at D = 128: 2k 379 / 387 -> band 16 402 / 410 (+3.8-5.9%), band 8 402 / 397; 4k 443 / 434
# -> band 8 454 / 445 (+0.4-2.5%); 8k 487 / 484 -> band 2 497 / 497 (+2.0%), band 4 +1.0-1.8%; 16k 518 /
# 518 -> band 2 level, 8 / 16 behind (0.83-0.98x). The best bands sit near 256 CTAs a band (two waves of
# 132). D = 64 (WIDE): level at 8k / 16k. The rule itself at C = 256 (s36/callC, same method): bf16
# 512 -2.5% (band 64), 1k level, 2k +0.7 / +7% (a slow band-0 round), 4k +1.1 / +1.8%, 8k +1.6% / a
# 0.87x round, 16k a 0.83x round; fp16 2k +2.0 / +2.1%, 4k +2.8 / +3.7%, 8k +0.6 / +1.8%. Its routing
# rule (>= 1.5% in both rounds at two lengths, no round below -1% at any) failed at 512 and 16k, and
# the gains sit within the rounds' noise elsewhere: EMPTY = off.
GLUON_BWD_FUSED_BAND: dict[int, int] = {}


def fused_band(d: int, n_key_blocks: int, batch_heads_k: int, ctas: int | None = None) -> int:
    """The causal fused backward's band for head dim d, Nk / BLOCK_N key blocks and B * Hk heads
    (GLUON_BWD_FUSED_BAND[d], or `ctas` CTAs a band when given: the A/B's); 0: the default order."""
    ctas = GLUON_BWD_FUSED_BAND.get(d, 0) if ctas is None else ctas
    band = 1
    while band * 2 * n_key_blocks <= ctas and batch_heads_k % (band * 2) == 0:
        band *= 2
    return band if band >= 2 else 0


def warp_spec_mode(q, params: AttnParams, alibi, is_varlen: bool, bd: int, seqlen_q: int, seqlen_k: int,
                   kernel: str = "fwd", dout=None, kv=(), bwd_persistent=None):
    """How the forward (kernel="fwd") or the backward ("bwd") uses the warp-specialized
    kernels: "whole" (warp_spec_plain: they do the whole call), "split" (backward only,
    warp_spec_split: bwd_ws.py does the fully visible tiles and bwd.py the masked rest),
    or None; under warp_spec_applies' switch. The short forwards of FWD_SHORT_ON_FWD_PY
    run fwd.py (None) unless their launch can be persistent (fwd_persistent_launch) or
    FLASHTRITON_WARP_SPEC=1. "split" is taken for causal (or
    right-window, or ragged) calls with min(Nq, Nk) >= BWD_SPLIT_MIN_N[BLOCK_D] and no
    left window, or always with FLASHTRITON_WARP_SPEC=1; the backward's "whole" from
    min(Nq, Nk) >= BWD_WHOLE_MIN_N (where BLOCK_D has an entry), or always with the flag.
    (H200, 2026-11-29, bf16 D = 128, 16k tokens, bench/gpu/s6_ws_ab.py: causal backward
    alone ~306 / 293 TFLOP/s at 4k, 365 / 320 at 8k, 415 / 309 at 16k, but 225 / 250 at
    2k; window (1024, 0) 1.67 ms against 1.38. The forward's split, removed in session 7,
    measured 73 / 139 to 393 / 417 at N = 512 to 4k and level from 8k.)
    The backward kernels read q and dO as (Nq, H * D) with the head a column offset, so
    they also need head_dim == BLOCK_D and heads contiguous in a row of q and dout.
    kv: the forward's (k, v), whose layouts (with q's) decide whether its launch can be
    persistent (WS_MASKED_PERSISTENT_ONLY, WS_PLAIN_SHORT_NEEDS_PERSISTENT,
    WS_FWD_PERSISTENT_PLAIN_ONLY, and FWD_SHORT_ON_FWD_PY's yield to a persistent launch).
    bwd_persistent(masked): whether the backward's bwd_ws.py launch would be persistent
    (launchers.backward._ws_persistent_call); then the whole call needs no
    BWD_WHOLE_MIN_N and the split path starts at BWD_SPLIT_PERSISTENT_MIN_N."""
    if not warp_spec_applies(q, params, alibi, is_varlen, bd, seqlen_q, seqlen_k, split_ok=kernel == "bwd",
                             kernel=kernel):
        return None
    if kernel == "bwd" and not (q.shape[-1] == bd and q.stride(-2) == bd and dout.stride(-2) == bd):
        return None
    forced = _warp_spec_forced()
    if (kernel == "bwd" and params.dropout_p > 0 and (bd in BWD_WS_NO_DROPOUT or (
            not forced and max(seqlen_q, seqlen_k) > BWD_WS_DROPOUT_MAX_N.get(bd, float("inf"))))):
        return None
    short_kind, short_upto = FWD_SHORT_ON_FWD_PY.get(bd, (None, 0))
    short_kind = short_kind if not forced and max(seqlen_q, seqlen_k) <= short_upto else None
    if kernel == "fwd" and warp_spec_masked_fwd(q.dtype, params, alibi, is_varlen, bd, seqlen_q, seqlen_k):
        if ((short_kind == "masked" and not fwd_persistent_launch(q, bd, seqlen_q, kv))
                or not persistent_only_ok(WS_MASKED_PERSISTENT_ONLY, q, bd, seqlen_q, seqlen_k, kv)):
            return None
        return "whole"
    if warp_spec_plain(q.dtype, params, alibi, is_varlen, bd, seqlen_q, seqlen_k, kernel):
        if kernel == "fwd":
            if ((short_kind == "plain" and not fwd_persistent_launch(q, bd, seqlen_q, kv))
                    or not plain_fwd_layout_ok(q, bd, seqlen_q, seqlen_k, kv)
                    or not persistent_only_ok(WS_FWD_PERSISTENT_PLAIN_ONLY, q, bd, seqlen_q, seqlen_k, kv)):
                return None
            return "whole"
        if (forced or min(seqlen_q, seqlen_k) >= BWD_WHOLE_MIN_N.get(bd, 0)
                or (bwd_persistent is not None and bwd_persistent(False))):
            return "whole"
        return None
    if kernel == "fwd":
        return None
    if forced:
        return "split"
    if params.window_left >= 0:
        return None
    n = min(seqlen_q, seqlen_k)
    if n >= BWD_SPLIT_MIN_N.get(bd, float("inf")):
        return "split"
    if n >= BWD_SPLIT_PERSISTENT_MIN_N.get(bd, float("inf")) and bwd_persistent is not None and bwd_persistent(True):
        return "split"
    return None


# Short forwards that fwd.py computes faster than fwd_ws.py: BLOCK_D -> (which calls:
# "plain" = unmasked, "masked" = causal / windowed, the longest max(Nq, Nk)); they take
# configs.DEFAULTS["fwd_short"] / ["fwd_short_masked"]. H200, 2026-11-30, graph replays,
# 16k tokens, each variant twice in alternating order (bench/gpu/s13_tiles_ab.py):
# D = 128 non-causal (64, 64, 4, 3) 372 / 424 TFLOP/s at N = 512 / 1k against fwd_ws's
# 301 / 407 (4 query blocks a head at 512: 64-row tiles double the programs in flight);
# D = 256 causal (64, 32, 4, 2) 242 / 313 against 217 / 315 (level from 1k). D = 256
# non-causal stays on fwd_ws (375 / 480 against fwd.py's best 302 / 354).
# D = 128 unmasked left this table in session 15: the persistent fwd_ws.py
# (launchers.forward.WS_PERSISTENT) 411-415 / 480 at 512 / 1k against fwd.py's 365 / 410-420.
# Since session 22 the table holds only where the launch cannot be persistent: D = 256
# causal 512 persistent 287-288 TFLOP/s against fwd.py's 242 (graph replays and eager alike,
# bench/gpu/s22_host_desc_ab.py).
FWD_SHORT_ON_FWD_PY = {256: ("masked", 512)}

# The longest max(Nq, Nk) at which a dropout backward takes bwd_ws.py by default (beyond:
# bwd.py). Its dQ loop still reads dropout's column keys through a 1-D descriptor each
# iteration, the pattern that gave the dK/dV kernel NaN in long loops (launchers.backward.
# WS_DKDV_DESC_MAX_ROWS); stressed clean at 8k (0 of 1941 calls, H200, 2026-11-30,
# session 18), not beyond. D = 64: 0 (never by default) since session 29: a D = 64 dropout
# backward is always one tile a program (launchers.backward.WS_PERSISTENT has no D = 64
# dropout kind), and one-tile D = 64 launches with many programs gave NaN through the
# dK/dV loop's 1-D descriptors at every length from 1k (bench/gpu/s29_bwd_ws_onetile_probe.py,
# no dropout: the dQ loop's key loads were not probed); since session 30 never at all at
# D = 64 (BWD_WS_NO_DROPOUT below).
BWD_WS_DROPOUT_MAX_N = {128: 8192, 64: 0}
# Head dims whose dropout backwards never take bwd_ws.py, forced (FLASHTRITON_WARP_SPEC=1) or
# not: at D = 64 the launch is one tile a program (no D = 64 dropout kind in
# launchers.backward.WS_PERSISTENT), which must read by pointers (the descriptors' NaN, session
# 29), and the dK/dV kernel with dropout and pointer loads does not compile (Triton 3.6.0,
# NVGPUWarpSpecialization, session 30's GPU suite; launchers.backward.WS_DKDV_PTR_DROPOUT_FAILS,
# whose guard raises should this table lose 64).
BWD_WS_NO_DROPOUT = {64}

# The shortest sequences at which the backward's split path pays, per BLOCK_D (see
# warp_spec_mode). D = 64 (H200, 2026-11-29, prefill-d64.md, 16k tokens): causal
# backward 221 / 284 / 334 TFLOP/s at 4k / 8k / 16k with the split, 242 / 267 / 280
# with bwd.py.
BWD_SPLIT_MIN_N = {128: 4096, 64: 8192}
# The same where the split path's bwd_ws.py launch is persistent (launchers.backward.
# WS_PERSISTENT): D = 128 causal at N = 2k 262 TFLOP/s against 249 with bwd.py, at 1k 176
# against 192 (H200, 2026-11-30, bench/gpu/s17_bwd_persistent_ab.py); D = 64 at 4k 267
# against 263 (level then: left at 8k until session 20). With the resumed launches on halved tiles in query
# rows (launchers.backward.RESUME_HALVED, session 20; bench/gpu/s20_split_short_ab.py,
# two rounds, causal backward TFLOP/s, bwd.py -> split): D = 128 1k 192 / 193 -> 198 /
# 198, 512 133 -> 120 (stays on bwd.py); D = 64 4k 268 / 256 -> 286 / 279, 2k 227 / 226
# -> 219 / 220 (stays).
BWD_SPLIT_PERSISTENT_MIN_N = {128: 1024, 64: 4096}
# The shortest sequences at which the whole-call backward pays, where not from the start:
# D = 64 non-causal at N = 512 / 1k 159 / 230 TFLOP/s against 187 / 240 with bwd.py
# (from 2k: 294 / 337 / 364 / 372 against 273 / 303 / 326 / 325; same runs as above).
# With a persistent bwd_ws.py launch (launchers.backward.WS_PERSISTENT) the whole call
# pays from the start: D = 64 310 / 345 TFLOP/s at 512 / 1k (s17_bwd_persistent_ab.py).
BWD_WHOLE_MIN_N = {64: 2048}


def warp_spec_split(dtype, params: AttnParams, alibi, is_varlen: bool, bd: int, seqlen_q: int, seqlen_k: int,
                    kernel: str = "fwd") -> bool:
    """The calls the backward's split path computes: warp_spec_plain's, but causal,
    windows and any Nq / Nk allowed (the masked tiles run in bwd.py); dropout up to
    BWD_SPLIT_DROPOUT_MAX_N (any length with FLASHTRITON_WARP_SPEC=1, for the tests; never
    at a head dim of BWD_WS_NO_DROPOUT, warp_spec_mode's rule)
    where Nq, Nk are multiples of 4: bwd_ws.py reads the key table's row keys at
    Nk + h * B * Nq + b * Nq + (a tile's first row) through a 1-D descriptor, whose box
    must start on 16 bytes (the interpreter's assertion, Nk = 203)."""
    dropout_ok = (_warp_spec_forced() or max(seqlen_q, seqlen_k) <= BWD_SPLIT_DROPOUT_MAX_N.get(bd, 0)) and (
        seqlen_q % 4 == 0 and seqlen_k % 4 == 0)
    return (not is_varlen and alibi is None and params.softcap == 0 and (params.dropout_p == 0 or dropout_ok)
            and bd in _ws_tiles(kernel) and dtype in (torch.bfloat16, torch.float16)
            and seqlen_q > 0 and seqlen_k > 0)


def _ws_tiles(kernel: str) -> dict:
    """The warp-specialized tiles of the forward ("fwd": BLOCK_D -> tile) or of the
    backward ("bwd": BLOCK_D -> (dK/dV tile, dQ tile))."""
    return WARP_SPEC_TILES if kernel == "fwd" else BWD_WARP_SPEC_TILES


def warp_spec_applies(q, params: AttnParams, alibi, is_varlen: bool, bd: int, seqlen_q: int, seqlen_k: int,
                      split_ok: bool = False, kernel: str = "fwd") -> bool:
    """Whether the forward takes the warp-specialized kernel. FLASHTRITON_WARP_SPEC:
    "auto" (default): the calls warp_spec_plain accepts (with split_ok, also those
    warp_spec_split accepts), on a Hopper GPU (compute capability 9); "0": never; "1": as
    auto, and also under the Triton interpreter (where the specialization itself is
    ignored: the tests check the kernels' arithmetic there). "auto" also leaves them while
    other processes share the GPU (gpu_shared)."""
    args = (q.dtype, params, alibi, is_varlen, bd, seqlen_q, seqlen_k, kernel)
    if not (warp_spec_plain(*args) or (split_ok and warp_spec_split(*args))
            or (kernel == "fwd" and warp_spec_masked_fwd(*args[:-1]))):
        _warp_spec_flag()  # a bad value is an error on every call
        return False
    return _warp_spec_switch(q)


def _warp_spec_flag() -> str:
    flag = os.environ.get("FLASHTRITON_WARP_SPEC", "auto")
    if flag not in ("auto", "0", "1"):
        raise ValueError(f"FLASHTRITON_WARP_SPEC: must be auto, 0 or 1, got {flag!r}")
    return flag


def _warp_spec_forced() -> bool:
    """FLASHTRITON_WARP_SPEC=1: the warp-specialized kernels take every call they can compute."""
    return os.environ.get("FLASHTRITON_WARP_SPEC") == "1"


def _warp_spec_switch(q) -> bool:
    """FLASHTRITON_WARP_SPEC for a call the warp-specialized kernels can compute."""
    flag = _warp_spec_flag()
    if flag == "0":
        return False
    if interpreting():
        return flag == "1"
    if not (q.is_cuda and _compute_capability(q.device.index)[0] == 9):
        return False
    if flag == "1":
        return True
    rec = plans.recording()         # a plan being recorded decides from its key's flag
    shared = rec.shared if rec is not None and rec.shared is not None else gpu_shared(q.device)
    return not shared




@functools.lru_cache(maxsize=None)
def _compute_capability(index) -> tuple:
    """torch.cuda.get_device_capability, once per device: 9-22 us a call on the H200
    machine's CPU, asked on every launch (bench/NOTES.md, "Session 10")."""
    return torch.cuda.get_device_capability(index)


def warp_spec_varlen(q, params: AttnParams, alibi, bd: int, kernel: str = "fwd") -> bool:
    """Whether a varlen forward (kernel "fwd") takes kernels/fwd_ws_varlen.py, or a varlen
    backward ("bwd") bwd_ws_varlen.py: non-causal, no window, ALiBi, softcap or dropout,
    bf16 / fp16 at a BLOCK_D of WS_VARLEN_BLOCK_DS[kernel] (forced or not); under
    warp_spec_applies' switch."""
    if not (alibi is None and params.softcap == 0 and params.dropout_p == 0 and params.window_left < 0
            and params.window_right < 0 and bd in WS_VARLEN_BLOCK_DS[kernel]
            and q.dtype in (torch.bfloat16, torch.float16)):
        _warp_spec_flag()
        return False
    return _warp_spec_switch(q)


# Packed (varlen) forwards on the Gluon kernel's VARLEN variant (session 49; kernels/fwd_gluon.py,
# launchers/forward_gluon.fwd_varlen): kind ("plain" / "causal") -> BLOCK_D -> the shortest max_seqlen_q
# from which a packed batch takes it, instead of fwd_ws_varlen.py (plain) or fwd.py (causal). H200, bf16,
# H = 16, 16k tokens in random lengths, five rotated rounds (bench/gpu/s49_varlen_ab.py, s49/call3), VARLEN
# against the route before: plain 0.75x at lengths 128..512 (longest 501), 1.28 / 1.20 / 1.16 / 1.20x at
# 256..1024 (978) / 512..2048 / 128..4096 / 1024..8192; causal 1.12 / 1.18 / 1.24 / 1.22 / 1.31x. So plain
# from 768 (between the two first ranges' longest), causal from 480.
# D = 64 (session 51; bench/gpu/s51_varlen_fwd_ab.py / _ab2.py, s51 calls 4-5, H = 32, the same protocol), VARLEN /
# the route before: plain 64..256 1.06x, 128..512 1.02x, 256..1024 1.05x, 512..2048 1.08x, 128..4096 1.11x (398 /
# 359 TFLOP/s), 1024..8192 1.08x; causal 1.08 / 1.02 / 1.06 / 1.07 / 1.06 / 1.09x; every round >= 1.016x. The
# pre-registered rule (the smallest max_seqlen of a range from which every longer range wins, every round >= 0.98):
# from 250 (the shortest range's longest sequence) for both kinds.
# "window" (session 51): sliding windows (left, 0) on the kernel's VARLEN WINDOW (windows with a right edge keep the
# Triton kernels). Measured (bench/gpu/s51_varlen_window_fwd_ab.py, s51 call 8, the same protocol), on / off (the
# Triton route, kernels/fwd.py): D = 128 (1024, 0) 512..2048 1.26x, 128..4096 1.21x, 1024..8192 1.23x, (256, 0)
# 128..4096 1.27x; D = 64 (H = 32) 128..4096 1.009x / 1.002x (level); every round >= 1.16x at D = 128, >= 1.000x at
# D = 64. Both head dims pass the pre-registered rule (every range median >= 1.00, every round >= 0.98): from any
# length.
GLUON_FWD_VARLEN_MIN_N = {"plain": {128: 768, 64: 250}, "causal": {128: 480, 64: 250}, "window": {128: 1, 64: 1}}
# The head dims whose packed dropout forwards (plain or causal) take the Gluon VARLEN kernel's DROPOUT (session 51),
# at GLUON_FWD_VARLEN_MIN_N's lengths. Measured (s51 calls 4-5, p = 0.1, the same protocol), on / off: D = 128 plain
# 512..2048 1.38x (390 / 284 TFLOP/s), 128..4096 1.23x (426 / 346), 1024..8192 1.14x; causal 1.20x, 1.24x (369 /
# 298), 1.31x; every round >= 1.13x; plain outputs bitwise the route before's (the same mask). D = 64 (H = 32): plain
# 256..1024 1.09x, 128..4096 1.27x, causal 0.95x (every round below 1) and 1.16x: the rule (every range and round
# wins) fails on D = 64's causal 256..1024, so D = 64 dropout forwards keep the Triton kernels.
GLUON_FWD_VARLEN_DROPOUT: frozenset[int] = frozenset({128})


def gluon_fwd_varlen(q, k, v, params: AttnParams, alibi, bd: int, varlen) -> bool:
    """Whether a packed forward takes the Gluon VARLEN kernel: no ALiBi or softcap, plain, the canonical causal
    mask or (session 51) a sliding window (left, 0) without dropout, dropout only at GLUON_FWD_VARLEN_DROPOUT's head
    dims (session 51), bf16 / fp16,
    head_dim == BLOCK_D with an entry
    in GLUON_FWD_VARLEN_MIN_N[kind], max_seqlen_q >= the entry, tokens in both q and k, q, k, v
    readable as (total, heads * D) rows without a copy, H <= 65535 (the grid's second
    dimension); never under the interpreter; then warp_spec_applies' switch."""
    kind = gluon_kind(params)
    table = GLUON_FWD_VARLEN_MIN_N.get(kind, {})
    if (bd not in table or q.shape[-1] != bd or interpreting() or varlen.max_seqlen_q < table[bd]
            or q.shape[0] == 0 or k.shape[0] == 0 or q.shape[1] > 65535):
        return False
    if kind == "window" and (params.window_right != 0 or params.dropout_p > 0):
        return False                       # (the VARLEN WINDOW variant: (left, 0) windows without dropout)
    if not (alibi is None and params.softcap == 0
            and (params.dropout_p == 0 or bd in GLUON_FWD_VARLEN_DROPOUT)
            and q.dtype in (torch.bfloat16, torch.float16)
            and all(rows_view_ok(t.unsqueeze(0)) for t in (q, k, v))):
        return False
    return _warp_spec_switch(q)


# Ragged dense calls (session 76) on the packed Gluon kernels (launchers/dense_varlen.py): a flash_attn_func batch
# whose Nq or Nk is not a multiple of the dense Gluon kernel's tiles (so gluon_fwd / gluon_bwd_fused decline it) is
# run as B equal packed sequences where gluon_fwd_varlen / gluon_bwd_fused_varlen take that form, instead of the
# Triton kernels. Pass -> mask kind (gluon_kind of the effective window) -> head dim -> the shortest min(Nq, Nk)
# (a window's may be (shortest, narrowest left), session 79, as the gain differs with the band's width).
# Not with dropout (the dense and packed keep masks' counter layouts are not reconciled here). Measured (H100 80GB
# HBM3, 2026-12-07, bf16, 16k tokens, Nq = Nk, three rotated rounds, on / off; bench/gpu/s76_dense_varlen_ab.py,
# bench/results/nvidia-h100/s76/call4): D = 128 (H = 16) forward plain 1000 / 2100 / 4000 1.16 / 1.30 / 1.26x,
# causal 1.02 / 1.10 / 1.22x, but causal 700 0.77x; forward + backward 1.31-1.47x from 1000, causal 700 1.00x (the
# backward alone, from the medians, 1.33-1.60x, 700 1.07x); D = 64 (H = 32) at 2100 forward plain 1.02x, causal
# 0.86x, forward + backward 1.21 / 1.24x. Routed where every round was >= 0.98 (the backward by its medians).
# Windows (left, 0) at D = 128 by session 80's width sweep (H100 80GB HBM3, 2026-12-07, S76_CASES=sweep128, left 256 /
# 512 / 1024 / 2048 x N 2100 / 4000 / 8000, bench/results/h100/s80/s79_sweep128.*; the entry read off the JSON by
# bench/gpu/window_entry_rule.py): forward 0.69-0.95x at 256, 0.95-1.02x at 512, 1.01-1.06x at 1024 (but one round
# 0.89 at 8000), 1.13-1.16x at 2048: from (4000, 2048); backward alone (medians) 0.67-0.79x at 256, 1.11-1.20x at
# 512, 1.37-1.49x from 1024: from (2100, 512). D = 64 (H = 32) by session 81's sweep (H100 80GB HBM3, 2026-12-08,
# S76_CASES=sweep64, left 512 / 1024 / 2048 x N 4000 / 8000, bench/results/h100/s81/s79_sweep64.*): forward
# 0.69-0.92x at 512, 0.80-0.96x at 1024, 0.88-0.97x at 2048: no entry (the Triton window kernel keeps it); backward
# alone 1.17-1.20x at 512, 1.18-1.24x at 1024, 1.28-1.35x at 2048 (forward + backward rounds 1.04-1.23x): from
# (4000, 512), the shortest N measured (the packed backward's own window rule starts at 3774).
DENSE_AS_VARLEN = {"fwd": {"plain": {128: 1000, 64: 2100}, "causal": {128: 1000}, "window": {128: (4000, 2048)}},
                   "bwd": {"plain": {128: 1000, 64: 2100}, "causal": {128: 700, 64: 2100},
                           "window": {128: (2100, 512), 64: (4000, 512)}}}


def dense_as_varlen(kernel: str, q, params: AttnParams, seqlen_q: int, seqlen_k: int) -> bool:
    """Whether a dense call may try the packed Gluon route (kernel "fwd" or "bwd"; params through
    _effective_window; the packed route's own rule decides after): a 4-D bf16 / fp16 CUDA q, not under the
    interpreter (the Gluon kernels have no interpreted form), no dropout, the kind and head dim listed in
    DENSE_AS_VARLEN[kernel] and min(Nq, Nk) at least its entry (a window's (shortest, narrowest) entry: also a
    window (left, 0) with left >= narrowest), and Nq or Nk not a multiple of the dense Gluon
    kernel's tiles (GLUON_TILES for the forward, FUSED_CONFIG for the backward): the aligned calls keep the dense
    routes measured for them."""
    if (q.dim() != 4 or not q.is_cuda or interpreting() or params.dropout_p > 0
            or q.dtype not in (torch.bfloat16, torch.float16)):
        return False
    d, kind = q.shape[-1], gluon_kind(params)
    entry = DENSE_AS_VARLEN.get(kernel, {}).get(kind, {}).get(d)
    if entry is None:
        return False
    # a window's entry may be (shortest, narrowest): only windows (left, 0) with left >= narrowest (session 80's
    # sweep: the packed route's gain grows with the band's width); a bare length takes any window
    shortest, narrowest = entry if isinstance(entry, tuple) else (entry, None)
    if min(seqlen_q, seqlen_k) < max(shortest, 1):
        return False
    if kind == "window" and narrowest is not None and (params.window_right != 0 or params.window_left < narrowest):
        return False
    tiles = GLUON_TILES if kernel == "fwd" else FUSED_CONFIG
    block_m, block_n = tiles[d][0], tiles[d][1]
    return seqlen_q % block_m != 0 or seqlen_k % block_n != 0


# Paged packed forwards (flash_attn_varlen_func(..., block_table=)) on the Gluon VARLEN kernel's VARLEN_PAGED
# (session 51; launchers/forward_gluon.fwd_varlen_paged) instead of kernels/fwd_paged.py: kind -> head dims, at
# GLUON_FWD_VARLEN_MIN_N's lengths, pages a multiple of the kernel's key tile. Measured (H200, 2026-12-04, bf16, 16k
# tokens, pages dealt in a random order, forward alone, five rotated rounds; bench/gpu/s51_paged_ab.py, s51 call 6),
# on / off: D = 128 (H = 16) plain 128..4096 page 256 1.74x (543 / 313 TFLOP/s), page 128 1.76x, 512..2048 1.58x,
# 1024..8192 page 512 1.95x; causal 1.60x, 1.60x, 1.55x, 1.63x; D = 64 (H = 32) 128..4096 page 256 plain 1.20x,
# causal 1.11x; every round >= 1.10x. Against the same batch packed: 0.95-1.01x (the Triton kernel: 0.51-0.62x at
# D = 128). Every (kind, D) passes the pre-registered rule.
# "window" (windows (left, 0), as the packed VARLEN WINDOW; bench/gpu/s51_paged_window_ab.py, s51 call 9, 128..4096):
# D = 128 page 256 (1024, 0) 1.51x the Triton paged kernel (0.294 / 0.444 ms), (256, 0) 1.40x, page 512 1.52x, every
# round >= 1.39x, 0.93-0.97x the packed window; D = 64 0.993x (every round): D = 128 only, by the rule.
GLUON_FWD_PAGED: dict[str, frozenset[int]] = {"plain": frozenset({64, 128}), "causal": frozenset({64, 128}),
                                              "window": frozenset({128})}


def gluon_fwd_paged(q, k_cache, v_cache, block_table, params: AttnParams, alibi, bd: int, varlen) -> bool:
    """Whether a paged packed forward (params through _effective_window) takes the Gluon VARLEN_PAGED kernel: no
    ALiBi, softcap or dropout, plain, the canonical causal mask or a window (left, 0), head_dim == BLOCK_D listed in
    GLUON_FWD_PAGED[kind] and in GLUON_FWD_VARLEN_MIN_N[kind] with max_seqlen_q at its entry or more, bf16 / fp16,
    q readable as (total_q, H * D) rows without a copy, contiguous caches with 16-byte aligned bases, the page a
    multiple of the kernel's key tile (a tile never straddles pages), num_blocks * page below 2^31 (the TMA row
    coordinate), block_table int32 with unit column stride and at least one column (the loader reads a sequence's
    first entry even when it has no keys), H <= 65535; never under the interpreter; then the warp-specialized
    kernels' switch."""
    kind = gluon_kind(params)
    table = GLUON_FWD_VARLEN_MIN_N.get(kind, {})
    if (bd not in GLUON_FWD_PAGED.get(kind, ()) or bd not in table or q.shape[-1] != bd or interpreting()
            or varlen.max_seqlen_q < table[bd] or q.shape[0] == 0 or q.shape[1] > 65535):
        return False
    if kind == "window" and params.window_right != 0:
        return False                       # (the VARLEN WINDOW variant: windows (left, 0))
    page = k_cache.shape[1]
    if not (alibi is None and params.softcap == 0 and params.dropout_p == 0
            and q.dtype in (torch.bfloat16, torch.float16) and rows_view_ok(q.unsqueeze(0))
            and all(c.dtype == q.dtype and c.is_contiguous() and c.data_ptr() % 16 == 0 for c in (k_cache, v_cache))
            and page % GLUON_TILES[bd][1] == 0 and k_cache.shape[0] * page < 2 ** 31
            and block_table.dtype == torch.int32 and block_table.stride(1) == 1 and block_table.shape[1] >= 1):
        return False
    return _warp_spec_switch(q)


# The fused Gluon backward's VARLEN variant (session 50; kernels/bwd_gluon_fused.py VARLEN,
# launchers/backward_gluon.fused_varlen_into): packed backwards by gluon_kind ("plain" / "causal") and
# head dim -> the shortest max_seqlen_q that takes it (deterministic=False only: dq reduce-added in fp32
# as the dense fused kernel's). Before it packed backwards ran bwd_ws_varlen.py (plain) / bwd.py (causal).
# Measured (H200, 2026-12-04, bf16, 16k tokens in random lengths lo..hi, the backward alone, five rotated rounds;
# bench/gpu/s50_bwd_varlen_ab.py, s50 call 2): on / off (TFLOP/s) at D = 128, H = 16: plain 64..256 1.87x (110 /
# 59), 128..512 1.97x, 256..1024 1.70x, 512..2048 1.20x (398 / 332), 128..4096 1.13x (444 / 392), 1024..8192 1.24x
# (479 / 386); causal 1.77x, 2.06x, 1.98x, 1.52x (321 / 211), 1.44x (397 / 277), 1.41x (444 / 314); every round
# >= 1.07x. D = 64, H = 32: plain 256..1024 1.22x, 128..4096 1.14x (350 / 308); causal 1.53x, 1.37x (327 / 238).
# The pre-registered rule (the smallest max_seqlen of a measured range from which all longer ranges win in every
# round): D = 128 from 250 (the shortest range's longest sequence), D = 64 from 978.
# "window" (the VARLEN WINDOW variant; s50 call 7, bench/gpu/s50_bwd_varlen_window_ab.py, the same protocol, windows
# (1024, 0) and (256, 256)), on / off (band TFLOP/s) at D = 128: 512..2048 1.56x (324 / 208) and 1.48x, 128..4096
# 1.54x (356 / 231) and 1.49x, 1024..8192 1.49x and 1.51x, 256..1024 (256, 256) 1.49x; every round >= 1.47x. (At
# 256..1024 the window (1024, 0) reaches past every sequence: a causal call, not this kind; both arms ran the same
# route, 0.996x.) D = 64, (1024, 0) at 128..4096: 1.43x. The rule read strictly (both windows in a range): D = 128
# from 1706, D = 64 from 3774.
GLUON_BWD_FUSED_VARLEN_MIN_N = {"plain": {128: 250, 64: 978}, "causal": {128: 250, 64: 978},
                                "window": {128: 1706, 64: 3774}}
# The head dims whose packed dropout backwards (plain or causal; the VARLEN WINDOW variant takes no dropout) take the
# fused VARLEN kernel's DROPOUT (session 51), at GLUON_BWD_FUSED_VARLEN_MIN_N's lengths. Measured (H200, 2026-12-04,
# bf16, p = 0.1, 16k tokens, backward alone, five rotated rounds; bench/gpu/s51_bwd_varlen_dropout_ab.py, s51 call 2),
# on / off (the route before: bwd_ws_varlen.py / bwd.py with dropout): D = 128, H = 16, plain 512..2048 1.55x (372 /
# 240 TFLOP/s), 128..4096 1.51x (415 / 275), 1024..8192 1.51x; causal 1.66x, 1.61x (373 / 231), 1.53x; D = 64, H = 32,
# 128..4096 plain 1.58x, causal 1.73x; every round >= 1.46x. The dropout costs 1.03-1.11x the same route at p = 0.
# Both head dims pass the pre-registered rule (every range >= 1.00, every round >= 0.98).
GLUON_BWD_FUSED_VARLEN_DROPOUT: frozenset[int] = frozenset({64, 128})


def gluon_bwd_fused_varlen(q, k, v, dout, lse, params: AttnParams, alibi, bd: int, varlen) -> bool:
    """Whether a packed backward (params through _effective_window) takes the fused Gluon kernel's VARLEN
    variant: deterministic=False, no ALiBi or softcap, a kind (gluon_kind: plain, the canonical causal
    mask, or a sliding window: the kernel's VARLEN WINDOW) the table lists; dropout (session 51) only plain or
    causal at a head dim of GLUON_BWD_FUSED_VARLEN_DROPOUT, with the key table's int32 indices (max_seqlen_k +
    H * total_q + 1 entries) below 2^31,
    bf16 / fp16, head_dim == BLOCK_D with an entry in GLUON_BWD_FUSED_VARLEN_MIN_N[kind] and max_seqlen_q >= it,
    tokens in both q and k, q, k, v, dout readable as (total, heads * D) rows without a copy and dout of q's
    dtype, lse (H, total_q) packed fp32, Hk <= 65535 (the grid's second dimension), H * total_q and total *
    heads * D below 2^31 (the kernel's int32 offsets); never under the interpreter; then the warp-specialized
    kernels' switch."""
    if params.deterministic:
        return False
    kind = gluon_kind(params)
    table = GLUON_BWD_FUSED_VARLEN_MIN_N.get(kind, {})
    if (bd not in table or q.shape[-1] != bd or interpreting() or varlen.max_seqlen_q < table[bd]
            or q.dim() != 3 or q.shape[0] == 0 or k.shape[0] == 0 or k.shape[1] > 65535):
        return False
    total_q, h, d = q.shape
    total_k, hk = k.shape[0], k.shape[1]
    if params.dropout_p > 0 and (kind == "window" or bd not in GLUON_BWD_FUSED_VARLEN_DROPOUT
                                 or max(varlen.max_seqlen_k, 1) + h * total_q + 1 > 2 ** 31):
        return False
    if not (alibi is None and params.softcap == 0
            and q.dtype in (torch.bfloat16, torch.float16) and dout.dtype == q.dtype
            and all(rows_view_ok(t.unsqueeze(0)) for t in (q, k, v, dout))
            and lse.dtype == torch.float32 and lse.is_contiguous() and tuple(lse.shape) == (h, total_q)
            and h * total_q < 2 ** 31 and max(total_q * h, total_k * hk) * d < 2 ** 31):
        return False
    return _warp_spec_switch(q)


# One-row dense forwards (flash_attn_func and its packed forms with Nq = 1, what a generation loop that does not
# call flash_attn_with_kvcache runs every step) with at least ONE_ROW_DECODE_MIN_NK keys take the split-KV decode
# kernel (launchers/decode.kvcache_fwd, k / v as a full cache): a prefill kernel gives such a call B * H programs,
# each streaming its head's whole K / V. H100, session 60 (bench/gpu/s60_one_row_route_probe.py, bf16, Hq = 32,
# Hk = 8, D = 128, L2 flushed, us, prefill route -> decode route, call 5): B = 1 2k 44 -> 18, 4k 79 -> 23, 8k 147 ->
# 31, 32k 554 -> 68; B = 8 2k 83 -> 45, 4k 147 -> 68, 8k 277 -> 112; but at 1k 23 -> 46 (B = 1, bound by the route's
# host time: ~17 us more than a replayed flash_attn_with_kvcache step) and 27.6 -> 28.1 (B = 8), hence the threshold
# (bench/NOTES.md "Session 60"). fp32 since session 61, once the decode kernel's one-row fp32 path rounded as the
# prefill kernels' do (kernels/decode.py's _update at QK_LEVELS > 0; tests/test_fp32.py passed with every one-row
# call routed), from ONE_ROW_DECODE_MIN_NK_FP32 keys: the prefill kernels' one-row fp32 tile is slower, so the
# route wins earlier (H100, session 61, B = 1 / 8, Hq = 32, Hk = 8, D = 128, us, prefill -> decode route): B = 1 128
# 35.7 -> 36.8, 256 63.2 -> 63.2, 512 118 -> 60.5, 1k 229 -> 63.2, 8k 1769 -> 176, 32k 7033 -> 586; B = 8 128 64.4 ->
# 39.9, 256 114 -> 61.0, 1k 402 -> 188, 8k 3104 -> 1148. Not with dropout (the decode kernel has none). Session 63,
# once fp32 decode took tiles without spills (launchers/decode.FP32_TILES; H100, bench/gpu/s60_one_row_route_probe.py
# fp32): B = 1 64 21.6 -> 16.1, 128 35.4 -> 25.2, 256 63.5 -> 41.6, 1k 227 -> 45.5; B = 8 64 40.4 -> 18.9, 128 64.0 ->
# 27.4: the route wins from 64 keys (fewer not measured).
ONE_ROW_DECODE = True
ONE_ROW_DECODE_MIN_NK = 2048          # bf16 / fp16
ONE_ROW_DECODE_MIN_NK_FP32 = 64


def one_row_decode(q, k, params: AttnParams, varlen=None) -> bool:
    """Whether launchers/forward.fwd runs this call on the decode kernel (ONE_ROW_DECODE): a one-row call
    (flashtriton.one_row.takes) with at least ONE_ROW_DECODE_MIN_NK keys (ONE_ROW_DECODE_MIN_NK_FP32 for fp32;
    max_seqlen_k for varlen)."""
    from .. import one_row
    min_nk = ONE_ROW_DECODE_MIN_NK_FP32 if q.dtype == torch.float32 else ONE_ROW_DECODE_MIN_NK
    return ONE_ROW_DECODE and one_row.takes(q, k, params, varlen, min_nk)


def gluon_fwd_persistent(causal: bool) -> bool:
    """Whether a forward that gluon_fwd routes runs the PERSISTENT kernel
    (GLUON_FWD_PERSISTENT)."""
    return GLUON_FWD_PERSISTENT["causal" if causal else "plain"]


def gluon_fwd_consumers(bd: int, causal: bool, persistent: bool) -> int:
    """The NUM_CONSUMERS for a forward that gluon_fwd routes, at a head dim the 3-consumer
    kernel has (fwd_gluon.CONSUMERS3_CONFIG): plain persistent calls GLUON_FWD_CONSUMERS[bd],
    causal one-block-a-CTA calls GLUON_FWD_CAUSAL_CONSUMERS[bd] (2 when absent); 2 for
    everything else (the kernel has no persistent causal and no one-block plain 3-consumer
    variant). (gluon_fwd's tile rule, Nq a multiple of 128, is stricter than the 3-consumer
    kernel's, Nq a multiple of 64.)"""
    if bd not in GLUON_CONSUMERS3_TILES or bool(causal) == bool(persistent):
        return 2
    n = (GLUON_FWD_CAUSAL_CONSUMERS if causal else GLUON_FWD_CONSUMERS).get(bd, 2)
    return 3 if n == 3 else 2


def gluon_fwd_own_tiles(bd: int, causal: bool, persistent: bool, consumers: int, seqlen: int) -> bool:
    """Whether a forward that gluon_fwd routes runs OWN_TILES: a causal one-block-a-CTA 2-consumer call
    at a head dim of GLUON_FWD_CAUSAL_OWN_TILES with max(Nq, Nk) = seqlen up to its length."""
    return (bool(causal) and not persistent and consumers == 2
            and seqlen <= GLUON_FWD_CAUSAL_OWN_TILES.get(bd, -1))


def gluon_kind(params: AttnParams) -> str:
    """The Gluon kernels' name for a call's mask (params through _effective_window): "plain"
    (no edge), "causal" (the canonical causal: right edge 0, no left edge) or "window"
    (any other edge); the key of their routing tables."""
    if params.window_left < 0 and params.window_right < 0:
        return "plain"
    return "causal" if params.window_right == 0 and params.window_left < 0 else "window"


def gluon_fwd(q, k, v, params: AttnParams, alibi, is_varlen: bool, bd: int, seqlen_q: int, seqlen_k: int) -> bool:
    """Whether the forward takes kernels/fwd_gluon.py (launchers.forward_gluon.fwd_into):
    dense (not varlen), no ALiBi, softcap or dropout, bf16 / fp16, no mask or window
    (table GLUON_FWD_MIN_N) or the canonical causal one (window_right == 0, no left window;
    table GLUON_FWD_CAUSAL_MIN_N), head_dim == BLOCK_D with an entry in that table,
    min(Nq, Nk) >= the entry, Nq and Nk multiples of the kernel's tile, q, k, v readable
    as (B * N, heads * D) rows without a copy (forward_gluon.rows_view_ok); never under
    the interpreter (Gluon has no interpreted form); then warp_spec_applies' switch
    (Hopper, FLASHTRITON_WARP_SPEC not 0, the GPU not shared). FLASHTRITON_WARP_SPEC=1
    does not lower the tables' lengths: calls under them (the forced tests of fwd_ws.py)
    keep their kernel, calls over them take this one as without the flag."""
    kind = gluon_kind(params)
    if kind == "window" or bd not in GLUON_TILES:
        return False
    block_m, block_n, _ = GLUON_TILES[bd]
    table = GLUON_FWD_CAUSAL_MIN_N if kind == "causal" else GLUON_FWD_MIN_N
    if bd in table and gluon_fwd_o_stage(kind, bd, seqlen_q, seqlen_k, q.dtype):
        # GLUON_FWD_O_STAGE's range may start below the table's length (causal D = 128: O_STAGE from 1k)
        table = {bd: min(table[bd], GLUON_FWD_O_STAGE[kind][bd][0])}
    if not _gluon_common(q, k, v, params, alibi, is_varlen, bd, seqlen_q, seqlen_k, table, block_m, block_n):
        return False
    return _warp_spec_switch(q)


def _gluon_common(q, k, v, params: AttnParams, alibi, is_varlen: bool, bd: int, seqlen_q: int, seqlen_k: int,
                  table: dict, block_m: int, block_n: int) -> bool:
    """The Gluon kernels' shared contract: dense, no ALiBi, softcap or dropout, bf16 /
    fp16, head_dim == BLOCK_D with an entry in table, min(Nq, Nk) >= the entry, Nq and Nk
    multiples of the tile, q, k, v readable as (B * N, heads * D) rows without a copy,
    B * H <= 65535 (one-block launches' grid (blocks, B * H); applied to persistent ones too,
    for one rule: review, session 30, when causal D = 64 came down to 4k, where B * H = 65600
    fits in memory); never under the interpreter (Gluon has no interpreted form)."""
    if (bd not in table or q.shape[-1] != bd or is_varlen or interpreting()
            or min(seqlen_q, seqlen_k) < table[bd] or q.shape[0] * q.shape[2] > 65535):
        return False
    return (alibi is None and params.softcap == 0 and params.dropout_p == 0
            and q.dtype in (torch.bfloat16, torch.float16)
            and seqlen_q % block_m == 0 and seqlen_k % block_n == 0 and all(rows_view_ok(t) for t in (q, k, v)))


def gluon_fwd_dropout(q, k, v, params: AttnParams, alibi, is_varlen: bool, bd: int, seqlen_q: int,
                      seqlen_k: int) -> bool:
    """Whether a dropout forward (0 < dropout_p < 1; params through _effective_window) takes
    the Gluon kernel's DROPOUT variant (launchers.forward_gluon.fwd_into with the call's
    rng): its kind (no mask "plain", the canonical causal "causal", any other window
    "window") has an entry in GLUON_FWD_DROPOUT_MIN_N for
    head_dim == BLOCK_D and min(Nq, Nk) reaches it; the Gluon kernels' other rules
    (_gluon_common without its dropout_p == 0) and the switch."""
    if not 0 < params.dropout_p < 1 or bd not in GLUON_TILES or bd in GLUON_PLAIN_CAUSAL_ONLY:
        return False
    table = GLUON_FWD_DROPOUT_MIN_N.get(gluon_kind(params), {})
    block_m, block_n, _ = GLUON_TILES[bd]
    if not _gluon_common(q, k, v, dataclasses.replace(params, dropout_p=0.0), alibi, is_varlen, bd, seqlen_q,
                         seqlen_k, table, block_m, block_n):
        return False
    return _warp_spec_switch(q)


def gluon_fwd_window(q, k, v, params: AttnParams, alibi, is_varlen: bool, bd: int, seqlen_q: int,
                     seqlen_k: int) -> bool:
    """Whether a sliding-window forward (params already through _effective_window: a left
    edge, or a right edge other than the causal 0) takes the Gluon kernel's WINDOW
    variant (table GLUON_FWD_WINDOW_MIN_N; gluon_fwd's other rules)."""
    windowed = params.window_left >= 0 or params.window_right > 0
    if not windowed or q.shape[-1] not in GLUON_TILES or q.shape[-1] in GLUON_PLAIN_CAUSAL_ONLY:
        return False
    block_m, block_n, _ = GLUON_TILES[q.shape[-1]]
    if not _gluon_common(q, k, v, params, alibi, is_varlen, bd, seqlen_q, seqlen_k, GLUON_FWD_WINDOW_MIN_N,
                         block_m, block_n):
        return False
    return _warp_spec_switch(q)


def gluon_fwd_window_early_q(bd: int, seqlen_q: int, seqlen_k: int) -> bool:
    """Whether a sliding-window forward that gluon_fwd_window sent to the Gluon kernel runs its
    PERSISTENT EARLY_Q variant (table GLUON_FWD_WINDOW_EARLY_Q, by BLOCK_D and min(Nq, Nk))."""
    return _listed_from(GLUON_FWD_WINDOW_EARLY_Q, bd, seqlen_q, seqlen_k)


def gluon_fwd_o_stage(kind: str, bd: int, seqlen_q: int, seqlen_k: int, dtype: torch.dtype) -> bool:
    """Whether a forward that gluon_fwd ("plain" / "causal") or gluon_fwd_window ("window") sent to the Gluon
    kernel runs PERSISTENT with O_STAGE (table GLUON_FWD_O_STAGE: min(Nq, Nk) >= its shortest and max(Nq, Nk) <=
    its longest; GLUON_FWD_O_STAGE_DTYPES: the dtypes of an entry measured for some only)."""
    span = GLUON_FWD_O_STAGE.get(kind, {}).get(bd)
    if span is None or dtype not in GLUON_FWD_O_STAGE_DTYPES.get((kind, bd), (dtype,)):
        return False
    return min(seqlen_q, seqlen_k) >= span[0] and max(seqlen_q, seqlen_k) <= span[1]


def gluon_fwd_window_lean_mask(bd: int, seqlen_q: int, seqlen_k: int) -> bool:
    """Whether a sliding-window forward that gluon_fwd_window sent to the Gluon kernel runs with
    LEAN_MASK (table GLUON_FWD_WINDOW_LEAN_MASK, by BLOCK_D and min(Nq, Nk))."""
    return _listed_from(GLUON_FWD_WINDOW_LEAN_MASK, bd, seqlen_q, seqlen_k)


def _listed_from(table: dict, bd: int, seqlen_q: int, seqlen_k: int) -> bool:
    """Whether table (BLOCK_D -> the shortest min(Nq, Nk)) lists bd and the call is that long."""
    n = table.get(bd)
    return n is not None and min(seqlen_q, seqlen_k) >= n


# The head dims whose backwards WITH dropout take the fused Gluon kernel's DROPOUT variant
# (by GLUON_BWD_FUSED_MIN_N's lengths, as without dropout); the rest keep bwd.py /
# bwd_ws.py's dropout backward. Session 26 (H200, 2026-12-01, bf16, 16k tokens, H = 16,
# p = 0.1, whole backward, two rounds, bench/gpu/s26_gluon_fused_dropout_ab.py ab,
# s26/call1), D = 128: plain 4k 3.00 ms against the library's dropout backward 3.65 (1.15x
# the fused backward without dropout), 16k 11.63 against 17.93 (1.11x); causal 4k 1.68
# against 2.16 (1.10x), 16k 5.82 against 9.51 (1.10x). Gradients within the f64
# criterion. D = 64 ran only in the smoke (right): not measured, not taken.
GLUON_BWD_FUSED_DROPOUT: frozenset[int] = frozenset({128})


def gluon_bwd_wide(d: int, causal: bool, windowed: bool, dropout: bool, seqlen_q: int) -> bool:
    """Whether a fused backward runs the WIDE tile (launchers.backward_gluon.fused_block_m):
    the head dim listed in GLUON_BWD_FUSED_WIDE under the call's kind, no window or dropout
    (not compiled or measured), Nq a multiple of its BLOCK_M."""
    if windowed or dropout or d not in FUSED_WIDE_CONFIG:
        return False
    heads = GLUON_BWD_FUSED_WIDE.get("causal" if causal else "plain", frozenset())
    return d in heads and seqlen_q % FUSED_WIDE_CONFIG[d][0] == 0


def _gluon_bwd_operands_ok(q, k, dout, lse, seqlen_q: int, seqlen_k: int, tile_index_bound: int) -> bool:
    """The Gluon backwards' operand rules beyond _gluon_common (gluon_bwd_fused, gluon_bwd_d256): dout
    readable as rows and of q's dtype; lse (B, H, Nq) packed fp32 (review, session 25: the preprocess
    writes delta with lse's strides, the kernels read both packed); the grid's B * Hk <= 65535; the
    int32 index arithmetic (B * H * Nq, B * max(Nq, Nk) and the kernel's tile_index_bound < 2^31)."""
    b, _, h, _ = q.shape
    hk = k.shape[2]
    return (rows_view_ok(dout) and dout.dtype == q.dtype and lse.dtype == torch.float32 and lse.is_contiguous()
            and tuple(lse.shape) == (b, h, seqlen_q) and b * hk <= 65535 and b * h * seqlen_q < 2 ** 31
            and b * max(seqlen_q, seqlen_k) < 2 ** 31 and tile_index_bound < 2 ** 31)


def gluon_bwd_d256(q, k, v, dout, lse, params: AttnParams, alibi, is_varlen: bool, bd: int, seqlen_q: int,
                   seqlen_k: int) -> bool:
    """Whether the backward takes the D = 256 fused Gluon kernel (launchers.backward_gluon_d256.
    bwd_into): deterministic=False, or deterministic=True where the split path takes the call
    (gluon_bwd_d256_split, GLUON_BWD_D256_SPLIT_DETERMINISTIC: every output written once; the fused
    kernel's dq is summed in the order the key blocks reach L2), head dim 256, kind "plain" or "causal" from GLUON_BWD_D256_MIN_N's length, no dropout / window /
    ALiBi / softcap, Nq and Nk multiples of the 64-row tiles (_gluon_common), lse (B, H, Nq)
    packed fp32, dout of q's dtype, B * Hk <= 65535 and the int32 bounds the launcher checks,
    a nonzero softmax_scale (bwd_into's check_inputs refuses 0, which the API admits: review,
    session 32, test_regression_d256_route_scale_zero); then the switch (Hopper,
    FLASHTRITON_WARP_SPEC not 0, the GPU not shared)."""
    if is_varlen or q.dim() != 4 or q.shape[-1] != 256 or bd != 256:
        return False
    if params.deterministic and not (GLUON_BWD_D256_SPLIT_DETERMINISTIC and gluon_bwd_d256_split(params, seqlen_q)):
        return False
    if not (math.isfinite(params.softmax_scale) and params.softmax_scale != 0):
        return False
    kind = gluon_kind(params)
    if kind not in GLUON_BWD_D256_MIN_N:
        return False
    block_m, block_n, _ = GLUON_BWD_D256_TILE
    if not _gluon_common(q, k, v, params, alibi, is_varlen, bd, seqlen_q, seqlen_k,
                         {256: GLUON_BWD_D256_MIN_N[kind]}, block_m, block_n):
        return False
    if not _gluon_bwd_operands_ok(q, k, dout, lse, seqlen_q, seqlen_k,
                                  (seqlen_k // block_n - 1) * (seqlen_q // block_m)):
        return False
    return _warp_spec_switch(q)


def gluon_bwd_fused(q, k, v, dout, lse, params: AttnParams, alibi, is_varlen: bool, bd: int, seqlen_q: int,
                    seqlen_k: int) -> bool:
    """Whether the backward takes the fused Gluon kernel (launchers.backward_gluon.
    fused_into): deterministic=False only (its dq is summed in whatever order the key
    blocks reach L2), table GLUON_BWD_FUSED_MIN_N by gluon_kind ("plain" / "causal" /
    "window": the WINDOW variant, no dropout there), the Gluon kernels' contract
    (_gluon_common, dout too), lse (B, H, Nq) packed fp32, dout of q's dtype, the grid's B * Hk <= 65535 and its int32
    index arithmetic; then the switch (Hopper, FLASHTRITON_WARP_SPEC not 0, the GPU not
    shared). Dropout only for head dims in GLUON_BWD_FUSED_DROPOUT, with the key
    table's int32 indices (Nk + H * B * Nq + 1 entries) below 2^31; otherwise by the same
    rules."""
    # (varlen first: its q is (total, H, D), which the dropout rule below cannot unpack;
    # session 26's review: varlen dropout backwards at D = 64 / 128 raised there,
    # tests/test_dropout.py::test_regression_varlen_dropout_backward_fused_rule)
    if is_varlen or q.dim() != 4 or params.deterministic or q.shape[-1] not in FUSED_CONFIG:
        return False
    dropout = params.dropout_p > 0
    if dropout:
        b, _, h, _ = q.shape
        if q.shape[-1] not in GLUON_BWD_FUSED_DROPOUT or seqlen_k + h * b * seqlen_q + 1 > 2 ** 31:
            return False
        params = dataclasses.replace(params, dropout_p=0.0)          # the rest as without dropout
    kind = gluon_kind(params)
    if kind == "window" and dropout:
        return False                     # (the WINDOW variant takes no dropout: launchers.backward_gluon)
    block_m, block_n, _ = FUSED_CONFIG[q.shape[-1]]
    table = GLUON_BWD_FUSED_MIN_N.get(kind, {})
    if not _gluon_common(q, k, v, params, alibi, is_varlen, bd, seqlen_q, seqlen_k, table, block_m, block_n):
        return False
    wide = gluon_bwd_wide(bd, kind == "causal", kind == "window", dropout, seqlen_q)
    if not wide and min(seqlen_q, seqlen_k) < GLUON_BWD_FUSED_NARROW_MIN_N.get(kind, {}).get(bd, 0):
        return False
    if not _gluon_bwd_operands_ok(q, k, dout, lse, seqlen_q, seqlen_k, (seqlen_k // block_n) * (seqlen_q // block_m)):
        return False
    return _warp_spec_switch(q)


def warp_spec_plain(dtype, params: AttnParams, alibi, is_varlen: bool, bd: int, seqlen_q: int, seqlen_k: int,
                    kernel: str = "fwd") -> bool:
    """The calls kernels/fwd_ws.py (kernel="fwd") or bwd_ws.py ("bwd") computes whole:
    no mask at all (not causal, no window, key and query counts that are multiples of the
    tiles), no varlen, ALiBi or softcap; dropout where WARP_SPEC_DROPOUT_FWD /
    WARP_SPEC_DROPOUT_BWD allow it (always with FLASHTRITON_WARP_SPEC=1, for the tests);
    bf16 / fp16 at a BLOCK_D of WARP_SPEC_TILES / BWD_WARP_SPEC_TILES.

    The dropout forward's history (H200, Triton 3.6.0, 2026-11-29): with the key table
    read through descriptors in fwd_ws.py, the lse of row 0 came out wrong in every call
    at D = 256 (bench/gpu/s8_lse_probe.py; the output right), and at D = 128 in 6-9% of
    calls with ten processes sharing the GPU (s8_ws_stress.py), never without dropout
    (20k calls): a compiler or shared-memory race we could not fix in the kernel. The
    kernel now hashes the keys itself, at the iota rows (kernels/fwd_ws.py).
    The backward kernels read the same table through descriptors; a stress of 26689
    calls a case under load found their gradients right (bench/gpu/s9_dropout_bwd.py)."""
    tiles = _ws_tiles(kernel)
    if bd not in tiles:
        return False
    n_mult, m_mult = ((tiles[bd].block_n, tiles[bd].block_m) if kernel == "fwd"
                      else (tiles[bd][0].block_n, tiles[bd][1].block_m))
    return (not is_varlen and alibi is None and params.softcap == 0
            and params.window_left < 0 and params.window_right < 0
            and (params.dropout_p == 0 or _warp_spec_forced()
                 or (WARP_SPEC_DROPOUT_FWD and bd not in WS_FWD_PERSISTENT_PLAIN_ONLY if kernel == "fwd"
                     else WARP_SPEC_DROPOUT_BWD))
            and dtype in (torch.bfloat16, torch.float16) and seqlen_q > 0 and seqlen_k > 0
            and seqlen_k % n_mult == 0 and seqlen_q % m_mult == 0)


def warp_spec_masked_fwd(dtype, params: AttnParams, alibi, is_varlen: bool, bd: int, seqlen_q: int,
                         seqlen_k: int) -> bool:
    """The masked calls kernels/fwd_ws.py computes (MASKED, every tile of the band masked,
    rows through an iota descriptor): a bottom-right causal mask or sliding window with a
    right edge (window_right >= 0; a left edge optional) and 0 < Nq <= Nk (no row without
    keys), counts multiples of the tile, no ALiBi, softcap, dropout or varlen (with
    dropout the specialization pass fails to compile it: Triton 3.6.0, sm_90a), bf16 / fp16,
    at a BLOCK_D in WARP_SPEC_MASKED_FWD["causal"] (window_right = 0, no left edge) or
    ["window"] (any BLOCK_D of WARP_SPEC_TILES with FLASHTRITON_WARP_SPEC=1, so the tests
    reach it under the interpreter)."""
    if params.window_right < 0 or bd not in WARP_SPEC_TILES:
        return False
    kind = "causal" if params.window_right == 0 and params.window_left < 0 else "window"
    if not (bd in WARP_SPEC_MASKED_FWD[kind] or _warp_spec_forced()):
        return False
    tile = WARP_SPEC_TILES[bd]
    return (not is_varlen and alibi is None and params.softcap == 0 and params.dropout_p == 0
            and dtype in (torch.bfloat16, torch.float16) and 0 < seqlen_q <= seqlen_k
            and seqlen_k % tile.block_n == 0 and seqlen_q % tile.block_m == 0)


# BLOCK_Ds whose causal / windowed forwards run fwd_ws.py's MASKED variant by default.
# Causal D = 256 (H200, 2026-11-29): 315 / 408 / 474 / 534 TFLOP/s at N = 1k / 2k / 4k / 16k
# against fwd.py's 274 / 313 / 350 / 415 (bench/gpu/s8_causal_ws_ab.py); D = 128 level
# (-8% at 16k), so not taken. Window (1024, 0) (bench/gpu/s9_window_ws_ab.py, 16k tokens):
# D = 256 400 / 403 band TFLOP/s at N = 4k / 16k against 326 / 331; D = 128 305 against
# 258 at 4k but 316 against 371 at 16k, so not taken.
# Causal D = 128 since session 16, and only where the launch is persistent (more query
# blocks than SMs, launchers.forward.WS_PERSISTENT) from N = 1k (512 since session 22;
# WS_MASKED_PERSISTENT_ONLY):
# graph replays, 16k tokens, H200, 2026-11-30 (bench/gpu/s16_deal_ab.py), persistent
# against fwd.py: 1k 384 / 377 against 340 / 336, 2k 438 / 434 against 417 / 391, 4k 471 /
# 471 against 460 / 419, 8k 493 / 499 against 461 / 454, 16k (block-major) 497 / 502
# against 449 / 490. One tile a program it lost at 1k (258 against 341, session 15). At
# 512 since session 22: 287 / 287 against 242-244 (bench/gpu/s22_short_fwd_ab.py, same
# method; eagerly 287 against 165-166).
WARP_SPEC_MASKED_FWD = {"causal": {128, 256}, "window": {256}}
# BLOCK_D -> the shortest max(Nq, Nk) at which its masked forward takes fwd_ws.py, and only
# with more query blocks than SMs (the persistent kernel's regime).
WS_MASKED_PERSISTENT_ONLY = {128: 512}


def fwd_persistent_launch(q, bd: int, seqlen_q: int, kv=()) -> bool:
    """Whether a dense fwd_ws.py launch at BLOCK_D bd can be persistent: more query blocks
    (B * H * blocks) than SMs, and q, k, v in a layout the persistent kernel reads
    (common._flat_view; the output is ours)."""
    batch, _, nheads, _ = q.shape
    tiles = batch * nheads * -(-seqlen_q // WARP_SPEC_TILES[bd].block_m)
    return tiles > sm_count(q.device) and all(_flat_view(t, bd) is not None for t in (q, *kv))


def persistent_only_ok(table: dict, q, bd: int, seqlen_q: int, seqlen_k: int, kv=()) -> bool:
    """Whether a forward at BLOCK_D bd passes a "persistent only" table (BLOCK_D -> the
    shortest max(Nq, Nk): WS_MASKED_PERSISTENT_ONLY, WS_FWD_PERSISTENT_PLAIN_ONLY): always
    for a BLOCK_D not in it or under FLASHTRITON_WARP_SPEC=1; else long enough and
    fwd_persistent_launch."""
    if bd not in table or _warp_spec_forced():
        return True
    return max(seqlen_q, seqlen_k) >= table[bd] and fwd_persistent_launch(q, bd, seqlen_q, kv)


# BLOCK_D -> the longest max(Nq, Nk) at which an unmasked forward runs fwd_ws.py only if its
# launch can be persistent (q, k, v have a common._flat_view; D under BLOCK_D has none),
# and fwd.py's short tile otherwise: one tile a program measured 298-301 / 401-407 TFLOP/s at N = 512 / 1k against
# fwd.py's (64, 64, 4, 3) 365-372 / 410-424 (graph replays, H200, sessions 13 and 15).
WS_PLAIN_SHORT_NEEDS_PERSISTENT = {128: 1024}


def plain_fwd_layout_ok(q, bd: int, seqlen_q: int, seqlen_k: int, kv=()) -> bool:
    """Whether an unmasked forward at BLOCK_D bd may take fwd_ws.py given its layout
    (WS_PLAIN_SHORT_NEEDS_PERSISTENT)."""
    if bd not in WS_PLAIN_SHORT_NEEDS_PERSISTENT or _warp_spec_forced():
        return True
    return (max(seqlen_q, seqlen_k) > WS_PLAIN_SHORT_NEEDS_PERSISTENT[bd]
            or all(_flat_view(t, bd) is not None for t in (q, *kv)))


# The dropout forward on fwd_ws.py (keys hashed in the kernel at the iota rows): its lse
# right in 15453 calls a case under load and 20 poisoned calls a case idle (H200,
# bench/gpu/s9_dropout_fwd.py; the versions that read the key table through
# descriptors were wrong: warp_spec_plain, kernels/fwd_ws.py).
WARP_SPEC_DROPOUT_FWD = True
# The dropout backward on bwd_ws.py: session 8 took it off as a precaution (see
# warp_spec_plain); session 9's stress (bench/gpu/s9_dropout_bwd.py, H200: 10 processes
# for 150 s, 26689 calls a case, D = 128 and 64) found no gradient off from bwd.py's, and
# it is 10% faster (B=2 H=16 N=4k D=128 p=0.1 non-causal: 2.046 ms against 2.271).
WARP_SPEC_DROPOUT_BWD = True
# The causal (right-window, ragged) dropout backward on the split path, per BLOCK_D: the
# longest max(Nq, Nk) it takes (it still needs the split's own rules: persistent from
# BWD_SPLIT_PERSISTENT_MIN_N, launchers.backward.WS_PERSISTENT's masked dropout kinds).
# bwd_ws.py's PARTIAL launch gets the call's key table, bwd.py's RESUME launches add the
# masked tiles with their own dropout (both leave fully dropout-scaled partials; sm_90a:
# dK/dV 168 registers, 300 / 512 bytes spilled one tile / persistent, dQ none,
# bench/bwd_ws_compile.py --masked --dropout). Why: causal dropout ran on bwd.py alone
# while causal p = 0 has the split, so its forward+backward read 1.29-1.32x the p = 0
# time (features bench, s19 / s21/call3). H200, 2026-11-30 (bench/gpu/s21_split_dropout_ab.py,
# s21/call4; causal p = 0.1, 16k tokens, backward TFLOP/s, two rounds, bwd.py -> split
# one tile a program -> split persistent): D = 128 1k 168 / 168 -> 168 / 168 -> 172 / 172,
# 2k 222 / 222 -> 222 / 223 -> 246 / 246, 4k 262 / 263 -> 270 / 270 -> 303 / 302, but 8k
# 288 / 285 -> 226 / 228 -> 228 / 228; D = 64 4k level (195-196), 8k 213 / 215 -> 192 / 194.
# 200 calls a case at 4k / 8k: no NaN, every call bitwise the first.
BWD_SPLIT_DROPOUT_MAX_N = {128: 4096}


# The warp-specialized backward kernels (kernels/bwd_ws.py), for the calls the
# warp-specialized forward computes whole (num_warps=4 -> 12). dK/dV: 64 query rows a
# tile, 128 keys a program (64 per consumer warpgroup); dQ: 128 query rows a program, 64
# keys a tile. sm_90a compile (2026-11-29): 168 registers, no spills (dK/dV with dropout:
# 132 bytes since session 9 folded 1 / (1 - p) out of the loop), 162 KB of shared memory
# each at 2 stages.
# H200, 2026-11-29, bf16 D = 128, 16k tokens (bench/results/nvidia-h200/prefill-d128.md):
# non-causal backward 245 / 333 / 392 / 431 / 449 / 458 TFLOP/s at N = 512 to 16k against
# 213 / 261 / 318 / 361 / 384 / 389 with bwd.py; causal (split, N >= 4k) 315 / 371 / 418
# against 291 / 319 / 342. The dK/dV kernel alone: 629 TFLOP/s at N = 4k (s7_dk_probe.py).
# D = 64 (sm_90a: (128, 128) tiles 117 KB of shared memory, dK/dV 8 bytes of spill):
# causal 8k split 284 against 267 with bwd.py.
BWD_WARP_SPEC_TILES = {128: (configs.Tile(64, 128, 4, 2), configs.Tile(128, 64, 4, 2)),
                       # D = 64: (128, 128) both (s8a.sh, bench/gpu/s7_d64_bwd_ab.py, 2026-11-29):
                       # 293 / 362 TFLOP/s non-causal at 2k / 8k against 273 / 334 for (64, 128) /
                       # (128, 64) and 279 / 332 for bwd.py.
                       64: (configs.Tile(128, 128, 4, 2), configs.Tile(128, 128, 4, 2))}


def _bwd_ws_tiles(bd: int):
    """(dK/dV tile, dQ tile) of the warp-specialized backward at BLOCK_D bd."""
    if interpreting():
        return configs.INTERPRETER_TILE, configs.INTERPRETER_TILE
    return BWD_WARP_SPEC_TILES[bd]
