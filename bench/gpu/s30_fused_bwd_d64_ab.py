"""Session 30: the fused Gluon backward's WIDE tile at D = 64 (kernels/bwd_gluon_fused.py
FUSED_WIDE_CONFIG: BLOCK_M = 128 query rows a ring tile instead of 64, 2 stages, dq_accum at a
128-byte swizzle; written and compiled offline in session 29/30 by a helper, never run; not
routed: policy.GLUON_BWD_FUSED_WIDE empty) against the 64-row fused kernel ("old") and cuDNN
(SDPA CUDNN_ATTENTION's backward through aten: autograd of the SDPA output), for issue 4
(backward >= 1.0x cuDNN at D = 64 from 2k; session 29: 0.88-0.94x).

    PYTHONPATH=src timeout 400 python bench/gpu/s30_fused_bwd_d64_ab.py          # checks + A/B, ~3-5 min
    PYTHONPATH=src python bench/gpu/s30_fused_bwd_d64_ab.py checks                # only the correctness part
    (then: PYTHONPATH=src python -m pytest -q -o addopts="" -m gpu tests/test_bwd_gluon_wide.py)

What runs: launchers.backward.bwd (the library's whole backward: delta preprocess, zero,
fused kernel, cast), the fused route forced at every N (policy.GLUON_BWD_FUSED_MIN_N[kind][64]
= 0: the 2k / 4k non-causal rows today take bwd_ws.py, 367 / 377 TFLOP/s in session 29),
"old" = the WIDE table empty, "wide" = GLUON_BWD_FUSED_WIDE[kind] = {64} (a spy on
backward_gluon._run_fused checks which BLOCK_M launched). D = 64, bf16, H = 32, 16k tokens (B =
16k / N), N = 2k / 4k / 8k / 16k, causal and not, deterministic=False, CUDA-graph replays
(bench.common.graph_time_ms, L2 flushed; eager where capture fails, marked *), two rounds, the
second in reverse order. First the checks: batch 0 / head 0 of each variant against float64
(<= 3x PyTorch's bf16 error, dq / dk / dv), finite everywhere, and wide against old over the
whole tensors (dk / dv expected BITWISE under causal; non-causal differs only by ROTATE's start
tile, i.e. the order of the fp32 sums over query tiles: printed, not required). A variant
that fails its check is not timed. TFLOP/s by attention_flops(..., backward) (2.5x forward).

PREDICTION (written before any run; bench/NOTES.md "Offline (a helper, session 29): the fused
backward at D = 64"). Per 64 x 128 (query x key) tile of a CTA today: tensor 5 matmuls x 2 WGs
x 2 x 64^3 = 5.24 MFLOP / 4096 = 1280 cycles; MUFU 2 x 33 EX2 a warp x 8 = 528 cycles an SMSP;
issue 2 x 450 = 900 an SMSP; measured ~3000 cycles (400 TFLOP/s at ~1.75 GHz): neither tensor
nor MUFU bound, but the per-tile chain (S -> exp2 -> dS -> dV / dK -> cross-WG ds_ready -> dQ ->
staging -> reduce, 9 bar.syncs, 6 mbarrier ops, 2 fence+MEMBAR a tile a WG). The WIDE tile
runs the same chain once per 128 rows: 709 instructions a warp for two 64-row tiles' work
(354 a tile, -21%), half the barrier / fence / reduce-issue / wgmma-wait round trips a FLOP,
S^T / dP^T wgmmas at N = 128 (shared-memory operand bytes 48 of 64 tensor cycles an
instruction instead of 32 of 32 at N = 64), the same MUFU and tensor work a FLOP.
  Non-causal 8k / 16k: +6 to +15% (centre +9%: 16k ~435, 8k ~425 TFLOP/s, ~0.97x cuDNN);
  2k / 4k (fused forced; today's route bwd_ws 367 / 377): fused-old ~355-375, wide +5-12%
  (~390-410: the fused route at D = 64 would then beat bwd_ws from 2k and GLUON_BWD_FUSED_MIN_N
  ["plain"][64] could drop to 2048).
  Causal: +3 to +10% at 4k-16k (the 128 x 128 diagonal tile masks half its pairs: ~N / 128 x
  8k wasted pairs, 3% at 2k, <1% at 16k); 2k +0-6%.
  dk / dv bitwise old's under causal. Wrong if wide gains < +3% at 16k non-causal: then the
  per-tile overheads are not the limit but the two WGs' lockstep through ds_ready (both
  softmaxes at once, tensor idle meanwhile) or shared-memory bandwidth (~224 KB a CTA tile,
  ~1750 cycles at 128 B / clock); the next lever is deferring dQ by one tile (a third dS^T
  buffer, +16 KB) so the WGs can run half a tile apart.
Offline (bench/gluon_bwd_compile.py --fused --wide, sm_90a): setmaxnreg 240 / 240 / 24, spill
24 bytes plain / 48 causal (prologue / epilogue only: no local access in the tile loops), 193
KB shared memory, tile loops 709 / 701 (plain) and 857 / 843 (causal, 147 masked) instructions
a warp, 64 MUFU.EX2, 40 HGMMA.
"""

import os
import sys

from fused_bwd_ab import Setup, Variant, main

NS = [int(x) for x in os.environ.get("S30_NS", "2048,4096,8192,16384").split(",")]
CHECK_NS = [int(x) for x in os.environ.get("S30_CHECK_NS", "2048,8192").split(",")]
WIDE = Variant("wide", "GLUON_BWD_FUSED_WIDE", ("plain", "causal"),
               launched=lambda kw: kw["BLOCK_M"], expect=lambda on: 128 if on else 64)

if __name__ == "__main__":
    main(sys.argv, Setup(WIDE, d=64, h=32, cases=[(n, c) for n in NS for c in (False, True)], check_ns=CHECK_NS))
