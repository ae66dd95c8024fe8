"""Written in session 11 for the next GPU session (not run yet): the D = 64 forward at
N = 512 / 1k, where session 11's grid shows a cliff - as CUDA-graph replays, non-causal
187 / 238 TFLOP/s against FA2's 262 / 288, our own 401 at 2k and our causal 254 at 1k.
N <= SHORT_SEQLEN (1024) takes configs.DEFAULTS["fwd_short"][64] = (128, 64, 8, 4); 2k
takes DEFAULTS["fwd"][64] = (128, 64, 4, 4).

Hypothesis: the 8-warp short tile is the cliff. Prediction: (128, 64, 4, 4) at 512 / 1k
within 10% of FA2 (~240 / ~280), i.e. +25-30%.

Each variant: forward graph-replay TFLOP/s (16k tokens, H = 2048 / D since session 12 call 5; H = 32 before, bf16) and the largest
difference of its output from the first variant's.

Result (session 12, call 1): (128, 64, 4, 3) non-causal 313 / 370, causal 191 / 269 against
186 / 238 and 178 / 251 for the 8-warp tile; taken as the short default for D <= 64.
`python bench/gpu/s12_fwd_short_ab.py 32` repeats it at another head dim (argv: head dims;
the variants then: the old 8-warp tile against the new default).
"""
import os
import sys

os.environ["FLASHTRITON_PLANS"] = "0"

import torch

import flashtriton
from flashtriton.bench.common import attention_flops, graph_time_ms
from flashtriton.kernels import configs

T = configs.Tile
VARIANTS = [T(128, 64, 8, 4), T(128, 64, 4, 4), T(128, 64, 4, 3), T(64, 64, 4, 4), T(128, 128, 8, 3)]


# D = 128 causal (fwd.py; the non-causal calls take fwd_ws.py): argument "128c". The grid's
# graph rows have it at 186 / 273 TFLOP/s at N = 512 / 1k against cuDNN's 333 / 427, on
# DEFAULTS["fwd"][128] = (128, 128, 8, 3), tuned at 4k. Prediction: a 64-key or 4-warp tile
# +5-15% at 512 / 1k (more programs in flight on a grid of 4 / 8 query blocks a head).
VARIANTS_128C = [T(128, 128, 8, 3), T(128, 64, 4, 3), T(128, 64, 8, 3), T(64, 64, 4, 3), T(64, 128, 4, 3),
                 T(128, 128, 8, 2)]


# "128c-long": the same question from N = 2k (DEFAULTS["fwd"][128], which at D = 128 only
# causal / windowed / non-specialized calls read). Prediction: the gain shrinks with N
# (longer rows amortize the prologue; 128-row tiles halve K / V reloads): +10% at 2k, level
# from 8k.
VARIANTS_128C_LONG = [T(128, 128, 8, 3), T(64, 64, 4, 3), T(64, 64, 4, 4)]

# "64c" (written after session 12's calls, not run yet): D = 64 causal, N = 512 / 1k, through
# a fwd_short_masked entry at 64 (today the short default (128, 64, 4, 3) serves causal
# calls too: 191 / 269 TFLOP/s as graphs, cuDNN 257 / 333). Prediction: a 64-row tile
# +3-8% (call 1 had (64, 64, 4, 4) at 193 / 275), less than at D = 128 (shorter rows).
VARIANTS_64C = [T(128, 64, 4, 3), T(64, 64, 4, 3), T(64, 64, 4, 4), T(64, 32, 4, 3), T(64, 128, 4, 3)]

# "64c-long" (session 13, after "64c" measured (64, 64, 4, 3) +21% / +16% at 512 / 1k): the
# same entry reaches N = 2k / 4k (SHORT_MASKED_SEQLEN), where causal D = 64 reads
# DEFAULTS["fwd"][64] = (128, 64, 4, 4) today. Prediction: +5% at 2k, level at 4k.
VARIANTS_64C_LONG = [T(128, 64, 4, 4), T(64, 64, 4, 3), T(64, 64, 4, 4)]


def main():
    args = sys.argv[1:] or ["64"]
    for a in args:
        if a == "128c":
            run(128, VARIANTS_128C, causals=(True,), table="fwd_short_masked")  # fwd_short before call 6
        elif a == "64c":
            for _ in range(2):      # twice, the second pass in reverse order (session 12 calls 8-9)
                run(64, VARIANTS_64C, causals=(True,), table="fwd_short_masked")
                VARIANTS_64C.reverse()
        elif a == "64c-long":
            for _ in range(2):
                run(64, VARIANTS_64C_LONG, causals=(True,), table="fwd_short_masked", lengths=(2048, 4096))
                VARIANTS_64C_LONG.reverse()
        elif a == "128c-long":
            run(128, VARIANTS_128C_LONG, causals=(True,), table="fwd", lengths=(2048, 4096, 8192))
        else:
            d = int(a)
            run(d, VARIANTS if d == 64 else [T(128, 64, 8, 4), T(128, 64, 4, 3)])
    sys.exit(0)


def run(d, variants, causals=(False, True), table="fwd_short", lengths=(512, 1024)):
    short = configs.DEFAULTS[table]
    had, saved = d in short, short.get(d)
    for n in lengths:
        for causal in causals:
            b, h = 16384 // n, 2048 // d
            q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
            flops = attention_flops(b, h, n, n, d, causal)
            first = None
            for tile in variants:
                short[d] = tile
                try:
                    out = flashtriton.flash_attn_func(q, k, v, causal=causal)
                    first = out if first is None else first
                    err = (out.float() - first.float()).abs().max().item()
                    ms = graph_time_ms(lambda: flashtriton.flash_attn_func(q, k, v, causal=causal))
                    print(f"D={d} N={n} causal={causal} {tile}: {flops / ms / 1e9:6.1f} TFLOP/s "
                          f"max|diff| vs first {err:.1e}", flush=True)
                except Exception as exc:  # noqa: BLE001
                    print(f"D={d} N={n} causal={causal} {tile}: {type(exc).__name__}: {str(exc)[:120]}", flush=True)
                finally:
                    if had:
                        short[d] = saved
                    else:
                        del short[d]


if __name__ == "__main__":
    main()
