"""Queued for session 71 (written in session 70, no GPU left): the true-fp32 dK/dV kernel's tile. Offline (sm_90a,
bench/gpu/s70_dkdv_fp32_audit.py, bench/results/nvidia-h100/s70/dkdv_fp32_audit_d*.txt) 8 warps on a 16 x 16 tile
spill far less than the 4-warp defaults: D = 128 0.5 / 0.6 KB of spill stores / loads a thread against 2.5 / 4.4
(16 x 32 x 4), D = 192 with maxnreg 1.6 / 2.9 KB against 4.5 / 8.2 (16 x 16 x 4). Prediction: the dK/dV kernel
1.2-1.6x faster, forward + backward 1.1-1.3x at D = 128 and 192.
Times forward + backward (B 2, H 16, N 2048, causal and not; the forward and dQ as the tree has them) with the dK/dV
tile: the default, 16 x 16 x 8, 16 x 16 x 8 with maxnreg 255, 32 x 16 x 8 with maxnreg; all three gradients checked
against the default's (max |diff|: a tile changes the summation order, ~1e-6 expected; a change to the defaults then
needs the fp32 GPU tests). Uses s70_fp32_regs_split.run_case (mirrored rounds, the smaller median).
Usage: PYTHONPATH=src python bench/gpu/s71_dkdv_fp32_tiles.py [seconds budget]"""
import time

import torch
import triton

from flashtriton.kernels import configs
from flashtriton.launchers.common import block_d
from s70_fp32_regs_split import T0, fwd_bwd_case, run_case   # bench/gpu, the script's folder

DEFAULT = dict(configs.DEFAULTS_FP32["dkdv"])


def tile(bd, t, maxnreg):
    def patch():
        configs.DEFAULTS_FP32["dkdv"][bd] = t
        at = set(configs.FP32_MAXNREG_AT.get("dkdv", ()))
        configs.FP32_MAXNREG_AT["dkdv"] = tuple(sorted(at | {bd} if maxnreg else at - {bd}))
    return patch


def case(d, causal):
    bd = block_d(d)
    fwd_bwd, fl = fwd_bwd_case(d, causal)
    run_case(f"fwd+bwd D={d} causal={causal}",
             {"default": tile(bd, DEFAULT[bd], False), "16x16x8": tile(bd, configs.Tile(16, 16, 8, 2), False),
              "16x16x8 maxnreg": tile(bd, configs.Tile(16, 16, 8, 2), True),
              "32x16x8 maxnreg": tile(bd, configs.Tile(32, 16, 8, 2), True)}, fwd_bwd, fl)
    configs.DEFAULTS_FP32["dkdv"].update(DEFAULT)
    configs.FP32_MAXNREG_AT.pop("dkdv", None)


if __name__ == "__main__":
    torch.manual_seed(0)
    print(torch.cuda.get_device_name(), torch.__version__, triton.__version__, flush=True)
    for d, causal in ((192, False), (128, False), (192, True), (128, True)):
        case(d, causal)
    print(f"total {time.time() - T0:.0f} s", flush=True)
