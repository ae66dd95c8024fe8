"""Length scan (session 44 helper): the compiled decode kernel's time against the cache length L at the bench's
decode shape (B=1, Hq=32, Hk=8, D=128), interleaved over L (rotated order each round), each call after a cache
flush (--flush read: a torch sum over a 96 MiB float32 tensor; none: back to back; sdpa: an SDPA call on the
same L, as the bench). Prints min / median ms and GB/s per L and a least-squares fit time = a + bytes / bw over
the medians and over the mins (L >= --fit-from).

    PYTHONPATH=src python bench/cpu/s44_decode_len_scan.py --rounds 21 --dtype bf16 --flush read [--defines X=1]
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
from flashtriton.cpu import decode, native  # noqa: E402


def fit(xs, ys):
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    return my - b * mx, b


def call(lib, q, k, v, params, splits):
    out = torch.empty_like(q)
    lse = torch.empty(1, q.shape[2], 1)
    return lambda: ab.kernel_call(lib, q, k, v, params, out, lse, splits)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=21)
    ap.add_argument("--dtype", default="bf16")
    ap.add_argument("--lens", default="64,512,1024,2048,4096,8192,16384,32768")
    ap.add_argument("--flush", default="read", choices=["read", "none", "sdpa"])
    ap.add_argument("--defines", default="")
    ap.add_argument("--fit-from", type=int, default=2048)
    ap.add_argument("--no-wait", action="store_true")
    ap.add_argument("--splits", type=int, default=0, help="num_splits (0: the default rule)")
    a = ap.parse_args()
    dt = {"bf16": torch.bfloat16, "fp32": torch.float32}[a.dtype]
    lib = native.load_variant(*[x for x in a.defines.split(",") if x]) if a.defines else native.load()
    lens = [int(x) for x in a.lens.split(",")]
    cases = {}
    for n in lens:
        q, k, v, p = ab.decode_inputs(dt, n)
        sd = (lambda q=q, k=k, v=v: F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                                                 v.transpose(1, 2), enable_gqa=True))
        cases[n] = (call(lib, q, k, v, p, a.splits), sd, 2 * n * 8 * 128 * k.element_size())
        cases[n][0]()
    junk = torch.rand(96 * 2 ** 20 // 4)
    times = {n: [] for n in lens}
    for r in range(a.rounds):
        if not a.no_wait:
            ab.wait_quiet()
        for n in lens[r % len(lens):] + lens[:r % len(lens)]:
            f, sd, _ = cases[n]
            if a.flush == "read":
                junk.sum()
            elif a.flush == "sdpa":
                sd()
            t0 = time.perf_counter()
            f()
            times[n].append((time.perf_counter() - t0) * 1e3)
    print(f"{a.dtype} flush={a.flush} splits={a.splits} rounds={a.rounds} threads={torch.get_num_threads()} "
          f"defines={a.defines!r}")
    for n in lens:
        nb = cases[n][2]
        mn, md = min(times[n]), statistics.median(times[n])
        print(f"  L={n:6d} {nb / 1e6:7.2f} MB  min {mn:8.3f} med {md:8.3f} ms  {nb / mn / 1e6:5.1f} / "
              f"{nb / md / 1e6:5.1f} GB/s")
    sel = [n for n in lens if n >= a.fit_from]
    for what, agg in (("median", statistics.median), ("min", min)):
        c0, c1 = fit([cases[n][2] / 1e6 for n in sel], [agg(times[n]) for n in sel])
        print(f"  fit ({what}, L >= {a.fit_from}): a = {c0 * 1e3:.1f} us, bw = {1 / c1:.1f} GB/s")


if __name__ == "__main__":
    main()
