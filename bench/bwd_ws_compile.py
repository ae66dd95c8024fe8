"""Offline sm_90a compile of kernels/bwd_ws.py's two kernels, one tile a program against
PERSISTENT (no GPU needed: Triton's bundled ptxas / cuobjdump): registers, spill bytes,
shared memory, warps after the specialization pass (12 = kept), setmaxnreg count in the
PTX, and where the TTGIR makes its descriptors. After the pass the kernel body is a
ttg.warp_specialize op whose regions (the default one, the producer's loads, and
partition0 / partition1, the consumers) each make the descriptors they use; "all before
the loop" = in every region each ttng.tensormap_create precedes the region's first
scf.for (persistent: the loop over tiles), so none is made per tile.

    PYTHONPATH=src python bench/bwd_ws_compile.py [--head-dims 64 128] [--stages 1 3]
        [--tile-stages 2 1] [--persistent both|no|yes] [--masked] [--dropout]
"""
from __future__ import annotations

import argparse
import re

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from flashtriton.bench.compile_report import resources, signature
from flashtriton.kernels.bwd_ws import attn_bwd_dkdv_ws_kernel, attn_bwd_dq_ws_kernel
from flashtriton.launchers.policy import BWD_WARP_SPEC_TILES

KERNELS = {"dkdv": (attn_bwd_dkdv_ws_kernel, 0), "dq": (attn_bwd_dq_ws_kernel, 1)}
SMEM_LIMIT = 232448          # bytes a block may take on sm_90 (227 KB)


def compile_ws(kernel: str, d: int, num_stages: int | None = None, **flags):
    fn, which = KERNELS[kernel]
    tile = BWD_WARP_SPEC_TILES[d][which]
    sig, const = signature(fn, tile, d, **flags)
    const = {k: v for k, v in const.items() if k in fn.arg_names}    # signature() adds bwd.py's flags
    src = ASTSource(fn=fn, signature=sig, constexprs={(fn.arg_names.index(k),): v for k, v in const.items()})
    return triton.compile(src, target=GPUTarget("cuda", 90, 32),
                          options=dict(num_warps=tile.num_warps,
                                       num_stages=tile.num_stages if num_stages is None else num_stages))


def descriptor_placement(ttgir: str) -> str:
    """Per region of the TTGIR (before ttg.warp_specialize, its default region, each
    partitionN): how many ttng.tensormap_create come before / after the region's first
    scf.for. 'all N before the loop' when none comes after (persistent: none per tile)."""
    regions, name = {}, "entry"
    for line in ttgir.splitlines():
        if "ttg.warp_specialize(" in line:
            name = "default"
        m = re.match(r"\s*(partition\d+)\(", line)
        if m:
            name = m.group(1)
        regions.setdefault(name, []).append(line)
    before = after = 0
    where = []
    for name, lines in regions.items():
        seen_for = False
        for line in lines:
            seen_for = seen_for or "scf.for" in line          # the region's first (outermost) loop
            if "ttng.tensormap_create" in line:
                if seen_for:
                    after += 1
                    where.append(name)
                else:
                    before += 1
    if after == 0:
        return f"all {before} before the loop"
    # one tile a program: its dK / dV / dQ store descriptors, made after the key loop
    return f"{before} before, {after} after a loop ({', '.join(sorted(set(where)))})"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--head-dims", type=int, nargs="+", default=[64, 128])
    ap.add_argument("--kernels", nargs="+", default=list(KERNELS))
    ap.add_argument("--stages", type=int, nargs="*", default=[], help="extra num_stages to try")
    ap.add_argument("--tile-stages", type=int, nargs="+", default=[2], help="persistent: TILE_STAGES")
    ap.add_argument("--persistent", choices=["both", "no", "yes"], default="both")
    ap.add_argument("--masked", action="store_true", help="the split path's PARTIAL launch (causal)")
    ap.add_argument("--dropout", action="store_true")
    args = ap.parse_args(argv)
    print("| kernel | D | variant | stages | regs | spill B | smem B | warps | setmaxnreg | HGMMA | UTMALDG | "
          "descriptors |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    variants = {"both": [None] + args.tile_stages, "no": [None], "yes": args.tile_stages}[args.persistent]
    for kernel in args.kernels:
        fn, which = KERNELS[kernel]
        for d in args.head_dims:
            for tile_stages in variants:
                for stages in [None] + args.stages:
                    flags = {}
                    if tile_stages is not None:
                        flags.update(PERSISTENT=True, TILE_STAGES=tile_stages)
                    if args.masked:
                        flags.update(PARTIAL=True, HAS_RIGHT=True)
                        if kernel == "dq":
                            flags["HEAVY_FIRST"] = True
                    if args.dropout:
                        flags["HAS_DROPOUT"] = True
                    name = ("one tile" if tile_stages is None else f"persistent, TILE_STAGES={tile_stages}") + (
                        " masked" if args.masked else "") + (" dropout" if args.dropout else "")
                    st = BWD_WARP_SPEC_TILES[d][which].num_stages if stages is None else stages
                    try:
                        c = compile_ws(kernel, d, stages, **flags)
                    except Exception as exc:  # noqa: BLE001  (reported, not fatal)
                        msg = str(exc).splitlines()[0][:80] if str(exc) else ""
                        print(f"| {kernel} | {d} | {name} | {st} | {type(exc).__name__}: {msg} |", flush=True)
                        continue
                    r = resources(c)
                    smem = f"{r['smem']}" + (" OVER" if r["smem"] > SMEM_LIMIT else "")
                    print(f"| {kernel} | {d} | {name} | {st} | {r['regs']} | {r['spill_bytes']} | {smem} | "
                          f"{c.metadata.num_warps} | {c.asm['ptx'].count('setmaxnreg')} | {r['hgmma']} | "
                          f"{r['utmaldg']} | {descriptor_placement(c.asm['ttgir'])} |", flush=True)


if __name__ == "__main__":
    main()
