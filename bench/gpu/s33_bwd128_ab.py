"""Session 33: the fused Gluon backward's VEC_STAGE at D = 128 (kernels/bwd_gluon_fused.py: lse /
delta reach S^T's column slice layout through per-warpgroup staging rows in shared memory, stored
and ordered by ONE warpgroup barrier placed while the S^T / dP^T wgmmas run, instead of the
compiler's two layout conversions through a common scratch after the wgmma waits; written and
compiled offline by a session-33 helper, never run; not routed: policy.GLUON_BWD_FUSED_VEC_STAGE
empty) against the routed fused kernel ("old") and cuDNN (SDPA CUDNN_ATTENTION's backward), for
issue 4 (the D = 128 backward >= 1.0x cuDNN from 2k; today 0.94-0.99x).

    PYTHONPATH=src timeout 170 python bench/gpu/s33_bwd128_ab.py          # smoke + checks + A/B, < 150 s
    PYTHONPATH=src timeout 120 python bench/gpu/s33_bwd128_ab.py checks   # smoke + the correctness part only
    (then: PYTHONPATH=src python -m pytest -q -o addopts="" -m gpu tests/test_bwd_gluon_vec_stage.py)

What runs: first a SMOKE under faulthandler.dump_traceback_later (S33_SMOKE_S, default 90 s: a
barrier / phase bug hangs the GPU; the traceback is printed and the process exits instead): one
small vec_stage launch, plain and causal, synchronised. Then bench/gpu/fused_bwd_ab.py's checks
and timings (the whole backward launchers.backward.bwd: delta preprocess, zero, fused kernel,
cast, the fused route forced; "old" = the VEC_STAGE table empty, "vecstage" = GLUON_BWD_FUSED_
VEC_STAGE[kind] = {128}; a spy on backward_gluon._run_fused checks VEC_STAGE in the launch):
batch 0 / head 0 of each against float64 (<= 3x PyTorch's bf16 error, dq / dk / dv, all
finite), vecstage against old over the whole tensors (dk / dv expected BITWISE: only the path of
lse / delta into registers changes; dq differs by fp32 summation order); then two rounds of
CUDA-graph replays (the second in reverse order) of old / vecstage / cuDNN, D = 128, bf16, H =
16, 16k tokens (B = 16k / N), N = 2k, 4k, 16k non-causal and 4k, 16k causal; a Markdown table
of TFLOP/s (attention_flops(..., "bwd")). The whole script runs under a second faulthandler
timer (S33_HANG_S, default 160 s).

PREDICTION (written before any run, from the offline counts; bench/wip/gluon-bwd128-s33.md).
Today's tile (64 queries x 128 keys a CTA, one consumer warpgroup (WG) a 64-key half), per warp,
offline sm_90a SASS of the tile loops: 483 / 491 instructions, 9 BAR.SYNC, 6 SYNCS (3 mbarrier
waits, 3 arrives), 32 HGMMA, 32 MUFU.EX2. Three of the 9 bar.syncs are the compiler's layout
conversions of lse / delta (one value a thread -> the column slice of the wgmma accumulator
layout, 16 a thread) through one shared scratch, all after a wgmma wait, i.e. on the chain from
S^T's arrival to exp2 and from dP^T's arrival to dS^T:
    S^T wait -> STS lse -> BAR -> 4 LDS.128 -> exp2 ...;   dP^T wait -> BAR (the scratch's
    reuse) -> STS delta -> BAR -> 4 LDS.128 -> dS^T ...
VEC_STAGE: STS lse, STS delta (own rows a WG, two allocations) -> BAR, all right after the
S^T / dP^T issue, under the wgmmas (the stores' global loads were issued before the ready wait,
as today); after each wait only the LDS (8 LDS.64 each). Offline: 7 BAR.SYNC a tile (-2), one of
them off the chain; 495 / 490 instructions a warp (+12 / -1: 16 LDS.64 for 8 LDS.128), HGMMA /
EX2 unchanged, no local memory in the loops, spill 8 bytes (plain, was 0; outside the loops, as
causal's 8 of today), +1 KB shared memory (198 KB); causal 563 / 555 (556 / 549), 7 BAR.SYNC.
The routed kernels' SASS unchanged (36 of 36 variants byte-identical, bench/gluon_bwd_fused_
sass_hash.py). Removed from each WG's chain a tile: ~2 barrier round trips + 2 store->load
round trips, ~100-150 cycles of ~4,320 (Nsight at 8k: 17.15 M cycles / 3,972 tiles an SM; cuDNN's
equivalent 3,955; the gap 363 a tile), and 2 of the 9 warpgroup barriers whose sibling-warp waits
made 35% of the warps' stall cycles.
  Non-causal 2k / 4k / 16k: +1.5 to +4% on the whole backward (centre +2.5%; the side kernels,
  ~2-3% of the time, unchanged): 16k ~515 TFLOP/s (0.97x cuDNN), 2k / 4k ~465 / ~485.
  Causal 4k / 16k: +1 to +3.5% (centre +2%; the same two barriers, the masked diagonal tiles
  unchanged): ~0.98-1.01x cuDNN.
  dk / dv bitwise old's; dq rel. diff ~1e-3 or less (fp32 summation order).
  So issue 4 is probably NOT closed by this lever alone (a third of the gap, at the centre).
  Wrong if < +1% at 16k non-causal: then the conversion barriers are not on the critical path (the
  WGs meet at the ds_ready / empty / ds_free arrive barriers anyway, where the stalls sit), and
  the next lever is those arrives (bar.sync + elected arrive -> per-thread arrives, count 256;
  needs the mbarrier's shared address in inline asm, which Gluon 3.6 does not expose).
ROUTING RULE: set policy.GLUON_BWD_FUSED_VEC_STAGE[kind] = frozenset({128}) for a kind ("plain" /
"causal") only if vecstage beats old by >= 2% in BOTH rounds at every N of that kind timed here
(2k / 4k / 16k plain; 4k / 16k causal), and its checks passed (f64 criterion, dk / dv bitwise);
otherwise leave it empty (the code and tests stay, as DEFER_DQ's).
"""

