"""SASS identity check for the D = 256 split-dQ change (session 33, issue 4): compiles offline for
sm_90a (no GPU) the routed fused D = 256 backward's variants (kernels/bwd_gluon_d256.py: bf16 / fp16,
plain (ROTATE on / off) and causal, DQ_ATOMIC) and the Gluon dQ kernel's existing D = 64 / 128
variants (kernels/bwd_gluon_dq.py: bench/gluon_bwd_dq_compile.py's VARIANTS table), and writes
{variant: sha1 of its SASS, addresses and header stripped (gluon_bwd_fused_sass_hash.strip)} to a
JSON file. The new constexprs (DKDV_ONLY of the D = 256 kernel, V_EARLY of the dQ kernel) are
left at their defaults (and are not passed when the kernel lacks them, so the script also runs on
the tree before the change: PYTHONPATH=<old tree>/src).

    PYTHONPATH=/work/main/src python bench/d256_split_sass_hash.py before.json
    PYTHONPATH=src python bench/d256_split_sass_hash.py after.json --compare before.json
"""
import hashlib
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import d256_bwd_gluon_compile as d256c  # noqa: E402
import gluon_bwd_dq_compile as dqc  # noqa: E402
from gluon_bwd_fused_sass_hash import strip  # noqa: E402
from gluon_fwd_compile import sass  # noqa: E402

# (dtype, causal, rotate, dq_atomic): the routed kernel's variants and the A/B ones
D256 = [("bf16", False, True, False), ("fp16", False, True, False), ("bf16", True, False, False),
        ("fp16", True, False, False), ("bf16", False, False, False), ("bf16", False, True, True),
        ("bf16", True, False, True)]


def main(argv):
    if len(argv) not in (1, 3) or (len(argv) == 3 and argv[1] != "--compare"):
        sys.exit(__doc__)
    res = {}
    t = time.time()
    for dt, causal, rot, atomic in D256:
        c = d256c.compile_d256(dt, causal, rot, dq_atomic=atomic)
        k = repr(("d256", dt, causal, rot, atomic))
        res[k] = hashlib.sha1(strip(sass(c)).encode()).hexdigest()[:16]
        print(len(res), k, res[k], f"{time.time() - t:.0f}s", flush=True)
    for d, dt, bn, ks, vs, causal in dqc.VARIANTS:
        c = dqc.compile_dq(d, dt, None, bn, ks, vs, causal)
        k = repr(("dq", d, dt, bn, ks, vs, causal))
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
