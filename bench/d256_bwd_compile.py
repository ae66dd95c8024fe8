"""(Session 28, offline, no GPU.) The D = 256 backward's route and what it costs, per N of the
grid (bf16, 16k tokens, H = 8): bwd.py's dQ (FUSED_DELTA, launched first) and dK/dV kernels
at their default tiles, compiled for sm_90a with and without ROWS_FIRST (registers, spill
bytes, shared memory, HGMMA / HMMA counts: ROWS_FIRST must change nothing but the
program-id arithmetic), then programs, programs an SM (by shared memory and registers),
waves, and a model of each launch's DRAM reads of the streamed operand (dK/dV: Q and dO;
dQ: K and V) for the (B * H, blocks) grid against the rows-first one.

Model: a program streams its head's whole other-side operand (S bytes). On the 2-D grid the
programs in flight (P = SMs x programs an SM) are ~P / (B * H) per head (at least 1), all
reading that head's operand in step, and the next pass over it comes after every head's
(B * H * S bytes) went through L2: a miss when B * H * S > 50 MB. So DRAM reads ~ programs
x S / max(1, P / (B * H)). Rows first: a head's blocks side by side, its operand read once
while in flight (B * H * S), as long as P / blocks heads' operands fit L2.

    PYTHONPATH=src python bench/d256_bwd_compile.py
"""
import triton

from flashtriton.bench.compile_report import compile_variant, resources
from flashtriton.kernels import configs

SMS, L2, SMEM_SM, REGS_SM = 132, 50 * 2**20, 232448, 65536
D, H, TOKENS = 256, 8, 16384


def per_sm(r, warps: int) -> int:
    by_smem = SMEM_SM // max(r["smem"] + 1024, 1)
    by_regs = REGS_SM // (max(r["regs"], 1) * 32 * warps)
    return max(1, min(by_smem, by_regs))


def model(kernel: str, tile, n: int, r, warps: int) -> str:
    b = TOKENS // n
    heads = b * H
    block = tile.block_n if kernel == "dkdv" else tile.block_m
    blocks = triton.cdiv(n, block)
    programs = heads * blocks
    inflight = SMS * per_sm(r, warps)
    s = n * D * 2 * 2                                   # the streamed operand pair of one head, bytes
    two_d = programs * s / max(1.0, inflight / heads)
    if heads * s <= L2:
        two_d = heads * s
    rows = heads * s
    return (f"{programs} programs, {per_sm(r, warps)}/SM, {programs / inflight:.1f} waves; "
            f"streamed operand DRAM reads ~{two_d / 1e9:.2f} GB (2-D grid) vs ~{rows / 1e9:.2f} GB (rows first)")


def main():
    for n in (512, 1024, 2048, 4096):
        for causal in (False, True):
            dkdv = configs.default_tile("dkdv", D, n, masked=causal)
            dq = configs.default_tile("dq", D, n, masked=causal)
            for kernel, tile, flags in (("dq", dq, dict(FUSED_DELTA=True)), ("dkdv", dkdv, dict(KEY_ROWS=False))):
                cells = []
                r = None
                for rows_first in (False, True):
                    try:
                        r = resources(compile_variant(kernel, tile, D, HAS_RIGHT=causal, ROWS_FIRST=rows_first,
                                                      **flags))
                        cells.append(f"{'rows' if rows_first else '2-D '}: {r['regs']} regs, {r['spill_bytes']} B "
                                     f"spill, {r['smem'] // 1024} KB, {r['hgmma']} HGMMA / {r['hmma']} HMMA")
                    except Exception as exc:  # noqa: BLE001  (reported)
                        cells.append(f"{type(exc).__name__}: {str(exc)[:80]}")
                shape = (tile.block_m, tile.block_n, tile.num_warps, tile.num_stages)
                tag = f"N={n:5d} {'causal' if causal else 'plain '} {kernel:4s} {shape}"
                print(tag + " | " + " | ".join(cells), flush=True)
                if r is not None:
                    print(" " * len(tag) + " | " + model(kernel, tile, n, r, tile.num_warps), flush=True)


if __name__ == "__main__":
    main()
