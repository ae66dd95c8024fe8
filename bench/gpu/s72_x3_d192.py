"""Session 72: tf32x3 (FLASHTRITON_ALLOW_TF32=x3) tiles at D = 192 (block_d 256), which session 71 could not sweep
(call 4's illegal memory access with 8-warp 16-row tiles poisoned the process). Only tiles that fit shared memory
(configs._smem_estimate) and keep both sides of an 8-warp tile >= 32 (the N = 8 tf32 wgmma rule). The table's
entry comes first; 1-stage tiles let 64-wide tiles fit at fp32.
Prediction (bench/NOTES.md "Session 72"): the forward's 64 x 64 x 8 s1 or 128 x 32 x 8 s1 1.2-1.5x the table's
64 x 32 x 4 (a full warpgroup MMA of 64 rows a warpgroup); the backward within 10% of the table (fp32 operands at
block_d 256 leave no room for wider key / query tiles).
Usage: PYTHONPATH=src:tests:bench/gpu python bench/gpu/s72_x3_d192.py [seconds budget]"""
import time

import torch
import triton

import s71_x3_tiles as sweep_mod
from flashtriton.kernels import configs

T = configs.Tile
sweep_mod.FWD[256] = [T(64, 32, 4, 2), T(64, 32, 8, 2), T(64, 64, 8, 1), T(128, 32, 8, 1), T(64, 64, 4, 1)]
sweep_mod.BWD[256] = [(T(16, 64, 4, 2), T(64, 16, 4, 2)), (T(32, 32, 4, 2), T(32, 32, 4, 2)),
                      (T(32, 64, 4, 1), T(64, 32, 4, 1)), (T(32, 32, 8, 2), T(32, 32, 8, 2)),
                      (T(32, 64, 8, 1), T(64, 32, 8, 1))]

if __name__ == "__main__":
    torch.manual_seed(0)
    print(torch.cuda.get_device_name(), torch.__version__, triton.__version__, flush=True)
    sweep_mod.sweep(192)
    print(f"total {time.time() - sweep_mod.base.T0:.0f} s", flush=True)