import faulthandler
import os
import sys
import time

import torch

from fused_bwd_ab import Setup, Variant, main

D = 128
CASES = [(2048, False), (4096, False), (16384, False), (4096, True), (16384, True)]
CHECK_NS = [int(x) for x in os.environ.get("S33_CHECK_NS", "2048,16384").split(",")]
VEC_STAGE = Variant("vecstage", "GLUON_BWD_FUSED_VEC_STAGE", ("plain", "causal"),
                    launched=lambda kw: bool(kw.get("VEC_STAGE", False)), expect=lambda on: on)


def smoke() -> None:
    """One small VEC_STAGE launch, plain and causal, synchronised, under a faulthandler timer (an
    mbarrier phase bug hangs the GPU: print the stacks and exit instead of waiting forever)."""
    from flashtriton.launchers import backward_gluon

    faulthandler.dump_traceback_later(float(os.environ.get("S33_SMOKE_S", "90")), exit=True)
    for causal in (False, True):
        t0 = time.time()
        torch.manual_seed(0)
        q, k, v = (torch.randn(1, 1024, 4, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        dout = torch.randn_like(q)
        lse = torch.zeros(1, 4, 1024, device="cuda")
        delta = torch.zeros(1, 4, 1024, device="cuda")
        dq, dk, dv = backward_gluon.fused_gluon(q, k, v, dout, lse, delta, D ** -0.5, causal, vec_stage=True)
        torch.cuda.synchronize()
        fin = all(torch.isfinite(t).all().item() for t in (dq, dk, dv))
        print(f"smoke causal={causal}: {'finite' if fin else 'NON-FINITE'} in {time.time() - t0:.1f} s", flush=True)
    faulthandler.cancel_dump_traceback_later()


if __name__ == "__main__":
    smoke()
    faulthandler.dump_traceback_later(float(os.environ.get("S33_HANG_S", "160")), exit=True)
    main(sys.argv, Setup(VEC_STAGE, d=D, h=2048 // D, cases=CASES, check_ns=CHECK_NS))
    faulthandler.cancel_dump_traceback_later()
