"""Stall samples of an Nsight Compute source export, per kernel: the share of each stall reason, the opcodes that
collect them, and the top SASS lines (session 40). No GPU needed.

    ncu ... --section WarpStateStats --section SourceCounters -o rep python ...        (on the GPU machine)
    ncu -i rep.ncu-rep --page source --csv --print-source sass > sass.csv
    python bench/ncu_stalls.py bench/results/nvidia-h200/s40/ours_sass.csv.gz [--top 25]

Read with care: ncu samples every resident warp, so warps that wait all kernel long (the 1-warp loader's three
padding warps in our 12-warp Gluon kernels, parked on a NOP at a barrier) hold a large "barrier" share that costs
no issue slot; "exec" (how often the line ran) tells such lines apart (once a warp).
"""
from __future__ import annotations

import argparse
import collections
import csv
import gzip


def read(path: str) -> dict:
    opener = gzip.open if path.endswith(".gz") else open
    kernels, kern, hdr = collections.defaultdict(list), None, None
    with opener(path, "rt") as f:
        for row in csv.reader(f):
            if len(row) >= 2 and row[0] == "Kernel Name":
                kern, hdr = row[1], None
            elif row and row[0] == "Address":
                hdr = row
            elif hdr and kern and len(row) >= len(hdr) - 1:
                kernels[kern].append(dict(zip(hdr, row)))
    return kernels


def _count(line: dict, reason: str) -> int:
    value = line.get(reason) or "0"
    return int(value) if value.isdigit() else 0


def report(kernels: dict, top: int) -> None:
    for name, lines in kernels.items():
        reasons = [h for h in lines[0] if h.startswith("stall_") and "(Not" not in h]
        total = collections.Counter({r: sum(_count(x, r) for x in lines) for r in reasons})
        n = sum(total.values()) or 1
        print(f"== {name}: {len(lines)} SASS lines, {n} samples")
        print("   " + ", ".join(f"{r[6:]} {v / n:.3f}" for r, v in total.most_common(8)))
        by_op = collections.defaultdict(collections.Counter)
        for x in lines:
            words = x["Source"].split()
            op = (words[1] if words and words[0].startswith("@") and len(words) > 1 else (words or ["?"])[0])
            for r in reasons:
                by_op[op.split(".")[0]][r[6:]] += _count(x, r)
        for op, c in sorted(by_op.items(), key=lambda kv: -sum(kv[1].values()))[:12]:
            s = sum(c.values())
            print(f"   {op:10s} {s:6d} {s / n:.3f}  " + ", ".join(f"{r}={v}" for r, v in c.most_common(3)))
        ranked = sorted(lines, key=lambda x: -sum(_count(x, r) for r in reasons))[:top]
        for x in ranked:
            c = collections.Counter({r[6:]: _count(x, r) for r in reasons})
            print(f"   {x['Address'][-5:]:>5s} {sum(c.values()):6d} {x['Source'][:58]:58s} exec {x['Instructions Executed']:>7s} "
                  + ", ".join(f"{r}={v}" for r, v in c.most_common(2)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv")
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args()
    report(read(args.csv), args.top)


if __name__ == "__main__":
    main()
