"""Prepared in session 16: the D = 64 forward on the persistent warp-specialized kernel.
Session 9 timed fwd_ws.py at D = 64 one tile a program (128 x 128, 2 stages): 267 against
fwd.py's 237 TFLOP/s at 1k, but 332 against 401 at 2k and 409 against 423 at 8k. The
persistent loop (session 15) hides each tile's epilogue and next q load behind the
previous tile's matmuls, which gained most where tiles are short: D = 64 tiles are half
as long as D = 128's. Offline sm_90a (session 16): 128 x 128 persistent 168 regs, no
spill, 115 KB shared; 128 x 64 83 KB; masked variants +1 KB; specialization kept.

Prediction: non-causal 0.95-1.05x fwd.py at 2k-16k (fwd.py 401-424, cuDNN 432-445), +10-20%
at 512 / 1k; causal head-/block-major as D = 128's: +5-10% at 1k-4k.

Library calls, graph replays, 16k tokens, H = 32 (hidden 2048), bf16, each variant twice
in alternating order; the first run of each variant is checked against fwd.py (max |diff|).

    PYTHONPATH=src python bench/gpu/s17_d64_fwd_ab.py

Also (short_causal): D = 128 and D = 256 causal at 512 / 1k, the default path against the
persistent kernel.
"""
import torch

import flashtriton
from flashtriton.bench.common import graph_time_ms
from flashtriton.kernels.configs import Tile
from flashtriton.launchers import forward, plans, policy

SAVED = (dict(policy.WARP_SPEC_TILES), set(forward.WS_PERSISTENT), {k: set(v) for k, v in
         policy.WARP_SPEC_MASKED_FWD.items()}, dict(policy.WS_MASKED_PERSISTENT_ONLY))


def restore():
    policy.WARP_SPEC_TILES.clear()
    policy.WARP_SPEC_TILES.update(SAVED[0])
    forward.WS_PERSISTENT = set(SAVED[1])
    for k, v in SAVED[2].items():
        policy.WARP_SPEC_MASKED_FWD[k] = set(v)
    policy.WS_MASKED_PERSISTENT_ONLY.clear()
    policy.WS_MASKED_PERSISTENT_ONLY.update(SAVED[3])
    plans.clear()


def ws64(tile):
    def apply():
        restore()
        policy.WARP_SPEC_TILES[64] = tile
        forward.WS_PERSISTENT |= {(64, False, False), (64, True, False)}
        policy.WARP_SPEC_MASKED_FWD["causal"].add(64)
        policy.WS_MASKED_PERSISTENT_ONLY[64] = 512
        plans.clear()
    return apply


VARIANTS = {"fwd.py": restore, "P 128x128": ws64(Tile(128, 128, 4, 2)), "P 128x64": ws64(Tile(128, 64, 4, 2))}


def case(n, causal):
    h, d, b = 32, 64, 16384 // n
    q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    flops = 4 * b * h * n * n * d / (2 if causal else 1)
    res = {name: [] for name in VARIANTS}
    ref = None
    err = {}
    for rep in range(2):
        for name in (list(VARIANTS) if rep == 0 else list(VARIANTS)[::-1]):
            VARIANTS[name]()
            with torch.no_grad():
                out = flashtriton.flash_attn_func(q, k, v, causal=causal)
                if name == "fwd.py" and ref is None:
                    ref = out.float()
                if rep == 0 and name != "fwd.py":
                    err[name] = out.float()
                res[name].append(flops / graph_time_ms(lambda: flashtriton.flash_attn_func(q, k, v, causal=causal))
                                 / 1e9)
    errs = {nm: f"{(o - ref).abs().max().item():.2g}" for nm, o in err.items()}
    print(f"D=64 N={n:5d} {'causal' if causal else 'plain ':6s} " +
          "  ".join(f"{nm} {' / '.join(f'{x:4.0f}' for x in r)}" for nm, r in res.items()) + f"   max|diff| {errs}",
          flush=True)


def short_causal():
    """The short causal forwards still on fwd.py: D = 128 at 512 (policy.
    WS_MASKED_PERSISTENT_ONLY starts at 1k: 512 not timed) and D = 256 at 512
    (FWD_SHORT_ON_FWD_PY, from session 13's one-tile timing, 242 against 217). Both now
    persistent head-major candidates (a round spans ~33 heads at 4 blocks a head).
    Prediction: +10-30% (D = 128 causal 1k gained 13% persistent). H = 2048 // D."""
    saved_short = dict(policy.FWD_SHORT_ON_FWD_PY)

    def persistent():
        restore()
        policy.FWD_SHORT_ON_FWD_PY.pop(256, None)
        policy.WS_MASKED_PERSISTENT_ONLY[128] = 512
        plans.clear()

    def default():
        restore()
        policy.FWD_SHORT_ON_FWD_PY.clear()
        policy.FWD_SHORT_ON_FWD_PY.update(saved_short)
        plans.clear()
    for d in (128, 256):
        for n in (512, 1024):
            h, b = 2048 // d, 16384 // n
            q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
            flops = 4 * b * h * n * n * d / 2
            res = {"default": [], "persistent": []}
            outs = {}
            for rep in range(2):
                for name, apply in ((("default", default), ("persistent", persistent)) if rep == 0
                                    else (("persistent", persistent), ("default", default))):
                    apply()
                    with torch.no_grad():
                        outs[name] = flashtriton.flash_attn_func(q, k, v, causal=True).float()
                        res[name].append(flops / graph_time_ms(
                            lambda: flashtriton.flash_attn_func(q, k, v, causal=True)) / 1e9)
            print(f"D={d} N={n} causal  " + "  ".join(f"{nm} {' / '.join(f'{x:4.0f}' for x in r)}"
                                                     for nm, r in res.items()) +
                  f"   max|diff| {(outs['persistent'] - outs['default']).abs().max().item():.2g}", flush=True)
    default()


def main():
    for causal in (False, True):
        for n in (512, 1024, 2048, 4096, 16384):
            case(n, causal)
    short_causal()
    restore()


if __name__ == "__main__":
    main()
