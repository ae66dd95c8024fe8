"""Session 4, GPU call 1: decode launch variants at B = 1 (the split regime), where the
issue's latency (L = 8k), bandwidth (L = 128k) and paged (page 16) targets are missed.
Each row is checked against the fp32 reference before it is timed (bench.decode)."""
import sys
import time

import torch

from flashtriton.bench import decode as D
from flashtriton.launchers import decode as launcher


def variants(page):
    v = [("default", {}, 0), ("combine=kernel", dict(combine="kernel"), 0)]
    if page:
        for s in (32, 48, 64):
            v += [(f"splits={s}", {}, s), (f"splits={s},combine=kernel", dict(combine="kernel"), s)]
        for tile in ((32, 4, 5), (32, 4, 7), (64, 4, 7), (16, 4, 8)):
            for s in (16, 32):
                v.append(("tile=%d,%d,%d,splits=%d" % (*tile, s),
                          dict(block_n=tile[0], num_warps=tile[1], num_stages=tile[2]), s))
    else:
        for tile in ((64, 4, 4), (128, 4, 3), (128, 4, 4)):
            for comb in ("fused", "kernel"):
                v.append(("tile=%d,%d,%d,%s" % (*tile, comb),
                          dict(block_n=tile[0], num_warps=tile[1], num_stages=tile[2], combine=comb), 0))
        for s in (8, 12, 24, 32):
            v.append((f"splits={s},combine=kernel", dict(combine="kernel"), s))
    return v


def main():
    rows = []
    for batch, seqlen, page in [(1, 8192, 0), (1, 32768, 0), (1, 131072, 0), (1, 8192, 16), (1, 131072, 16)]:
        inp = D.make_inputs(batch, seqlen, "cuda", page_size=page)
        ref = D.reference_out(inp)
        for label, opts, splits in variants(page):
            try:
                with launcher.options(**opts):
                    fn = lambda: D.ours(inp, num_splits=splits)  # noqa: E731
                    D._checked(fn, ref, label)
                    eager, graph = D._time(fn, "cuda", True)
                print(f"B={batch} L={seqlen} page={page} {label}: graph {graph * 1e3:.1f} us "
                      f"({D.kv_bytes(batch, seqlen) / graph / 1e9:.2f} TB/s), eager {eager * 1e3:.1f} us", flush=True)
            except Exception as exc:
                print(f"B={batch} L={seqlen} page={page} {label}: {type(exc).__name__}: {str(exc)[:150]}", flush=True)
        del inp
    # append + rotary at B = 1, L = 8k with the combine in its own kernel
    for comb in ("fused", "kernel"):
        with launcher.options(combine=comb):
            for r in D.bench_append(1, 8192, "cuda", True):
                print("append", comb, r.get("variant"), round(r.get("graph_us", -1), 1), r.get("error", ""), flush=True)


if __name__ == "__main__":
    main()
