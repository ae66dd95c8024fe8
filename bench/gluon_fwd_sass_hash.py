"""SASS identity check for kernels/fwd_gluon.py: compiles every variant of bench/gluon_fwd_compile.py's
table offline (sm_90a) and writes {variant: sha1 of its SASS with the /*address*/ prefixes and the
header before "Function :" stripped} to a JSON file. Run it before and after a kernel change and
compare the two files (session 29's causal 3-consumer helper: the 61 earlier variants identical).

    PYTHONPATH=src python bench/gluon_fwd_sass_hash.py before.json    # ~2 min without Triton's cache
"""
import hashlib
import json
import re
import sys
import time

sys.path.insert(0, "bench")
import gluon_fwd_compile as g

def variants():
    """The table of gluon_fwd_compile.main, taken from its source (the list literal)."""
    src = open("bench/gluon_fwd_compile.py").read()
    start = src.index("    variants = [")
    end = src.index("    ]\n", start) + 6
    ns = {}
    exec("def _v():\n" + src[start:end] + "    return variants\n", ns)
    return ns["_v"]()

def strip(text):
    out = []
    for line in text.splitlines():
        line = re.sub(r"/\*[0-9a-f]{4,}\*/", "", line)
        out.append(line.rstrip())
    body = "\n".join(out)
    i = body.find("Function :")
    return body[i:]

def key(v):
    return repr(v)

if len(sys.argv) != 2:
    sys.exit(__doc__)
res = {}
t = time.time()
vs = variants()
for v in vs:
    d, dt, bn, st, pp, neg, causal, *rest = v
    pers = bool(rest and rest[0]); sched = bool(len(rest) > 1 and rest[1]); win = bool(len(rest) > 2 and rest[2])
    drop = bool(len(rest) > 3 and rest[3]); nc = rest[4] if len(rest) > 4 else 2
    eq = bool(len(rest) > 5 and rest[5])
    lean = bool(len(rest) > 6 and rest[6])
    split = bool(len(rest) > 7 and rest[7])
    own = bool(len(rest) > 8 and rest[8])          # (session 42: passed; before, OWN_TILES rows hashed without it)
    ost = bool(len(rest) > 9 and rest[9])
    bm, bn0, st0 = (g.CONSUMERS3_CONFIG if nc == 3 else g.DEFAULT_CONFIG)[d]
    kw = dict(early_q=eq) if eq else {}
    if lean:
        kw["lean_mask"] = True
    if split:
        kw["split_empty"] = True
    if own:
        kw["own_tiles"] = True
    if ost:
        kw["o_stage"] = True
    c = g.compile_fwd(d, dt, bm, bn or bn0, st or st0, neg_scale=neg, pingpong=pp, causal=causal, persistent=pers,
                      scheduled=sched, window=win, dropout=drop, num_consumers=nc, **kw)
    s = strip(g.sass(c))
    res[key(v)] = hashlib.sha1(s.encode()).hexdigest()[:16]
    print(len(res), key(v), res[key(v)], f"{time.time()-t:.0f}s", flush=True)
json.dump(res, open(sys.argv[1], "w"), indent=1)
