"""Offline sm_90a compile of bwd.py's kernels for two switches prepared in session 20 for
session 21: the resumed step in one loop (ONE_LOOP, launchers.backward.RESUME_ONE_LOOP) and
the delta preprocess folded into the dQ kernel (FUSED_DELTA, backward.BWD_FUSED_DELTA).

    PYTHONPATH=src python bench/one_loop_compile.py ptx OUTDIR
        writes the PTX (debug sections dropped) of the default variants - the ones the
        library launches today, ONE_LOOP unset - for a comparison with another tree's
    PYTHONPATH=src python bench/one_loop_compile.py report
        registers, spill bytes, shared memory and HGMMA count of the resumed kernels with
        ONE_LOOP against without (the tiles of RESUME_HALVED at D = 128 / 64), and of the
        dQ kernels bwd.py runs alone with FUSED_DELTA against without
No GPU needed.
"""
import os
import re
import sys

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from flashtriton.bench.compile_report import resources, signature
from flashtriton.kernels import configs
from flashtriton.kernels.bwd import attn_bwd_dkdv_kernel, attn_bwd_dq_kernel

T = configs.Tile
DEFAULTS = [  # (name, kernel, D, tile, constexprs): what launches today
    ("dkdv_causal_qr", "dkdv", 128, T(64, 64, 4, 2), dict(HAS_RIGHT=True, KEY_ROWS=False)),
    ("dkdv_window_qr", "dkdv", 128, T(64, 64, 4, 2), dict(HAS_RIGHT=True, HAS_LEFT=True, KEY_ROWS=False)),
    ("dkdv_plain_kr", "dkdv", 128, T(64, 64, 4, 2), dict(KEY_ROWS=True)),
    ("dkdv_resume_halved_qr", "dkdv", 128, T(64, 64, 4, 2), dict(HAS_RIGHT=True, RESUME=True, BULK_N=128,
                                                               KEY_ROWS=False)),
    ("dkdv_resume_kr", "dkdv", 128, T(64, 128, 8, 2), dict(HAS_RIGHT=True, RESUME=True, KEY_ROWS=True)),
    ("dkdv_d64_resume_halved_qr", "dkdv", 64, T(128, 64, 4, 2), dict(HAS_RIGHT=True, RESUME=True, BULK_N=128,
                                                                   KEY_ROWS=False)),
    ("dq_causal", "dq", 128, T(128, 64, 8, 3), dict(HAS_RIGHT=True)),
    ("dq_window", "dq", 128, T(64, 64, 4, 2), dict(HAS_RIGHT=True, HAS_LEFT=True)),
    ("dq_plain", "dq", 128, T(128, 64, 8, 3), {}),
    ("dq_resume_halved", "dq", 128, T(64, 64, 4, 2), dict(HAS_RIGHT=True, RESUME=True, BULK_M=128)),
    ("dq_resume", "dq", 128, T(128, 64, 8, 3), dict(HAS_RIGHT=True, RESUME=True)),
    ("dq_d64_resume_halved", "dq", 64, T(64, 128, 4, 2), dict(HAS_RIGHT=True, RESUME=True, BULK_M=128)),
]

FUSED_EXTRA = [  # the dQ tiles bwd.py runs alone at D = 64 / 256 (configs.DEFAULTS)
    ("dq_d64_causal", "dq", 64, T(128, 64, 8, 3), dict(HAS_RIGHT=True)),
    ("dq_d256_causal", "dq", 256, T(128, 32, 8, 3), dict(HAS_RIGHT=True)),
]


def compile_one(kernel, d, tile, flags):
    fn = attn_bwd_dkdv_kernel if kernel == "dkdv" else attn_bwd_dq_kernel
    sig, const = signature(fn, tile, d, **flags)
    const = {k: v for k, v in const.items() if k in fn.arg_names}
    src = ASTSource(fn=fn, signature=sig, constexprs={(fn.arg_names.index(k),): v for k, v in const.items()})
    return triton.compile(src, target=GPUTarget("cuda", 90, 32),
                          options=dict(num_warps=tile.num_warps, num_stages=tile.num_stages))


def strip_ptx(ptx: str) -> str:
    """PTX without its debug sections, location lines and debug labels ($L__tmp: an
    inlined helper adds some; they name source positions, no instruction)."""
    ptx = re.sub(r"\.section\s+\.debug\w*\s*\{.*?\n\s*\}", "", ptx, flags=re.S)
    return "\n".join(line for line in ptx.splitlines()
                     if not line.lstrip().startswith((".loc", ".file", "//", "$L__tmp")))


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "report"
    if mode == "ptx":
        out = sys.argv[2]
        os.makedirs(out, exist_ok=True)
        for name, kernel, d, tile, flags in DEFAULTS:
            with open(os.path.join(out, name + ".ptx"), "w") as f:
                f.write(strip_ptx(compile_one(kernel, d, tile, flags).asm["ptx"]))
            print(name, flush=True)
        return
    print("| kernel | D | tile | switch on | regs | spill B | smem KB | HGMMA |")
    print("|---|---|---|---|---|---|---|---|")
    for name, kernel, d, tile, flags in DEFAULTS:
        if not flags.get("RESUME"):
            continue
        for one in (False, True):
            r = resources(compile_one(kernel, d, tile, dict(flags, ONE_LOOP=one) if one else flags))
            print(f"| {name} (ONE_LOOP) | {d} | {(tile.block_m, tile.block_n, tile.num_warps, tile.num_stages)} | "
                  f"{one} | {r['regs']} | {r['spill_bytes']} | {r['smem'] / 1024:.0f} | {r['hgmma']} |", flush=True)
    for name, kernel, d, tile, flags in DEFAULTS + FUSED_EXTRA:
        if kernel != "dq" or flags.get("RESUME"):
            continue
        for fused in (False, True):
            r = resources(compile_one(kernel, d, tile, dict(flags, FUSED_DELTA=True) if fused else flags))
            print(f"| {name} (FUSED_DELTA) | {d} | {(tile.block_m, tile.block_n, tile.num_warps, tile.num_stages)} | "
                  f"{fused} | {r['regs']} | {r['spill_bytes']} | {r['smem'] / 1024:.0f} | {r['hgmma']} |", flush=True)


if __name__ == "__main__":
    main()
