"""Sweep (session 43): several builds of cpu/native.py's decode kernel interleaved in one process at the bench's
decode shape (B=1, Hq=32, Hk=8, D=128), against HEAD's build ("old"): per build min / median ms and GB/s, the
median of the per-round time ratios build / old, and a bitwise check against old. Reuses s42_decode_ab's
helpers (old source, idle wait, build).

    PYTHONPATH=src python bench/cpu/s43_decode_pf_sweep.py --rounds 15 --lens 8192,32768 --dtypes bf16 \\
        --variant pf1=PF_BF16=1 --variant pf2=PF_BF16=1,PF_DIST_BF16=2 [--no-wait] [--after-sdpa]

Each round calls every build once, in a rotated order (the torch sum over the same bytes is one of them:
the read-bandwidth reference; one SDPA call first per round leaves the caches as the bench does).
"""
import argparse
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import s42_decode_ab as ab  # noqa: E402
from flashtriton.cpu import native  # noqa: E402


def case(dtype, seqlen, libs, rounds, quiet, after_sdpa=False, hq=32, hk=8, d=128):
    q, k, v, params = ab.decode_inputs(dtype, seqlen, hq, hk, d)
    outs = {}

    def ours(lib, name):
        return ab.compiled_call(lib, q, k, v, params,
                                lambda out, lse: outs.__setitem__(name, (out.clone(), lse.clone())))
    fns = {"sum": lambda: (k.view(torch.float32).sum(), v.view(torch.float32).sum())}
    for n, lib in libs.items():
        fns[n] = ours(lib, n)
    sdpa = lambda: F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                                  enable_gqa=True)
    for f in fns.values():
        f()
    same = {n: torch.equal(outs[n][0], outs["old"][0]) and torch.equal(outs[n][1], outs["old"][1]) for n in libs}
    names = list(fns)
    times = {n: [] for n in names}
    waited = 0.0
    for r in range(rounds):
        waited += ab.wait_quiet() if quiet else 0.0
        sdpa()
        for n in names[r % len(names):] + names[:r % len(names)]:
            if after_sdpa:          # as the bench's time_interleaved: every call right after an SDPA call
                sdpa()
            t0 = time.perf_counter()
            fns[n]()
            times[n].append((time.perf_counter() - t0) * 1e3)
    nb = 2 * seqlen * hk * d * k.element_size()
    print(f"{str(dtype).replace('torch.', '')} L={seqlen // 1024}k ({nb / 1e6:.1f} MB), {rounds} rounds, waited "
          f"{waited:.1f} s; bitwise == old: " + ", ".join(f"{n} {s}" for n, s in same.items()), flush=True)
    for n in names:
        mn, md, rr = ab.summary(times, n)
        print(f"  {n:10s} min {mn:8.3f} med {md:8.3f} ms  {nb / mn / 1e6:5.1f} / {nb / md / 1e6:5.1f} GB/s"
              f"  / old: min {mn / min(times['old']):.3f} med {md / statistics.median(times['old']):.3f}"
              f" per-round {rr:.3f}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--lens", default="8192,32768")
    ap.add_argument("--dtypes", default="bf16")
    ap.add_argument("--variant", action="append", default=[], help="NAME=DEF1,DEF2 (defines of the working tree)")
    ap.add_argument("--no-wait", action="store_true")
    ap.add_argument("--after-sdpa", action="store_true",
                    help="an SDPA call before every timed call (the bench's order)")
    a = ap.parse_args()
    split = lambda s: [x for x in s.split(",") if x]
    libs = {"old": ab.build(ab.old_source(None), [], "decode_s42old"), "new": native.load()}
    for v in a.variant:
        n, _, defs = v.partition("=")
        libs[n] = native.load_variant(*split(defs))
    print(f"threads {torch.get_num_threads()}; " + "; ".join(a.variant), flush=True)
    dts = {"bf16": torch.bfloat16, "fp32": torch.float32}
    for dt in split(a.dtypes):
        for n in split(a.lens):
            case(dts[dt], int(n), libs, a.rounds, not a.no_wait, a.after_sdpa)


if __name__ == "__main__":
    main()
