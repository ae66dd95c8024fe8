"""Session 70: the true-fp32 dK/dV kernel at block_d 256 (D = 192) holds most of fp32 training's time there after the
dQ's register budget (session 70, H100: forward + backward 211 ms non-causal, B 2, H 16, N 2048). Its default tile
(16 x 16, 4 warps, 2 stages) compiles to ptxas's 168 registers with 4.5-4.8 / 8.2-12.8 KB of spill stores / loads a
thread, and maxnreg alone left its time level. This compiles candidate tiles for sm_90a offline (no GPU), with and
without maxnreg 255, plain and causal, and prints registers, stack and spill traffic a thread, and the shared memory
configs estimates; a GPU timing of the least-spilling ones comes next (bench/NOTES.md "Next GPU session (71)").
Usage (repo root): PYTHONPATH=src python bench/gpu/s70_dkdv_fp32_audit.py [D]"""
import sys

from flashtriton.bench import compile_report as cr
from flashtriton.kernels import configs
from flashtriton.launchers.common import block_d

D = int(sys.argv[1]) if len(sys.argv) > 1 else 192
BD = block_d(D)
TILES = [configs.DEFAULTS_FP32["dkdv"][BD], configs.Tile(16, 16, 8, 2), configs.Tile(16, 32, 4, 2),
         configs.Tile(32, 16, 4, 2), configs.Tile(16, 32, 8, 2), configs.Tile(32, 16, 8, 2), configs.Tile(16, 16, 4, 1),
         configs.Tile(32, 32, 8, 1)]

for tile in TILES:
    smem = configs._smem_estimate("dkdv", tile, BD, 4)
    for causal in (False, True):
        for nreg in (None, configs.FP32_MAXNREG):
            name = f"dkdv fp32 D={D} {tuple(tile.__dict__.values())} causal={causal} maxnreg={nreg} smem~{smem // 1024} KB"
            try:
                f = cr.frame(cr.compile_variant("dkdv", tile, D, "fp32", maxnreg=nreg, HAS_RIGHT=causal,
                                                DOT_PRECISION="ieee"))
            except Exception as exc:  # noqa: BLE001 (reported)
                print(f"{name}: {type(exc).__name__} {str(exc)[:80]}", flush=True)
                continue
            print(f"{name}: regs {f['regs']} stack {f['stack']} spill st/ld {f['spill_stores']} / "
                  f"{f['spill_loads']}", flush=True)
