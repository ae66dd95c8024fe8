"""Offline sm_90a compile of bwd.py's resumed kernels (RESUME, the split path's masked
rest) at D = 128 / 64, causal: the bulk's tiles with 8 warps (today's default) against
smaller ones (launchers.backward.RESUME_TILES, BULK_N / BULK_M set): registers, spill
bytes, shared memory, HGMMA count. No GPU needed.

    PYTHONPATH=src python bench/resume_compile.py
"""
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from flashtriton.bench.compile_report import resources, signature
from flashtriton.kernels import configs
from flashtriton.kernels.bwd import attn_bwd_dkdv_kernel, attn_bwd_dq_kernel

CASES = [  # (kernel, D, tile, extra constexprs)
    ("dkdv", 128, configs.Tile(64, 128, 8, 2), {}),
    ("dkdv", 128, configs.Tile(64, 64, 4, 2), dict(BULK_N=128)),
    ("dkdv", 128, configs.Tile(64, 64, 8, 2), dict(BULK_N=128)),
    ("dkdv", 128, configs.Tile(64, 128, 8, 2), dict(KEY_ROWS=False)),
    ("dkdv", 128, configs.Tile(64, 64, 4, 2), dict(BULK_N=128, KEY_ROWS=False)),
    ("dkdv", 128, configs.Tile(64, 32, 4, 2), dict(BULK_N=128, KEY_ROWS=False)),
    ("dq", 128, configs.Tile(128, 64, 8, 3), {}),
    ("dq", 128, configs.Tile(64, 64, 4, 2), dict(BULK_M=128)),
    ("dq", 128, configs.Tile(64, 64, 4, 3), dict(BULK_M=128)),
    ("dkdv", 64, configs.Tile(128, 128, 8, 2), {}),
    ("dkdv", 64, configs.Tile(128, 64, 4, 2), dict(BULK_N=128)),
    ("dkdv", 64, configs.Tile(128, 64, 4, 2), dict(BULK_N=128, KEY_ROWS=False)),
    ("dkdv", 64, configs.Tile(128, 32, 4, 2), dict(BULK_N=128, KEY_ROWS=False)),
    ("dq", 64, configs.Tile(128, 128, 8, 3), {}),
    ("dq", 64, configs.Tile(64, 128, 4, 2), dict(BULK_M=128)),
]


def compile_one(kernel, d, tile, extra):
    fn = attn_bwd_dkdv_kernel if kernel == "dkdv" else attn_bwd_dq_kernel
    flags = dict(RESUME=True, HAS_RIGHT=True, **extra)
    if kernel == "dkdv":
        flags.setdefault("KEY_ROWS", True)  # resumed dK/dV keeps key rows today (launchers.backward.dkdv_key_rows)
    sig, const = signature(fn, tile, d, **flags)
    const = {k: v for k, v in const.items() if k in fn.arg_names}
    src = ASTSource(fn=fn, signature=sig, constexprs={(fn.arg_names.index(k),): v for k, v in const.items()})
    return triton.compile(src, target=GPUTarget("cuda", 90, 32),
                          options=dict(num_warps=tile.num_warps, num_stages=tile.num_stages))


if __name__ == "__main__":
    print("| kernel | D | tile (BM, BN, warps, stages) | bulk | regs | spill B | smem KB | HGMMA |")
    print("|---|---|---|---|---|---|---|---|")
    for kernel, d, tile, extra in CASES:
        r = resources(compile_one(kernel, d, tile, extra))
        print(f"| {kernel} | {d} | {(tile.block_m, tile.block_n, tile.num_warps, tile.num_stages)} | {extra or 'same'} | {r['regs']} | {r['spill_bytes']} | "
              f"{r['smem'] / 1024:.0f} | {r['hgmma']} |", flush=True)
