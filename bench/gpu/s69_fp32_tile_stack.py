"""Session 69: offline sm_90a stack frames (ptxas -v) of candidate fp32 tiles for the prefill forward / dK-dV /
dQ and the paged forward (multi-row, QK_LEVELS = 0), to pick which to time on the GPU: the audit
(`s69_stack_audit.py`) found the defaults at D = 128 / 192 spilling kilobytes, some compiled to 32 registers with
26-47 KB of spill traffic a thread.
Usage (repo root): PYTHONPATH=src python bench/gpu/s69_fp32_tile_stack.py KERNEL D [causal 0|1]
Prints one line a tile: kernel, D, tile, registers, stack bytes, spill stores / loads, shared memory."""
import sys

from flashtriton.bench import compile_report as cr
from flashtriton.kernels import configs
from flashtriton.launchers.common import block_d

T = configs.Tile
CANDIDATES = {
    "fwd": [T(16, 32, 4, 2), T(32, 32, 4, 2), T(32, 16, 4, 2), T(64, 32, 4, 2), T(64, 32, 8, 2), T(64, 16, 4, 2),
            T(32, 32, 8, 2), T(64, 64, 8, 2), T(128, 32, 8, 2)],
    "dkdv": [T(16, 32, 4, 2), T(16, 16, 4, 2), T(32, 16, 4, 2), T(16, 32, 8, 2), T(32, 32, 8, 2), T(32, 32, 4, 2)],
    "dq": [T(16, 32, 4, 2), T(16, 16, 4, 2), T(32, 16, 4, 2), T(16, 32, 8, 2), T(32, 32, 8, 2), T(32, 32, 4, 2)],
}
CANDIDATES["fwd_paged"] = CANDIDATES["fwd"]


def line(compiled):
    f = cr.frame(compiled)
    return (f"regs {f['regs']} stack {f['stack']} spill st/ld {f['spill_stores']} / {f['spill_loads']} "
            f"smem {compiled.metadata.shared}")


def main():
    kernel, d = sys.argv[1], int(sys.argv[2])
    causal = len(sys.argv) > 3 and sys.argv[3] == "1"
    bd = block_d(d)
    for t in CANDIDATES[kernel]:
        name = f"{kernel} fp32 D={d} causal={causal} {(t.block_m, t.block_n, t.num_warps, t.num_stages)}"
        if configs._smem_estimate("fwd" if kernel == "fwd_paged" else kernel, t, bd, 4) > configs.SMEM_BYTES:
            print(f"{name}: over shared memory", flush=True)
            continue
        try:
            if kernel == "fwd_paged":
                const = dict(HEAD_DIM=d, BLOCK_D=bd, BLOCK_M=t.block_m, BLOCK_N=t.block_n, PAGE_SIZE=16,
                             PAGE_GATHER=2, HAS_LEFT=False, HAS_RIGHT=causal, HAS_ALIBI=False, HAS_SOFTCAP=False,
                             DOT_PRECISION="ieee", KV_TMA=False, QK_LEVELS=0)
                c = cr.compile_paged(const, "fp32", t.num_warps, t.num_stages)
            else:
                c = cr.compile_variant(kernel, t, d, "fp32", HAS_RIGHT=causal, DOT_PRECISION="ieee")
            print(f"{name}: {line(c)}", flush=True)
        except Exception as exc:  # noqa: BLE001 (reported)
            print(f"{name}: {type(exc).__name__} {str(exc)[:100]}", flush=True)


if __name__ == "__main__":
    main()
