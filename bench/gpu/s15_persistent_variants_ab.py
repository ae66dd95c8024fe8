"""Session 15: the persistent fwd_ws.py (launchers.forward.WS_PERSISTENT) beyond D = 128
unmasked, where s15_persistent_ab.py measured it (+13% at 512 to +1-2% at 16k). Library
calls, graph replays, 16k tokens (B = 16k / N, H = 16 at D = 128, 8 at D = 256), TFLOP/s
(causal counts half), each variant twice in alternating order, bitwise check of each
persistent variant against its one-tile-a-program run.

Prediction (before the run): D = 256 unmasked: the offline compile shows no extra shared
memory for the persistent loop at 128 x 64 / 1 stage (197 KB both; D = 128's grows 197 ->
230 KB, its next tile's loads staged): +0-5%. Dropout D = 128: as unmasked D = 128, +1-8%
from 2k. Masked D = 256 (causal, window): +3-8% with heaviest first (the static
round-robin of tiles over 132 programs balances, heavy first evens the tail), less without.
D = 128 causal, which runs fwd.py today (fwd_ws masked lost there in session 8): the
persistent masked kernel reaches fwd.py's 462-494 at 4k-16k only if the loop hides the
epilogue as at D = 128 unmasked; expect 0.95-1.05x.
"""
import os

import torch

import flashtriton
from flashtriton.bench.common import graph_time_ms
from flashtriton.launchers import forward, plans
from fwd_ab import alternate_outputs  # bench/gpu, the script's folder

BASE = dict(WS_PERSISTENT=set(forward.WS_PERSISTENT), WS_HEAVY_FIRST=forward.WS_HEAVY_FIRST)


def setting(persistent=None, heavy=False, force=False):
    """persistent: the (BLOCK_D, masked, dropout) keys to run persistent (None: none)."""
    def apply():
        plans.clear()           # the plans key on the env, not on these module flags
        forward.WS_PERSISTENT = set(persistent or ())
        forward.WS_HEAVY_FIRST = heavy
        if force:
            os.environ["FLASHTRITON_WARP_SPEC"] = "1"
        else:
            os.environ.pop("FLASHTRITON_WARP_SPEC", None)
    return apply


def case(d, n, causal=False, window=(-1, -1), p=0.0, variants=None):
    h = 16 if d == 128 else 8
    b = 16384 // n
    q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    flops = 4 * b * h * n * n * d / (2 if causal else 1)
    if window[0] >= 0:
        flops = 4 * b * h * n * min(n, window[0] + 1) * d      # band FLOPs (approx. upper rows)

    def call():
        torch.manual_seed(1)
        return flashtriton.flash_attn_func(q, k, v, causal=causal, window_size=window, dropout_p=p)

    res, outs = alternate_outputs(variants, call, lambda: flops / graph_time_ms(call) / 1e9)
    names = list(variants)
    same = {nm: torch.equal(outs[nm], outs[names[0]]) for nm in names[1:]}
    label = f"D={d} N={n} " + ("causal" if causal else f"window{window}" if window[0] >= 0 else "plain") + \
        (f" p={p}" if p else "")
    print(f"{label:34s} " + "  ".join(f"{nm} {' / '.join(f'{x:5.0f}' for x in r)}" for nm, r in res.items()) +
          f"   equal to first: {same}", flush=True)


def main():
    with torch.no_grad():
        for n in (512, 2048, 16384):
            case(256, n, variants={"one-tile": setting(), "persistent": setting({(256, False, False)})})
        for n in (2048, 16384):
            case(128, n, p=0.1, variants={"one-tile": setting(), "persistent": setting({(128, False, True)})})
        for n in (2048, 4096, 16384):
            case(256, n, causal=True, variants={
                "one-tile": setting(), "one-tile HF": setting(heavy=True),
                "persistent": setting({(256, True, False)}), "persistent HF": setting({(256, True, False)}, True)})
        case(256, 16384, window=(1024, 0), variants={
            "one-tile": setting(), "persistent": setting({(256, True, False)}),
            "persistent HF": setting({(256, True, False)}, True)})
        for n in (1024, 4096, 16384):
            case(128, n, causal=True, variants={
                "fwd.py (default)": setting(), "ws one-tile HF": setting(heavy=True, force=True),
                "ws persistent HF": setting({(128, True, False)}, True, force=True)})
    forward.WS_PERSISTENT, forward.WS_HEAVY_FIRST = BASE["WS_PERSISTENT"], BASE["WS_HEAVY_FIRST"]


def snake():
    """Call 7: after the snake deal (kernels/fwd_ws.py). Prediction: masked persistent with
    heaviest first within 0.97-1.05x of one tile a program with heaviest first at 16k
    (the round-robin's 0.67x gone), window +5-7% as in call 6; unmasked unchanged."""
    with torch.no_grad():
        for n in (512, 16384):
            case(128, n, variants={"one-tile": setting(), "persistent": setting({(128, False, False)})})
        for n in (2048, 16384):
            case(256, n, causal=True, variants={
                "one-tile": setting(), "one-tile HF": setting(heavy=True),
                "persistent HF": setting({(256, True, False)}, True)})
        case(256, 16384, window=(1024, 0), variants={
            "one-tile": setting(), "persistent HF": setting({(256, True, False)}, True)})
        for n in (4096, 16384):
            case(128, n, causal=True, variants={
                "fwd.py (default)": setting(), "ws one-tile HF": setting(heavy=True, force=True),
                "ws persistent HF": setting({(128, True, False)}, True, force=True)})
    forward.WS_PERSISTENT, forward.WS_HEAVY_FIRST = BASE["WS_PERSISTENT"], BASE["WS_HEAVY_FIRST"]


def block_major():
    """Call 8: masked persistent deals block-major (every head's heaviest block first).
    Prediction: 16k causal within 0.97-1.05x of one tile a program heaviest first (call 7:
    0.62x head-major), 2k / 4k keep call 7's +7-12%."""
    with torch.no_grad():
        for n in (2048, 16384):
            case(256, n, causal=True, variants={
                "one-tile": setting(), "one-tile HF": setting(heavy=True),
                "persistent HF": setting({(256, True, False)}, True)})
        for n in (4096, 16384):
            case(128, n, causal=True, variants={
                "fwd.py (default)": setting(), "ws one-tile HF": setting(heavy=True, force=True),
                "ws persistent HF": setting({(128, True, False)}, True, force=True)})
    forward.WS_PERSISTENT, forward.WS_HEAVY_FIRST = BASE["WS_PERSISTENT"], BASE["WS_HEAVY_FIRST"]


if __name__ == "__main__":
    import sys
    {"snake": snake, "block-major": block_major}.get(sys.argv[1] if sys.argv[1:] else "", main)()
