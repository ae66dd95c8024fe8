"""Session 72, call 2: the tensor-core fp32 table's new block_d 256 entries (call 1 at D = 192, H200: forward
128 x 32 x 8 s1 5.99 ms against 64 x 32 x 4 s2 7.02; forward + backward dK dV 32 x 64 x 4 s1 / dQ 64 x 32 x 4 s1
45.0 ms against 16 x 64 x 4 / 64 x 16 x 4 85.9) checked where call 1 did not look: D = 256, causal D = 192, plain
tf32 (=1) at D = 192; then 1-stage tiles at block_d 128 (64-wide tiles that fit only with one stage).
Prediction (bench/NOTES.md "Session 72"): D = 256 and causal D = 192 gain as D = 192 did (forward 1.1-1.2x, backward
~1.8x); tf32 gains less (its dots are a third of x3's work, so the loads weigh more); block_d 128's 1-stage tiles
within 5% of the table (the table's tiles already run the 64-row warpgroup MMA).
Usage: PYTHONPATH=src:tests:bench/gpu python bench/gpu/s72_x3_tiles2.py [seconds budget]"""
import time

import torch
import triton

import s71_x3_tiles as sweep_mod
from flashtriton.kernels import configs

T = configs.Tile
base = sweep_mod.base
OLD = {"fwd": T(64, 32, 4, 2), "dkdv": T(16, 64, 4, 2), "dq": T(64, 16, 4, 2)}   # session 71's block_d 256 entries


def new_vs_old(label, knob, d, causal=False, n=2048):
    q, k, v, dout = base.inputs(d, n)
    fl = 4 * 2 * 16 * n * n * d / (2 if causal else 1)
    fwd, fwd_bwd = base.passes(q, k, v, dout, causal)
    old = sweep_mod.setter(fwd=(256, OLD["fwd"]), dkdv=(256, OLD["dkdv"]), dq=(256, OLD["dq"]))
    for what, fn, f in (("fwd", fwd, fl), ("fwd+bwd", fwd_bwd, 3.5 * fl)):
        base.timed(f"{label} {what} D={d} causal={causal}", {"new": (knob, sweep_mod.reset_tc), "old": (knob, old)},
                   fn, f)


if __name__ == "__main__":
    torch.manual_seed(0)
    print(torch.cuda.get_device_name(), torch.__version__, triton.__version__, flush=True)
    new_vs_old("x3", "x3", 256)
    new_vs_old("x3", "x3", 192, causal=True)
    new_vs_old("tf32", "1", 192)
    sweep_mod.FWD[128] = [T(128, 64, 8, 2), T(128, 128, 8, 1), T(128, 64, 8, 1)]
    sweep_mod.BWD[128] = [(T(32, 128, 8, 2), T(128, 32, 8, 2)), (T(64, 128, 8, 1), T(128, 64, 8, 1)),
                          (T(32, 128, 8, 1), T(128, 32, 8, 1))]
    sweep_mod.sweep(128)
    print(f"total {time.time() - base.T0:.0f} s", flush=True)
