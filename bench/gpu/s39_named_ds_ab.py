"""Session 39: the fused Gluon backward's NAMED_DS (kernels/bwd_gluon_fused.py: the consumer WGs' dS^T hand-over,
ds_ready, and buffer release, ds_free, by hardware named barriers, bar.arrive / bar.sync of 256 threads, instead of
mbarriers) against the current kernel ("old") and cuDNN, for issue 4 (D = 128 backward >= 1.0x cuDNN from 2k; the
grid: non-causal 0.93-0.96x, causal 0.95-0.98x). Harness: fused_bwd_ab.py (the library's whole backward, the fused
route forced, checks against float64 first, then two rounds of CUDA-graph replays, the second reversed).

    PYTHONPATH=src timeout 400 python bench/gpu/s39_named_ds_ab.py            # D = 128 checks + A/B
    S39_D=64 PYTHONPATH=src timeout 400 python bench/gpu/s39_named_ds_ab.py   # D = 64 (H = 32; the WIDE / DQ_SPLIT_M tile)

Why (bench/wip/gluon-bwd128-s33.md): at equal tensor-pipe cycles the kernel issues at IPC 0.98 against cuDNN's 1.48,
35% of its stall cycles at CTA barriers; VEC_STAGE (session 33) removed the three lse / delta layout-conversion
bar.syncs and gained nothing, leaving the ones around Gluon's mbarrier arrivals (one elected thread, a WG bar.sync
first) as the candidates. Offline (bench/gluon_bwd_compile.py --fused --named, sm_90a): per consumer tile loop the
mbarrier operations 6 -> 2 (ready's wait and empty's arrival stay), two WG bar.syncs gone (the one before the
elected ds_ready arrival and the one before ds_free's), two named BAR.ARV and two named BAR.SYNC (256 threads) in,
so 9 BAR.SYNC as before but two of them the cross-WG waits that the mbarrier try_wait loops were; instructions
491 / 482 a tile (old 483 / 491); spill 8 bytes outside the loops (old 0; causal 8 as old), none in the loops.

PREDICTION (before any run): +0.5 to +2% at D = 128 (both masks), i.e. 0.94-0.98x cuDNN non-causal; level at D = 64.
The two WGs still wait for each other at the same points (the dependency stays), so only the per-tile barrier
latency (~100-200 of ~4,300 cycles a tile) can go. Wrong if below +0.5% in both rounds: the barriers are where the
waiting shows, not what costs.
"""

import os
import sys

from fused_bwd_ab import Setup, Variant, main

D = int(os.environ.get("S39_D", "128"))
CASES = [(2048, False), (4096, False), (16384, False), (4096, True), (16384, True)]
NAMED = Variant("named", "GLUON_BWD_FUSED_NAMED_DS", ("plain", "causal"),
                launched=lambda kw: bool(kw.get("NAMED_DS", False)), expect=lambda on: on)

if __name__ == "__main__":
    main(sys.argv, Setup(NAMED, d=D, h=2048 // D, cases=CASES, check_ns=[2048, 4096]))
