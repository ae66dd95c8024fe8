import sys, re
sys.path.insert(0, "bench")
import gluon_fwd_compile as g
for kw in [dict(head_dim=128, window=True, lean_mask=True, persistent=True, scheduled=True, o_stage=True)]:
    c = g.compile_fwd(**kw)
    text = g.sass(c)
    ins = [(int(a, 16), t.strip()) for a, t in re.findall(r"/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;", text)]
    at = {a: i for i, (a, _) in enumerate(ins)}
    total = sum(("LDL" in t or "STL" in t) for _, t in ins)
    inloops = []
    for i, (a, t) in enumerate(ins):
        m = re.search(r"BRA\s+0x([0-9a-f]+)", t)
        if m and int(m.group(1), 16) <= a and int(m.group(1), 16) in at:
            body = [x for _, x in ins[at[int(m.group(1), 16)]:i + 1]]
            if sum("WARPGROUP.ARRIVE" in x for x in body) == 2 and any("HGMMA" in x for x in body):
                inloops.append((len(body), sum(("LDL" in x or "STL" in x) for x in body)))
    print(kw, "local accesses total", total, "loops (size, local)", inloops, g.report(c).get("spill_bytes"))
