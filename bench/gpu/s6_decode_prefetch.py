"""(Record of a measurement: the block-table prefetch variant it times was reverted after this run,
slower or no faster; bench/NOTES.md, "Session 6". The options it sets no longer exist.)

Session 6, GPU call 2: the paged decode's speculative block-table prefetch
(PREFETCH_TABLE, kernels/decode.py) on and off, interleaved with the contiguous cache
in three rounds, then a tile / split sweep of the page-16 row gather at B = 1, L = 8k.
Each row is checked against the fp32 reference before it is timed (bench.decode);
graph replays after a read-only flush [zeroing flush]."""
import statistics

import torch

from flashtriton.bench import decode as D
from flashtriton.launchers import decode as launcher


def run(label, inp, ref, opts, splits=0, quiet=False):
    try:
        with launcher.options(**opts):
            fn = lambda: D.ours(inp, num_splits=splits)  # noqa: E731
            D._checked(fn, ref, label)
            eager, graph, zero = D._time(fn, "cuda", True)
        b, l = inp["q"].shape[0], inp["cache_seqlens"][0].item()
        if not quiet:
            print(f"{label}: graph {graph * 1e3:.1f} us [{zero * 1e3:.1f}] "
                  f"({D.kv_bytes(b, l) / graph / 1e9:.2f} TB/s), eager {eager * 1e3:.1f}", flush=True)
        return graph * 1e3, zero * 1e3
    except Exception as exc:  # noqa: BLE001
        print(f"{label}: {type(exc).__name__}: {str(exc)[:200]}", flush=True)
        return float("nan"), float("nan")


def main():
    for batch, seqlen, page in [(1, 8192, 16), (1, 8192, 256), (1, 131072, 16), (32, 32768, 16)]:
        tag = f"B={batch} L={seqlen} page={page}"
        cont = D.make_inputs(batch, seqlen, "cuda")
        cref = D.reference_out(cont)
        paged = D.make_inputs(batch, seqlen, "cuda", page_size=page)
        pref = D.reference_out(paged)
        res = {"contiguous": [], "prefetch": [], "no prefetch": []}
        for _ in range(3 if batch == 1 else 1):
            res["contiguous"].append(run(f"{tag} contiguous", cont, cref, {}, quiet=True))
            res["prefetch"].append(run(f"{tag} prefetch", paged, pref, dict(prefetch_table=True), quiet=True))
            res["no prefetch"].append(run(f"{tag} no prefetch", paged, pref, dict(prefetch_table=False), quiet=True))
        c_med = statistics.median(r[0] for r in res["contiguous"])
        cz_med = statistics.median(r[1] for r in res["contiguous"])
        for k, rs in res.items():
            g = [r[0] for r in rs]
            z = [r[1] for r in rs]
            print(f"{tag} {k}: graph {' '.join(f'{x:.1f}' for x in g)} us (median {statistics.median(g):.1f}, "
                  f"{statistics.median(g) / c_med - 1:+.1%}) [zero flush median {statistics.median(z):.1f}, "
                  f"{statistics.median(z) / cz_med - 1:+.1%}]", flush=True)
        if (batch, seqlen, page) == (1, 8192, 16):
            for tile in ((32, 4, 5), (32, 4, 7), (64, 4, 4), (64, 4, 6), (64, 4, 7), (64, 8, 5)):
                run(f"{tag} tile={tile}", paged, pref, dict(block_n=tile[0], num_warps=tile[1], num_stages=tile[2]))
            for s in (8, 12, 24, 32):
                run(f"{tag} splits={s}", paged, pref, {}, s)
            run(f"{tag} combine=fused", paged, pref, dict(combine="fused"))
            run(f"{tag} min_split_keys=128", paged, pref, dict(min_split_keys=128))
        del cont, paged, cref, pref
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
