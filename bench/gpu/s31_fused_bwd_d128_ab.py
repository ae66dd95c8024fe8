"""Session 31: the fused Gluon backward's DEFER_DQ at D = 128 (kernels/bwd_gluon_fused.py: each
ring tile's dQ wgmmas and TMA reduce-add run one tile later, in the next tile's dQ slot, the last
tile's after the loop; written and compiled offline in session 31 by a helper, never run; not
routed: policy.GLUON_BWD_FUSED_DEFER empty) against the current fused kernel ("old") and cuDNN
(SDPA CUDNN_ATTENTION's backward through aten: autograd of the SDPA output), for issue 4
(backward >= 1.0x cuDNN at D = 128 from 2k; prefill.md: non-causal 0.94-0.96x, causal
0.96-0.99x). Non-causal only: DEFER_DQ is compiled for the plain kernel (causal spilled 148
bytes, 12 local accesses a tile, offline: not offered).

    PYTHONPATH=src timeout 400 python bench/gpu/s31_fused_bwd_d128_ab.py          # checks + A/B, ~3-4 min
    PYTHONPATH=src python bench/gpu/s31_fused_bwd_d128_ab.py checks                # only the correctness part
    S31_D=64 PYTHONPATH=src timeout 400 python bench/gpu/s31_fused_bwd_d128_ab.py  # the same at D = 64 (H = 32)
    (then: PYTHONPATH=src python -m pytest -q -o addopts="" -m gpu tests/test_bwd_gluon_defer.py)

What runs: launchers.backward.bwd (the library's whole backward: delta preprocess, zero, fused
kernel, cast), the fused route forced at every N (policy.GLUON_BWD_FUSED_MIN_N["plain"][D] = 0;
at D = 128 it is 1k already), "old" = the DEFER table empty, "defer" = GLUON_BWD_FUSED_DEFER
["plain"] = {D} (a spy on backward_gluon._run_fused checks DEFER_DQ in the launch). D = 128,
bf16, H = 16 (hidden 2048), 16k tokens (B = 16k / N), N = 2k / 4k / 8k / 16k, non-causal,
deterministic=False, CUDA-graph replays (bench.common.graph_time_ms, L2 flushed; eager where
capture fails, marked *), two rounds, the second in reverse order. First the checks: batch 0 /
head 0 of each variant against float64 (<= 3x PyTorch's bf16 error, dq / dk / dv), finite
everywhere, and defer against old over the whole tensors (dk / dv expected BITWISE: the same
dK / dV wgmmas on the same operands in the same order, ROTATE on in both; dq differs by fp32
summation order only). A variant that fails its check is not timed. TFLOP/s by
attention_flops(..., backward) (2.5x forward).

PREDICTION (written before any run; bench/NOTES.md "Offline (a helper, session 31): the fused backward at D = 128"). Per 64 x 128 (query x key)
CTA tile today (offline SASS, sm_90a): tensor 5 matmuls x 2 WGs x 2 x 64 x 64 x 128 = 10.5
MFLOP / 4096 = 2560 cycles; MUFU 2 warps x 33 x 8 = 528 cycles an SMSP; issue 483 + 491 = 974
an SMSP; wgmma shared-memory operand bytes 272 KB + TMA / dS^T / staging / reduce 112 KB = 384
KB (~3000 cycles if 128 B a clock); measured ~4770 cycles (502 TFLOP/s at 16k, ~1.75 GHz,
kernel ~10.8 of 10.95 ms). The two WGs run in lockstep: tile g's dQ needs the other WG's dS^T
half of tile g (ds_ready), so both do their softmax (~600 cycles) and their staging / fences /
reduce tail (~300-500) at the same time, with the tensor pipe idle or half idle meanwhile
(~1000 of the 4770 cycles). DEFER_DQ computes tile g's dQ in tile g + 1: a WG waits for the
other's dS^T of the PREVIOUS tile, so (2 dS^T buffers: the lead bounded by ds_free at ~half a
tile) the WGs can run up to half a tile apart, one's softmax and tail under the other's dV / dK
/ dQ wgmmas. Cost: +46 / +11 instructions a tile (529 / 502, issue still ~21%), the last tile's
dQ after the loop unhidden (1 tile in 32-256 a CTA).
  Non-causal 16k / 8k: +3 to +8% (centre +5%: ~525-530 / ~520 TFLOP/s, ~1.00x cuDNN);
  4k: +3 to +7% (~490-505); 2k: +2 to +6% (~465-480, 32 tiles a CTA: the drain is ~1/32).
  dk / dv bitwise old's; dq within fp32 order (rel. diff ~1e-3 or less).
  Wrong if defer gains < +2% at 8k / 16k: then the lockstep is not the limit and shared-memory
  bandwidth (~3000 of ~4770 cycles by the estimate above) or the per-WG chain's latencies
  are; the next lever is fewer shared-memory bytes a tile (dK's A operand from registers
  again, 8 KB a WG a tile, at a register cost) or the dq-writer partition (store_wait + bar
  + reduce issue off the consumers: ~1-2%).
Offline (bench/gluon_bwd_compile.py --fused --defer, sm_90a): setmaxnreg 240 / 240 / 24, spill
8 bytes (outside the tile loops; 0 local accesses in them, also through the JIT binder with
the launcher's arguments at 2k / 16k), 193 KB shared memory (unchanged: 2 dS^T buffers), tile
loops 529 / 502 instructions a warp (old 483 / 491), 32 MUFU.EX2, 9 BAR.SYNC (old 9). All 28
existing variants' SASS byte-identical (bench/gluon_bwd_fused_sass_hash.py).
"""

import os
import sys

from fused_bwd_ab import Setup, Variant, main

D = int(os.environ.get("S31_D", "128"))
NS = [int(x) for x in os.environ.get("S31_NS", "2048,4096,8192,16384").split(",")]
CHECK_NS = [int(x) for x in os.environ.get("S31_CHECK_NS", "2048,16384").split(",")]
DEFER = Variant("defer", "GLUON_BWD_FUSED_DEFER", ("plain",),
                launched=lambda kw: bool(kw.get("DEFER_DQ", False)), expect=lambda on: on)

if __name__ == "__main__":
    main(sys.argv, Setup(DEFER, d=D, h=2048 // D, cases=[(n, False) for n in NS], check_ns=CHECK_NS))
