"""(Session 29, offline, no GPU.) The causal D = 256 backward's kernels compiled for sm_90a:
bwd.py's dK/dV (query rows) and dQ (FUSED_DELTA), causal, with the three masked / fully
visible / masked loops against one loop (ONE_LOOP without RESUME: launchers/backward.
BWD_MASKED_ONE_LOOP), at the short default tiles and the causal dK/dV candidates of
bench/gpu/s29_d256_causal_bwd_ab.py. Per compile: registers, spill bytes, shared memory,
HGMMA / HMMA counts and SASS length; then, per inner loop body (a backward branch whose body
holds tensor-core instructions), its length and its spill loads / stores an iteration.
A program an SM: by shared memory (232448 B) and registers (65536).

    PYTHONPATH=src python bench/d256_causal_bwd_compile.py          # ~1 min on 2 cores
"""
import os
import re
import subprocess
import tempfile

from flashtriton.bench.compile_report import _NVBIN, compile_variant, resources
from flashtriton.kernels import configs

SMEM_SM, REGS_SM = 232448, 65536
T = configs.Tile
CASES = [
    ("dq", T(128, 32, 8, 3), dict(FUSED_DELTA=True)),       # dQ's default at every N
    ("dkdv", T(64, 32, 4, 2), dict(KEY_ROWS=False)),        # dK/dV's short default (N <= 1k)
    ("dkdv", T(64, 64, 8, 2), dict(KEY_ROWS=False)),        # causal candidates
    ("dkdv", T(64, 32, 8, 2), dict(KEY_ROWS=False)),
    ("dkdv", T(128, 64, 8, 1), dict(KEY_ROWS=False)),       # dK/dV's default from 2k
]


def sass_of(compiled) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        cubin = os.path.join(tmp, "k.cubin")
        with open(cubin, "wb") as f:
            f.write(compiled.asm["cubin"])
        return subprocess.run([os.path.join(_NVBIN, "cuobjdump"), "--dump-sass", cubin],
                              capture_output=True, text=True).stdout


def inner_loops(sass: str):
    """(instructions, HGMMA, HMMA, STL, LDL) of each backward branch's body that holds
    tensor-core instructions and no nested loop of them (the tile loops)."""
    ins = []
    for line in sass.splitlines():
        m = re.match(r"\s+/\*([0-9a-f]{4,})\*/\s+(.*)", line)
        if m:
            ins.append((int(m.group(1), 16), m.group(2)))
    spans = []
    for addr, text in ins:
        if "BRA" not in text:
            continue
        t = re.search(r"0x([0-9a-f]+)", text.split("BRA", 1)[1])
        if t and int(t.group(1), 16) < addr:
            spans.append((int(t.group(1), 16), addr))
    out = []
    for lo, hi in spans:
        body = [x for a, x in ins if lo <= a <= hi]
        counts = tuple(sum(op in x for x in body) for op in ("HGMMA", "HMMA", "STL", "LDL"))
        nested = any(lo < a2 and b2 < hi for a2, b2 in spans if (a2, b2) != (lo, hi))
        if (counts[0] or counts[1]) and not nested:
            out.append((len(body),) + counts)
    return out


def main():
    print("| kernel | tile | loops | regs | spill B | smem KB | programs/SM | HGMMA | HMMA | SASS | "
          "inner loops: instr / HGMMA / HMMA / STL / LDL |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for kernel, tile, flags in CASES:
        for one_loop in (False, True):
            shape = (tile.block_m, tile.block_n, tile.num_warps, tile.num_stages)
            try:
                c = compile_variant(kernel, tile, 256, HAS_RIGHT=True, ONE_LOOP=one_loop, **flags)
                r = resources(c)
                sass = sass_of(c)
            except Exception as exc:  # noqa: BLE001  (reported)
                print(f"| {kernel} | {shape} | {'one' if one_loop else 'three'} | {type(exc).__name__}: "
                      f"{str(exc).splitlines()[0][:80]} |", flush=True)
                continue
            per_sm = max(1, min(SMEM_SM // (r["smem"] + 1024), REGS_SM // (r["regs"] * 32 * tile.num_warps)))
            loops = "; ".join("/".join(str(x) for x in lp) for lp in inner_loops(sass))
            print(f"| {kernel} | {shape} | {'one' if one_loop else 'three'} | {r['regs']} | {r['spill_bytes']} | "
                  f"{r['smem'] / 1024:.0f} | {per_sm} | {r['hgmma']} | {r['hmma']} | {sass.count(chr(10))} | "
                  f"{loops} |", flush=True)


if __name__ == "__main__":
    main()
