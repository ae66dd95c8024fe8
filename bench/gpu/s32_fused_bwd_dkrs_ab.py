"""The fused Gluon backward's DK_RS at D = 128 (kernels/bwd_gluon_fused.py: dK += dS^T Q with
dS^T's A operand from registers, issued right after dV's wgmma, instead of from the dS^T
shared-memory buffer after its store / fence / ds_ready arrival; written and compiled offline by
a helper, never run; not routed: policy.GLUON_BWD_FUSED_DK_RS empty) against the current fused
kernel ("old") and cuDNN (SDPA CUDNN_ATTENTION's backward), for issue 4 (backward >= 1.0x cuDNN
at D = 128 from 2k; non-causal 0.94-0.96x, causal 0.96-0.99x). On the shared harness
bench/gpu/fused_bwd_ab.py (checks first: head 0 against float64, dk / dv of dkrs against old
over the whole tensors (expected BITWISE), dq within fp32 order; then two timing rounds of
CUDA-graph replays, the second reversed).

    PYTHONPATH=src timeout 400 python bench/gpu/s32_fused_bwd_dkrs_ab.py          # checks + A/B, ~3-4 min
    PYTHONPATH=src python bench/gpu/s32_fused_bwd_dkrs_ab.py checks                # only the correctness part
    (then: PYTHONPATH=src python -m pytest -q -o addopts="" -m gpu tests/test_bwd_gluon_dkrs.py)

Cases: bf16, D = 128, H = 16, 16k tokens, N = 2k / 4k / 8k / 16k non-causal, 4k / 16k causal.

PREDICTION (written before any run; bench/wip/fused-bwd-d128-dkrs.md). Per 64 x 128 CTA tile
(offline SASS, sm_90a): tensor 2560 cycles; measured ~4770 (old 502-520 TFLOP/s at 16k);
shared-memory bytes ~384 KB (~3000 cycles at 128 B / clock), wgmma operands 272 KB of them.
Per-step operand bytes against math (a WG, 128 B / clock): S^T / dP^T / dQ m64n64k16 ss 4 KB
for 32 cycles (1.0: at the bandwidth edge), dK m64n128k16 ss 6 KB for 64 (0.75), dV rs 4 KB
for 64 (0.5). DK_RS: dK rs 4 KB for 64 (0.5): -16 KB a CTA tile (-4% of the bytes, ~125
cycles), and dK's issue no longer waits for ds_free, the dS^T store, the fence and the WG
barrier + arrival (~100-200 cycles of the chain, dK's 256-512 tensor cycles now under them);
dK still retired after the dQ issue (the queue holds dK then dQ, as before). Costs: +20 / +12
instructions a warp a tile (503 / 503 against 483 / 491: the dQ B descriptors made a tile, an
opaque K index against a hoisted-descriptor spill), spill 60 bytes outside the loops (0 in
them); causal 558 / 559 (556 / 549), spill 8 as before.
  Non-causal 8k / 16k: +1 to +4% (centre +2%: ~530 TFLOP/s at 16k, ~1.00x cuDNN);
  4k: +1 to +3%; 2k: +0 to +3%. Causal 4k / 16k: +1 to +3%.
  dk / dv bitwise old's; dq within fp32 order.
  Wrong if < +0.5% at 8k / 16k: then neither the dS^T store chain before dK nor the 16 KB of
  operand reads is on the critical path (a latency chain elsewhere: the tail's staging /
  reduce, or the softmax); next the dq-writer partition or the alternating full-D dQ (one WG
  a tile, m64n128k16: -16 KB more, the two WGs offset by construction). A loss (> 1%) would
  say the lost overlap of dK with dQ's issue (dK now waited before the ds_ready wait) costs
  more than it saves (the +20 instructions a tile, or dS^T's 16 registers held to the dQ issue).
"""

import os
import sys

from fused_bwd_ab import Setup, Variant, main

D = 128                  # (D = 64: the library routes the WIDE tile with DQ_SPLIT_M, which DK_RS refuses)
NS = [int(x) for x in os.environ.get("S32_NS", "2048,4096,8192,16384").split(",")]
CHECK_NS = [int(x) for x in os.environ.get("S32_CHECK_NS", "2048,16384").split(",")]
DKRS = Variant("dkrs", "GLUON_BWD_FUSED_DK_RS", ("plain", "causal"),
               launched=lambda kw: bool(kw.get("DK_RS", False)), expect=lambda on: on)

if __name__ == "__main__":
    main(sys.argv, Setup(DKRS, d=D, h=2048 // D, cases=[(n, False) for n in NS] + [(4096, True), (16384, True)],
                         check_ns=CHECK_NS))
