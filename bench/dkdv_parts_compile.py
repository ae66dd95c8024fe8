"""(Session 22; runs at commit 7b0f13e only: the PART kernel was reverted after call 11 timed it,
bench/NOTES.md "Session 22".) Offline sm_90a compile of bwd.py's dK/dV kernel at D = 256 as one launch (PART 0) and as
its two parts (PART 1: dV alone, 2: dK alone; launchers.backward.DKDV_PARTS), query rows:
registers, spill bytes, shared memory, and wgmma (HGMMA) against mma.sync (HMMA) counts,
for the tiles a two-launch dK/dV could take. No GPU needed.

    PYTHONPATH=src python bench/dkdv_parts_compile.py
"""
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from flashtriton.bench.compile_report import resources, signature
from flashtriton.kernels import configs
from flashtriton.kernels.bwd import attn_bwd_dkdv_kernel as FN

T = configs.Tile
TILES = [T(64, 32, 4, 2), T(64, 64, 4, 2), T(64, 64, 8, 2), T(128, 64, 8, 1), T(64, 128, 8, 1)]


def compile_one(tile, d, flags):
    sig, const = signature(FN, tile, d, **flags)
    const = {k: v for k, v in const.items() if k in FN.arg_names}
    src = ASTSource(fn=FN, signature=sig, constexprs={(FN.arg_names.index(k),): v for k, v in const.items()})
    return triton.compile(src, target=GPUTarget("cuda", 90, 32),
                          options=dict(num_warps=tile.num_warps, num_stages=tile.num_stages))


def main(d=256):
    print(f"D = {d}, query rows; causal: HAS_RIGHT (masked tiles compiled too)")
    for tile in TILES:
        for causal in (False, True):
            cells = []
            for part in (0, 1, 2):
                try:
                    r = resources(compile_one(tile, d, dict(KEY_ROWS=False, HAS_RIGHT=causal, PART=part)))
                    cells.append(f"PART {part}: {r['regs']} regs, {r['spill_bytes']} B spill, "
                                 f"{r['smem'] // 1024} KB, {r['hgmma']} HGMMA / {r['hmma']} HMMA")
                except Exception as exc:  # noqa: BLE001  (reported: a tile that does not fit)
                    cells.append(f"PART {part}: {type(exc).__name__}")
            print(f"({tile.block_m}, {tile.block_n}, {tile.num_warps}, {tile.num_stages}) {'causal' if causal else 'plain '} | " + " | ".join(cells), flush=True)


if __name__ == "__main__":
    main()
