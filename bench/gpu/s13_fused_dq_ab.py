"""History: ran in session 13 on commit 16b04aa (the TMA variant with the DQ_ATOMIC=2 edit
logged in bench/NOTES.md, "Session 13", call 2); the fused dQ was then removed, so this
script no longer runs against the tree.

Written in session 12 for the next GPU session (not run yet): dQ by atomics inside bwd.py's
dK/dV kernel (DQ_ATOMIC; launchers.backward.FUSED_DQ_MAX_N, empty = off) against the two
kernels (dK/dV, then dQ), on the calls that run bwd.py: D = 64 non-causal below 2k, D = 64
causal below 8k, D = 128 causal below 4k, windows.

Why: at N <= 1k the backward is kernel-bound and behind FA2's (graph replays, session 12
call 4: D = 64 190 / 239 TFLOP/s at 512 / 1k against 207 / 242; causal 124 / 182 against
138 / 185). The two kernels run 7 matmuls a tile pair where FA2 runs 5 plus an fp32 atomic
add of dQ.

Prediction (written before any run): D = 64, where the fused query-rows tile (64, 64, 4, 3)
spills 36 bytes (sm_90a offline): +10-20% backward at 512 / 1k, less with N (the atomics
grow with Nk / BLOCK_N per dQ row); D = 128 ((64, 64, 8, 2), 252 bytes spilled): level.

Each case: backward TFLOP/s as CUDA-graph replays (forward+backward minus forward), each
variant twice, in alternating order (session 12 calls 8-9: the GPU slows over a run, so a
single pass's order decides a few percent). deterministic=False throughout (the default
two-kernel path ignores it).
"""
import os
import sys

os.environ["FLASHTRITON_PLANS"] = "0"     # variants change module constants

import torch
import triton

import flashtriton
from flashtriton.bench.common import attention_flops, capture_graph
from flashtriton.kernels import configs
from flashtriton.launchers import backward, prefill

T = configs.Tile
BIG = 1 << 30


def bwd_ms(q, k, v, dout, kw):
    def both():
        out = flashtriton.flash_attn_func(q, k, v, deterministic=False, **kw)
        return torch.autograd.grad(out, (q, k, v), dout)

    def fwd():
        with torch.no_grad():
            return flashtriton.flash_attn_func(q, k, v, deterministic=False, **kw)

    (g_both, _), (g_fwd, _) = capture_graph(both), capture_graph(fwd)
    return (triton.testing.do_bench(g_both.replay, warmup=30, rep=200)
            - triton.testing.do_bench(g_fwd.replay, warmup=30, rep=200))


def variants(bd):
    """(label, FUSED_DQ_MAX_N, fused tile or None)"""
    out = [("two kernels", {}, None), ("fused default", {bd: BIG}, None)]
    extra = {64: [T(128, 64, 8, 2), T(64, 64, 4, 2)], 128: [T(128, 64, 8, 2), T(64, 64, 4, 2)]}[bd]
    return out + [(f"fused {t.block_m}x{t.block_n} w{t.num_warps} s{t.num_stages}", {bd: BIG}, t) for t in extra]


CASES = [  # label, B, N, H, D, kw
    ("D64 full 512", 32, 512, 32, 64, dict()),
    ("D64 full 1k", 16, 1024, 32, 64, dict()),
    ("D64 causal 512", 32, 512, 32, 64, dict(causal=True)),
    ("D64 causal 1k", 16, 1024, 32, 64, dict(causal=True)),
    ("D64 causal 2k", 8, 2048, 32, 64, dict(causal=True)),
    ("D64 causal 4k", 4, 4096, 32, 64, dict(causal=True)),
    ("D128 causal 512", 32, 512, 16, 128, dict(causal=True)),
    ("D128 causal 1k", 16, 1024, 16, 128, dict(causal=True)),
    ("D128 causal 2k", 8, 2048, 16, 128, dict(causal=True)),
    ("D128 window(1024,0) 16k", 1, 16384, 16, 128, dict(window_size=(1024, 0))),
]


def main():
    fused_tiles = configs.DEFAULTS["dkdv_fused"]
    for label, b, n, h, d, kw in CASES:
        bd = prefill.block_d(d)
        q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
                   for _ in range(3))
        dout = torch.randn_like(q)
        if "window_size" in kw:
            left = kw["window_size"][0]
            rows = torch.arange(n)
            flops = 4 * b * h * d * (rows - (rows - left).clamp(min=0) + 1).sum().item() * 2.5
        else:
            flops = attention_flops(b, h, n, n, d, kw.get("causal", False), "bwd")
        vs = variants(bd)
        times = {name: [] for name, _, _ in vs}
        for rep in range(2):
            for name, gate, tile in (vs if rep == 0 else vs[::-1]):
                saved_gate, saved_tile = dict(backward.FUSED_DQ_MAX_N), fused_tiles.get(bd)
                backward.FUSED_DQ_MAX_N.clear()
                backward.FUSED_DQ_MAX_N.update(gate)
                if tile is not None:
                    fused_tiles[bd] = tile
                try:
                    times[name].append(bwd_ms(q, k, v, dout, kw))
                except Exception as exc:  # noqa: BLE001
                    print(f"{label:26s} {name}: {type(exc).__name__}: {str(exc).splitlines()[0][:150]}", flush=True)
                finally:
                    backward.FUSED_DQ_MAX_N.clear()
                    backward.FUSED_DQ_MAX_N.update(saved_gate)
                    fused_tiles[bd] = saved_tile
        for name, ms in times.items():
            if ms:
                print(f"{label:26s} {name:26s} bwd " + " / ".join(f"{flops / t / 1e9:6.1f}" for t in ms)
                      + " TFLOP/s (two passes)", flush=True)
        del q, k, v, dout
    sys.exit(0)


if __name__ == "__main__":
    main()
