import sys, importlib, re
sys.path.insert(0, "bench")
src0 = open("/tmp/probe/fwd_gluon_halves.py").read()
variants = {"A hi hidden": ("    if lim0 <= 0:\n        lo = gl.where", "    if True:\n        lo = gl.where"),
            "B lo visible": ("    if lim0 <= 0:\n        lo = gl.where", "    if False:\n        lo = gl.where"),
            }
for name, (a, b) in variants.items():
    s = src0.replace(a, b)
    if name.startswith("B"):
        s = s.replace("        if lim0 < HALF_N - 1:\n", "        if False:\n")
    assert s != src0
    open("src/flashtriton/kernels/fwd_gluon.py", "w").write(s)
    for m in [k for k in list(sys.modules) if k.startswith("flashtriton") or k == "gluon_fwd_compile"]:
        del sys.modules[m]
    import gluon_fwd_compile as g
    c = g.compile_fwd(head_dim=128, causal=True)
    r = g.report(c)
    print(name, r["tile_loops"], r.get("spill_bytes"), r["depbar1"], flush=True)
open("src/flashtriton/kernels/fwd_gluon.py", "w").write(src0)
