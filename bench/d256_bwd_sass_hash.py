"""SASS identity check for kernels/bwd_gluon_d256.py (session 33's schedule switches are off by
default, so the routed V1 kernel must compile to the same SASS before and after): compiles the
default variants of bench/d256_bwd_gluon_compile.py offline (sm_90a, no GPU) and writes {variant:
sha1 of its SASS with the /*address*/ prefixes and the header before "Function :" stripped} to a
JSON file (as bench/gluon_fwd_sass_hash.py does for the forward). Run it on both trees and compare.

    PYTHONPATH=src python bench/d256_bwd_sass_hash.py after.json          # ~1 min on 2 cores
    (the tree before: git archive HEAD src bench | tar -x -C /tmp/before, then the same there)
"""
import hashlib
import json
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import d256_bwd_gluon_compile as g  # noqa: E402

VARIANTS = [("bf16", {}), ("fp16", dict(dtype="fp16")), ("bf16 causal", dict(causal=True)),
            ("fp16 causal", dict(dtype="fp16", causal=True)), ("bf16 no-rotate", dict(rotate=False)),
            ("bf16 1 stage", dict(num_stages=1)), ("bf16 V2", dict(dq_atomic=True)),
            ("bf16 V2 causal", dict(dq_atomic=True, causal=True))]


def strip(text: str) -> str:
    body = "\n".join(re.sub(r"/\*[0-9a-f]{4,}\*/", "", line).rstrip() for line in text.splitlines())
    return body[body.find("Function :"):]


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    res, t = {}, time.time()
    for name, kw in VARIANTS:
        res[name] = hashlib.sha1(strip(g.sass(g.compile_d256(**kw))).encode()).hexdigest()[:16]
        print(name, res[name], f"{time.time() - t:.0f}s", flush=True)
    with open(sys.argv[1], "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
