"""SASS identity check for kernels/bwd_gluon_fused.py: compiles the fused backward's variants
(bench/gluon_bwd_compile.py's --fused table with and without DROPOUT, the --window and --wide
variants) offline for sm_90a and writes {variant: sha1 of its SASS with the /*address*/ prefixes
and the header before "Function :" stripped} to a JSON file. Run it before and after a kernel
change and compare the two files (session 31's DEFER_DQ helper: the 28 earlier variants; the
DQ_SPLIT_M helper: those plus DEFER_DQ's 4, then its own 4, new).

    PYTHONPATH=src python bench/gluon_bwd_fused_sass_hash.py before.json    # ~1 min without Triton's cache
    PYTHONPATH=src python bench/gluon_bwd_fused_sass_hash.py after.json --compare before.json
"""
import hashlib
import json
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gluon_bwd_compile as g  # noqa: E402
from gluon_fwd_compile import sass  # noqa: E402

# (D, dtype, NUM_STAGES or None, ROTATE, CAUSAL, DROPOUT, WINDOW, WIDE): gluon_bwd_compile's tables
VARIANTS = [
    (128, "bf16", None, True, False, False, False, False), (128, "fp16", None, True, False, False, False, False),
    (64, "bf16", None, True, False, False, False, False), (64, "fp16", None, True, False, False, False, False),
    (128, "bf16", None, False, False, False, False, False), (64, "bf16", 2, True, False, False, False, False),
    (128, "bf16", 3, True, False, False, False, False),
    (128, "bf16", None, True, True, False, False, False), (128, "fp16", None, True, True, False, False, False),
    (64, "bf16", None, True, True, False, False, False), (64, "fp16", None, True, True, False, False, False),
    (128, "bf16", 3, True, True, False, False, False),
    (128, "bf16", None, True, False, True, False, False), (128, "fp16", None, True, False, True, False, False),
    (64, "bf16", None, True, False, True, False, False), (64, "fp16", None, True, False, True, False, False),
    (128, "bf16", None, False, False, True, False, False),
    (128, "bf16", None, True, True, True, False, False), (128, "fp16", None, True, True, True, False, False),
    (64, "bf16", None, True, True, True, False, False),
    (128, "bf16", None, False, False, False, True, False), (128, "fp16", None, False, False, False, True, False),
    (64, "bf16", None, False, False, False, True, False), (64, "fp16", None, False, False, False, True, False),
    (64, "bf16", None, True, False, False, False, True), (64, "fp16", None, True, False, False, False, True),
    (64, "bf16", None, True, True, False, False, True), (64, "fp16", None, True, True, False, False, True),
]
# (session 31, the D = 64 DQ_SPLIT_M helper) with a ninth field, the extra keywords of compile_fused:
# DEFER_DQ's variants (--fused --defer), then DQ_SPLIT_M's (--fused --splitm); the 28 keys above unchanged
VARIANTS += [
    (128, "bf16", None, True, False, False, False, False, dict(defer=True)),
    (128, "fp16", None, True, False, False, False, False, dict(defer=True)),
    (128, "bf16", None, False, False, False, False, False, dict(defer=True)),
    (64, "bf16", None, True, False, False, False, False, dict(defer=True)),
    (64, "bf16", None, True, False, False, False, True, dict(splitm=True)),
    (64, "fp16", None, True, False, False, False, True, dict(splitm=True)),
    (64, "bf16", None, True, True, False, False, True, dict(splitm=True)),
    (64, "fp16", None, True, True, False, False, True, dict(splitm=True)),
]
# (session 43) the TIMELINE probe's variants (--fused --timeline), flags 1 / 15: new keys, the 36 above unchanged
VARIANTS += [
    (128, "bf16", None, True, False, False, False, False, dict(timeline=1)),
    (128, "bf16", None, True, False, False, False, False, dict(timeline=15)),
    (128, "bf16", None, True, True, False, False, False, dict(timeline=15)),
]


def strip(text):
    """The SASS text from "Function :" on, the /*address*/ prefixes and trailing blanks removed."""
    body = "\n".join(re.sub(r"/\*[0-9a-f]{4,}\*/", "", ln).rstrip() for ln in text.splitlines())
    return body[body.find("Function :"):]


def main(argv):
    if len(argv) not in (1, 3) or (len(argv) == 3 and argv[1] != "--compare"):
        sys.exit(__doc__)
    res = {}
    t = time.time()
    for d, dt, st, rot, causal, drop, win, wide, *extra in VARIANTS:
        kw = extra[0] if extra else {}
        c = g.compile_fused(d, dt, st, rot, causal, drop, window=win, wide=wide, **kw)
        k = repr((d, dt, st, rot, causal, drop, win, wide, *extra))
        res[k] = hashlib.sha1(strip(sass(c)).encode()).hexdigest()[:16]
        print(len(res), k, res[k], f"{time.time() - t:.0f}s", flush=True)
    with open(argv[0], "w") as f:
        json.dump(res, f, indent=1)
    if len(argv) == 3:
        with open(argv[2]) as f:
            old = json.load(f)
        diff = [k for k in old if old[k] != res.get(k)]
        new = [k for k in res if k not in old]
        if new:
            print(f"new variants (not compared): {new}")
        print(f"{len(old) - len(diff)} of {len(old)} variants identical; differ: {diff}")
        return 1 if diff else 0
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
