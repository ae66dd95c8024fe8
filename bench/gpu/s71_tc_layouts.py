"""Session 71: which MMA the tensor-core fp32 (tf32x3) dK/dV and dQ kernels compile to, per tile (sm_90a offline, no
GPU). Call 4's illegal memory access came from dK dV 16 x 64 x 8 / dQ 64 x 16 x 8 at D = 192 (block_d 256); the 4-warp
tiles of the same shapes ran. Prints, per kernel and tile, the TTGIR's MMA encodings (versionMajor 3: warpgroup
wgmma; 2: mma.sync), their warpsPerCTA and instrShape, and ptxas's registers / spills.
Usage (repo root): PYTHONPATH=src python bench/gpu/s71_tc_layouts.py [D]"""
import re
import sys

from flashtriton.bench import compile_report as cr
from flashtriton.kernels import configs

D = int(sys.argv[1]) if len(sys.argv) > 1 else 192
T = configs.Tile
CASES = [("dkdv", T(16, 64, 8, 2)), ("dq", T(64, 16, 8, 2)), ("dkdv", T(16, 64, 4, 2)), ("dq", T(64, 16, 4, 2)),
         ("dkdv", T(32, 32, 4, 2)), ("dq", T(32, 32, 4, 2)), ("dkdv", T(32, 128, 8, 2)), ("dq", T(128, 32, 8, 2)),
         ("fwd", T(64, 32, 8, 2)), ("fwd", T(64, 32, 4, 2))]

for kernel, tile in CASES:
    if D > 128 and tile.block_n * tile.block_m > 2048 and kernel != "fwd":
        continue
    name = f"{kernel} D={D} {tile.block_m}x{tile.block_n}x{tile.num_warps}s{tile.num_stages}"
    try:
        c = cr.compile_variant(kernel, tile, D, "fp32", DOT_PRECISION="tf32x3")
    except Exception as exc:  # noqa: BLE001 (reported)
        print(f"{name}: {type(exc).__name__} {str(exc)[:100]}", flush=True)
        continue
    mmas = sorted(set(re.findall(r"#ttg\.nvidia_mma<\{([^}]*)\}>", c.asm["ttgir"])))
    f = cr.frame(c)
    print(f"{name}: regs {f['regs']} spill st/ld {f['spill_stores']} / {f['spill_loads']}", flush=True)
    for m in mmas:
        print(f"    {m}", flush=True)
