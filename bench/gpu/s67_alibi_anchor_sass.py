"""Session 67 (offline, sm_90a): why the ALiBi anchor (kernels/common.scores_log2 with HAS_ALIBI = 2) costs ~6% of an
ALiBi forward on the H100. Compiles fwd.py's kernel (host descriptors off and on) and bwd.py's dK/dV and dQ kernels
at D = 128 bf16 (the default tiles of a 4k call) with HAS_ALIBI = True and = 2, and prints registers / spills and the
SASS opcode counts that differ. Outputs: bench/results/nvidia-h100/s67/s67_alibi_anchor_sass_{int,float}.txt (the
integer anchored form first, then the float32 one that was kept).
Usage (repo root): PYTHONPATH=src python bench/gpu/s67_alibi_anchor_sass.py"""
import collections
import re

from flashtriton.bench.compile_report import compile_variant, resources, sass
from flashtriton.kernels import configs


def opcodes(text):
    ops = collections.Counter()
    for line in text.splitlines():
        m = re.search(r"/\*[0-9a-f]{4,}\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", line)
        if m:
            ops[m.group(2).split(".")[0]] += 1
    return ops


for kernel, flags in (("fwd", dict(HOST_DESC=False)), ("fwd", dict(HOST_DESC=True)), ("dkdv", {}), ("dq", {})):
    tile = configs.default_tile(kernel, 128, 4096, 2)
    res = {}
    for alibi in (True, 2):
        c = compile_variant(kernel, tile, 128, "bf16", HAS_ALIBI=alibi, **flags)
        res[alibi] = (resources(c), opcodes(sass(c)))
        print(f"{kernel} {tile} {flags} HAS_ALIBI={alibi}: {res[alibi][0]} instructions "
              f"{sum(res[alibi][1].values())}", flush=True)
    a, b = res[True][1], res[2][1]
    diff = {k: (a[k], b[k]) for k in set(a) | set(b) if a[k] != b[k]}
    print("  opcodes that differ (plain, anchored):", dict(sorted(diff.items())), flush=True)
