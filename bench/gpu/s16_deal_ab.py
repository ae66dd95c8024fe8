"""Session 16: the persistent masked forward's deal by shape (launchers.forward.
WS_HEAD_MAJOR_MAX_BLOCKS: head-major snake rounds up to 32 query blocks a head, block-major
beyond; windows head-major). Library calls, graph replays, 16k tokens (B = 16k / N, H = 16
at D = 128, 8 at D = 256), TFLOP/s (causal counts half; windows the band), each variant
twice in alternating order, bitwise check against the first variant.

Prediction (session 15's figures): D = 256 causal 2k head-major +5% over block-major
(454 / 430), 4k +2-5%, 8k (64 blocks) within 2% either way; D = 128 causal on the
persistent fwd_ws.py head-major: 4k 1.05x fwd.py (468 / 446), 1k / 2k +5-15% (persistence
gained most at short N unmasked), 8k / 16k block-major level with fwd.py (504 / 494-503 at
16k). Window (1024, 0) D = 256 persistent head-major +5-8% over one tile (438-452 / 407-425).
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
from s15_persistent_variants_ab import case  # noqa: E402

from flashtriton.launchers import forward, plans  # noqa: E402

BASE = dict(WS_PERSISTENT=set(forward.WS_PERSISTENT), WS_HEAVY_FIRST=forward.WS_HEAVY_FIRST,
            WS_HEAD_MAJOR_MAX_BLOCKS=forward.WS_HEAD_MAJOR_MAX_BLOCKS, WS_PERSISTENT_WINDOWS=forward.WS_PERSISTENT_WINDOWS)


def setting(persistent=None, deal="head", force=False):
    def apply():
        plans.clear()
        forward.WS_PERSISTENT = set(persistent or ())
        forward.WS_HEAVY_FIRST = True
        forward.WS_HEAD_MAJOR_MAX_BLOCKS = {bd: 10**6 if deal == "head" else 0 for bd in (128, 256)}
        forward.WS_PERSISTENT_WINDOWS = True
        if force:
            os.environ["FLASHTRITON_WARP_SPEC"] = "1"
        else:
            os.environ.pop("FLASHTRITON_WARP_SPEC", None)
    return apply


def main():
    with torch.no_grad():
        for n in (2048, 4096, 8192):
            case(256, n, causal=True, variants={
                "one-tile": setting(), "P head": setting({(256, True, False)}, "head"),
                "P block": setting({(256, True, False)}, "block")})
        for n in (4096, 16384):
            case(256, n, window=(1024, 0), variants={
                "one-tile": setting(), "P head": setting({(256, True, False)}, "head")})
        for n in (1024, 2048, 4096, 8192, 16384):
            case(128, n, causal=True, variants={
                "fwd.py": setting(), "P head": setting({(128, True, False)}, "head", force=True),
                "P block": setting({(128, True, False)}, "block", force=True)})
    for name, value in BASE.items():
        setattr(forward, name, value)


if __name__ == "__main__":
    main()
