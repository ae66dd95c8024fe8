"""Session 43: the causal D = 128 forward at 8k, the routed one-block kernel against the persistent O_STAGE kernel
with the host's longest-first deal (the route at 1k-2k since session 42), cuDNN in the same process.

Why: the grid's causal 8k forward reads 0.96x cuDNN (565 / 585, s42 15:34 UTC), the only D = 128 causal forward
cell from 2k below 1.0x. Session 42 measured O_STAGE level at 4k (578 -> 571, 571 -> 594 in two runs) and behind at
16k (714 -> 695: the banded deal's imbalance), 8k never. Its TIMELINE at 8k: one block a CTA waits 1.44 us for Q and
1.73 us between blocks on an SM (SM end max / mean 1.053); persistent O_STAGE waits ~0.06 us for Q with ~0.4 us gaps.
PREDICTION: per 8k block (~32 key tiles, ~50 us) O_STAGE saves ~2.7 us (5%) and the deal's imbalance costs 1-3%:
scheduled O_STAGE +1-4% at 8k, bf16 and fp16, outputs bitwise. Routing rule: >= 2% in all three rounds in both
dtypes -> policy.GLUON_FWD_O_STAGE["causal"][128] up to 8k.

    PYTHONPATH=src python bench/gpu/s43_causal8k_ab.py

Session 44: S43C_N=16384 runs the same A/B at 16k (B = 1; never measured with the host's deal since session 42's
banded O_STAGE lost there). PREDICTION (16k): ~15.5 blocks a CTA of 1-128 key tiles (~100 us on average), the same
~2.7 us a block saved, the longest-first deal's imbalance ~1%: +1-2%, bitwise; rule as above (>= 2% every round,
both dtypes) -> the O_STAGE range to 16k.
"""
import os

import torch

from s42_o_stage_ab import run_case


def main():
    d, h, n = 128, 16, int(os.environ.get("S43C_N", "8192"))
    b = 16384 // n
    for dtype in (torch.bfloat16, torch.float16):
        run_case(f"causal {n}", b, n, h, d, dtype, 2 * b * h * n * n * d, {
            "one block (routed)": dict(causal=True),
            "scheduled O_STAGE": dict(causal=True, persistent=True, scheduled=True, o_stage=True),
        }, causal_sdpa=True)


if __name__ == "__main__":
    main()
