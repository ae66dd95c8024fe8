"""Session 59: the speed of the true-fp32 one-row paths with and without the score slices (QK_LEVELS,
launchers.common.qk_levels) and, for the prefill kernel, the tile-apart P V (kernels/common.pv_tile_dot):
flash_attn_with_kvcache (kernels/decode.py) and flash_attn_func at Nq = 1 (kernels/fwd.py), fp32, B = 1, Hq = 32,
Hk = 8, D = 64 / 128, cache / key lengths 1k / 8k. "off" patches the launchers' qk_levels to 0 (the kernels of
before; the prefill's P V then is the one chain again). CUDA-event medians of 50 calls after 5 warm-ups, the two
arms alternated over three rounds; outputs of both arms checked against each other (max |diff|).
Usage: PYTHONPATH=src python bench/gpu/s59_fp32_one_row_speed.py"""
import statistics

import torch

import flashtriton
from flashtriton.launchers import common, decode, forward, plans

REAL = common.qk_levels


def arm(on: bool):
    f = REAL if on else (lambda *a: 0)
    decode.qk_levels = forward.qk_levels = f
    plans.clear()


def timed(fn, n=50):
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(n):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); fn(); b.record(); b.synchronize()
        ts.append(a.elapsed_time(b) * 1e3)
    return statistics.median(ts)


def main():
    torch.manual_seed(0)
    print(torch.cuda.get_device_name(), torch.__version__, __import__("triton").__version__)
    for d in (64, 128):
        for n in (1024, 8192):
            q = torch.randn(1, 1, 32, d, device="cuda")
            kc = torch.randn(1, n, 8, d, device="cuda"); vc = torch.randn_like(kc)
            calls = {"decode": lambda: flashtriton.flash_attn_with_kvcache(q, kc, vc, causal=True),
                     "prefill": lambda: flashtriton.flash_attn_func(q, kc, vc, causal=True)}
            for name, fn in calls.items():
                res = {True: [], False: []}
                outs = {}
                for rnd in range(3):
                    for on in ((True, False) if rnd % 2 == 0 else (False, True)):
                        arm(on)
                        outs[on] = fn().clone()
                        res[on].append(timed(fn))
                diff = (outs[True] - outs[False]).abs().max().item()
                on_us, off_us = statistics.median(res[True]), statistics.median(res[False])
                gbs = 2 * n * 8 * d * 4 / (on_us * 1e-6) / 1e9
                print(f"{name:7s} D={d:3d} L={n:5d}: slices {on_us:8.1f} us ({gbs:6.1f} GB/s), off {off_us:8.1f} us, "
                      f"on/off {on_us / off_us:5.2f}; rounds on {[round(x, 1) for x in res[True]]} off "
                      f"{[round(x, 1) for x in res[False]]}; max|on - off| {diff:.2e}", flush=True)
    arm(True)


if __name__ == "__main__":
    main()
