"""Session 71, call 4: tiles for float32 on the tensor cores (configs.DEFAULTS_FP32_TC; FLASHTRITON_ALLOW_TF32=x3).
Call 3 (bench/gpu/s71_tf32x3.py, H100, D = 128, B 2, H 16, N 2048) read the forward 2.29 ms with the FMA tile
(64 x 32 x 4) and 1.66 ms at 128 x 64 x 8; forward + backward 51.7 ms with the FMA tiles, 13.3 ms with dK dV 32 x 128
x 8 / dQ 128 x 32 x 8 (the table's provisional entries). At D = 192 the FMA tiles ran tf32x3 no faster than ieee
(forward 20.7 ms, forward + backward 227 ms): 32-row tiles are below a warpgroup MMA's 64 rows.
Times, tf32x3, non-causal, B 2, H 16, N 2048: forward tiles and (dK dV, dQ) pairs at D = 64 / 128 / 192, those that
fit shared memory (configs._smem_estimate); then the table's choice against the FMA tiles for tf32 (=1) too.
Usage: PYTHONPATH=src:tests:bench/gpu python bench/gpu/s71_x3_tiles.py [seconds budget]"""
import os
import sys
import time

import torch
import triton

from flashtriton.kernels import configs
import s71_tf32x3 as base

T = configs.Tile
TC_TREE = {k: dict(v) for k, v in configs.DEFAULTS_FP32_TC.items()}
base.BUDGET = float(sys.argv[1]) if len(sys.argv) > 1 else 300.0
FWD = {64: [T(128, 64, 8, 2), T(64, 32, 4, 2), T(128, 128, 8, 2), T(128, 32, 8, 2), T(64, 64, 4, 2), T(128, 64, 8, 3)],
       128: [T(128, 64, 8, 2), T(128, 32, 8, 2), T(128, 32, 8, 3), T(64, 32, 4, 2)],
       256: [T(64, 32, 4, 2), T(64, 32, 8, 2), T(64, 16, 4, 2), T(64, 16, 4, 3), T(32, 32, 4, 2)]}
BWD = {64: [(T(32, 128, 8, 2), T(128, 32, 8, 2)), (T(64, 128, 8, 2), T(128, 64, 8, 2)), (T(32, 64, 4, 2), T(64, 32, 4, 2)),
            (T(32, 128, 8, 3), T(128, 32, 8, 3))],
       128: [(T(32, 128, 8, 2), T(128, 32, 8, 2)), (T(32, 64, 4, 2), T(64, 32, 4, 2)), (T(64, 64, 4, 2), T(64, 64, 4, 2))],
       256: [(T(16, 64, 4, 2), T(64, 16, 4, 2)), (T(32, 32, 4, 2), T(32, 32, 4, 2)), (T(16, 64, 8, 2), T(64, 16, 8, 2)),
             (T(16, 32, 4, 2), T(64, 16, 4, 1))]}


def reset_tc():
    for k, v in TC_TREE.items():
        configs.DEFAULTS_FP32_TC[k].clear()
        configs.DEFAULTS_FP32_TC[k].update(v)


def setter(**tiles):
    def patch():
        reset_tc()
        for kernel, (bd, t) in tiles.items():
            configs.DEFAULTS_FP32_TC[kernel][bd] = t
    return patch


def label(t):
    return f"{t.block_m}x{t.block_n}x{t.num_warps}s{t.num_stages}"


def fits(kernel, t, bd):
    return configs._smem_estimate(kernel, t, bd, 4) <= configs.SMEM_BYTES


def sweep(d, n=2048):
    bd = triton.next_power_of_2(d)
    q, k, v, dout = base.inputs(d, n)
    fl = 4 * 2 * 16 * n * n * d
    fwd, fwd_bwd = base.passes(q, k, v, dout)
    base.timed(f"x3 fwd D={d}", {label(t): ("x3", setter(fwd=(bd, t))) for t in FWD[bd] if fits("fwd", t, bd)}, fwd, fl)
    base.timed(f"x3 fwd+bwd D={d}", {f"dkdv {label(a)} dq {label(b)}": ("x3", setter(dkdv=(bd, a), dq=(bd, b)))
                                     for a, b in BWD[bd] if fits("dkdv", a, bd) and fits("dq", b, bd)},
               fwd_bwd, 3.5 * fl)


def tf32_check(d, n=2048):
    """The table against the FMA tiles for plain tf32 (which takes the same table)."""
    q, k, v, dout = base.inputs(d, n)
    fl = 4 * 2 * 16 * n * n * d
    fwd_bwd = base.passes(q, k, v, dout)[1]

    def fma():
        for kern in ("fwd", "dkdv", "dq"):
            configs.DEFAULTS_FP32_TC[kern].clear()
    base.timed(f"tf32 fwd+bwd D={d}", {"table": ("1", reset_tc), "fma tiles": ("1", fma)}, fwd_bwd, 3.5 * fl)
    reset_tc()


if __name__ == "__main__":
    torch.manual_seed(0)
    print(torch.cuda.get_device_name(), torch.__version__, triton.__version__, flush=True)
    # S71_DS: the head dims to sweep (call 5: "64 128", after call 4's illegal memory access at D = 192)
    for d in [int(x) for x in os.environ.get("S71_DS", "192 64 128").split()]:
        sweep(d)
        reset_tc()
    for d in (128, 64):
        tf32_check(d)
    print(f"total {time.time() - base.T0:.0f} s", flush=True)
