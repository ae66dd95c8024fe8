"""Session 52 (offline; for the next GPU session): FOLD, the masked softmax steps of kernels/fwd_gluon.py with the scale
folded into the exponent (bench/wip/gluon-fwd-fold.patch): A/B of two source trees, each timed in its own process,
the processes alternated in rotated rounds (a kernel change that touches many variants has no switch to flip in one
process: Triton refuses a changed global between launches).

Why: a masked step (the causal diagonal tile, the window's edge tiles, a packed sequence's last tile) costs ~1.45x an
unmasked one (bench/NOTES.md, "Issue 3's window target, bounded"); it scales every score by an FMUL before the mask
and the max, then subtracts the max by an FADD, where the unmasked step does one FFMA. FOLD masks the raw scores,
scales the row max (per row) and takes the exponent by FFMA: one instruction an element less on masked tiles.
PREDICTION (before any GPU run; the offline SASS counts in bench/wip/gluon-fwd-fold.md): causal D = 128 512 (route
fwd_ws.py: unchanged, a control) level; causal D = 128 1k / 2k (O_STAGE, ~22% / ~12% of steps masked) +1-2% / +0.5-1%;
8k level (+0.3%); window (1024, 0) 16k (2 of 9 steps masked) +1-2%; D = 64 causal 4k +0.5-1%. Outputs: within the
float64 criterion, not bitwise the old (p rounded once instead of twice), m / lse bitwise.
RULE: take FOLD if no case reads below 0.99x by the median of five rounds and the window or a causal 1k / 2k case
reads >= 1.01x; then the Gluon forward GPU suites on the new tree.

HALVES (bench/wip/gluon-fwd-fold-halves.patch, FOLD plus HALVES): the causal masked step by the tile's two 64-column
halves, one of which needs no compare (offline: 441 / 601 SASS a masked tile on the aligned diagonal's two consumers
against FOLD's 651 and the old 713; unmasked 490). PREDICTION for FOLD+HALVES over the old (half of the SASS model):
causal D = 128 1k +4%, 2k +2.5%, 8k +0.5%, D = 128 causal 512 on the O_STAGE kernel +6% (then re-run
s52_short_routes_grid.py: it may pass the rule against fwd_ws.py), D = 64 causal 4k +1.5%; the window as FOLD's.

    git worktree add /tmp/old HEAD; git worktree add /tmp/fold HEAD; git worktree add /tmp/halves HEAD
    git -C /tmp/fold apply $PWD/bench/wip/gluon-fwd-fold.patch
    git -C /tmp/halves apply $PWD/bench/wip/gluon-fwd-fold-halves.patch
    PYTHONPATH=src python bench/gpu/s52_fold_ab.py --old /tmp/old --new fold=/tmp/fold --new halves=/tmp/halves
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

CASES = [("c128-512", 128, 512, "causal"), ("c128-1k", 128, 1024, "causal"), ("c128-2k", 128, 2048, "causal"),
         ("c128-8k", 128, 8192, "causal"), ("c64-4k", 64, 4096, "causal"), ("w128-16k", 128, 16384, "window")]
# Session 53: FOLD for kernels/fwd.py's masked tiles (bench/wip/fwd-py-fold.patch; `--cases fwd_py`): the cells
# fwd.py runs (D = 64 causal up to 2k; a (256, 0) window at 2k, below the Gluon window's 4k) and a control on
# fwd_ws.py (D = 128 causal 512). Prediction and rule: bench/wip/fwd-py-fold.md.
CASE_SETS = {"gluon": CASES,
             "fwd_py": [("c64-512", 64, 512, "causal"), ("c64-1k", 64, 1024, "causal"),
                        ("c64-2k", 64, 2048, "causal"), ("w128-2k-256", 128, 2048, "window256"),
                        ("c128-512", 128, 512, "causal")],
             # (session 53, bench/wip/bwd-py-fold.patch) forward+backward where kernels/bwd.py runs the masked
             # tiles: D = 128 causal 512 (below the fused Gluon backward's 1k), a deterministic causal 1k, a
             # (256, 0) window at 1k (windowed backwards below 2k); control: causal 2k (the fused Gluon kernel)
             "bwd_py": [("b128c-512", 128, 512, "bwd-causal"), ("b128c-1k-det", 128, 1024, "bwd-causal-det"),
                        ("b128w-1k", 128, 1024, "bwd-window256"), ("b128c-2k", 128, 2048, "bwd-causal")]}

CHILD = r'''
import json, sys, torch
sys.path.insert(0, "bench/gpu")
from s42_timing import kernel_ms
from flashtriton import flash_attn_func
res = {}
for name, d, n, kind in json.loads(sys.argv[1]):
    h, b = 2048 // d, 16384 // n
    torch.manual_seed(0)
    q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    if kind.startswith("bwd-"):
        # forward+backward: bwd-causal[-det] / bwd-window<left>
        mask = kind[4:].replace("-det", "")
        kw = dict(causal=True) if mask == "causal" else dict(window_size=(int(mask[6:]), 0))
        kw["deterministic"] = kind.endswith("-det")
        q, k, v = (t.requires_grad_() for t in (q, k, v))
        dout = torch.randn_like(q)
        step = lambda: torch.autograd.grad(flash_attn_func(q, k, v, **kw), (q, k, v), dout)
        dq = step()[0]
        ms = kernel_ms(step)
        torch.save(dq[0, :, 0].cpu(), f"/tmp/s52fold-{sys.argv[2]}-{name}.pt")
        res[name] = ms
        continue
    kw = dict(causal=True) if kind == "causal" else dict(window_size=(int(kind[6:] or 1024), 0))
    with torch.no_grad():
        out = flash_attn_func(q, k, v, **kw)
        ms = kernel_ms(lambda: flash_attn_func(q, k, v, **kw))
    torch.save(out[0, :, 0].cpu(), f"/tmp/s52fold-{sys.argv[2]}-{name}.pt")
    res[name] = ms
print("RESULT " + json.dumps(res))
'''


def run_tree(tree, tag, cases=CASES):
    env = dict(os.environ, PYTHONPATH=os.path.join(os.path.abspath(tree), "src"))
    out = subprocess.run([sys.executable, "-c", CHILD, json.dumps(cases), tag], env=env, capture_output=True, text=True,
                         cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    line = [x for x in out.stdout.splitlines() if x.startswith("RESULT ")]
    if not line:
        raise RuntimeError(out.stderr[-2000:])
    return json.loads(line[0][7:])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--old", required=True)
    ap.add_argument("--new", action="append", required=True, help="name=path (repeatable)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--cases", choices=sorted(CASE_SETS), default="gluon")
    a = ap.parse_args()
    cases = CASE_SETS[a.cases]
    trees = {"old": a.old}
    for item in a.new:
        name, _, path = item.partition("=")
        trees[name if path else "new"] = path or name
    names = list(trees)
    got = {t: [] for t in names}
    for r in range(a.rounds):
        for t in names[r % len(names):] + names[:r % len(names)]:
            got[t].append(run_tree(trees[t], t, cases))
    import torch
    for name, d, n, kind in cases:
        o = [x[name] for x in got["old"]]
        line = f"{name:9s} old {statistics.median(o):.4f} ms"
        for t in names[1:]:
            nw = [x[name] for x in got[t]]
            ratio = [a_ / b_ for a_, b_ in zip(o, nw)]          # > 1: t faster
            diff = (torch.load(f"/tmp/s52fold-old-{name}.pt").float()
                    - torch.load(f"/tmp/s52fold-{t}-{name}.pt").float()).abs().max()
            line += (f"; {t} {statistics.median(nw):.4f} ms, speed / old per round "
                     f"{' / '.join(f'{x:.3f}' for x in ratio)} (median {statistics.median(ratio):.3f}, lowest "
                     f"{min(ratio):.3f}), max |{t} - old| {diff:.2e}")
        print(line, flush=True)


if __name__ == "__main__":
    main()
