"""Session 28: why a page-16 decode step at B = 1, L = 8k costs ~+6 us eagerly but only ~+1
us as a CUDA graph (s28 call 4: eager 26.9 against the contiguous cache's 21.2 us, graphs
19.8 against 19.0). Eager and graph steps differ in two ways: the host path (a CPU
simulation, bench/decode_host_sim.py, gives paged16 +0.3 us over contiguous: not it) and
the combine (launchers/decode.auto_combine: "fused" eagerly, the last split program of each
KV head merging the partials; "kernel" while capturing, a second small launch). So this
times both combines both ways (eager with the read flush, graph replay), per layout.

PREDICTION: the eager - graph gap is the fused combine's GPU time: as graphs, combine=fused
runs ~2 us above combine=kernel for the contiguous cache (auto_combine's docstring) and ~6-7
us above it for page 16 (the last program's merge waits on the slowest split, and the page
gather's splits finish less evenly). If so, the eager paged step should take the kernel
combine too when the split program count is small, or the fused merge must be fixed.

    PYTHONPATH=src python bench/gpu/s28_decode_combine_ab.py      (~40 s)
"""
import statistics
import time

import torch

from flashtriton.bench import common
from flashtriton.bench.decode import make_inputs, ours, reference_out
from flashtriton.launchers import decode as decode_launcher

ROUNDS = 3


def main():
    t0 = time.perf_counter()
    torch.manual_seed(0)
    print(f"== s28 decode combine A/B, {torch.cuda.get_device_name()}", flush=True)
    for batch, seqlen in ((1, 8192), (1, 131072)):
        layouts = {"contig": make_inputs(batch, seqlen, "cuda"),
                   "page16": make_inputs(batch, seqlen, "cuda", page_size=16),
                   "page256": make_inputs(batch, seqlen, "cuda", page_size=256)}
        cases = {}
        for lname, inp in layouts.items():
            ref = reference_out(inp)
            for combine in ("fused", "kernel"):
                def run(inp=inp, combine=combine):
                    with decode_launcher.options(combine=combine):
                        return ours(inp)
                out = run()
                torch.cuda.synchronize()
                err = common.max_rel_err(out[:1], ref)
                assert err < 2e-2, (lname, combine, err)
                run()
                torch.cuda.synchronize()
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g):
                    gout = run()
                g.replay()
                torch.cuda.synchronize()
                assert common.max_rel_err(gout[:1], ref) < 2e-2
                cases[(lname, combine)] = dict(run=run, graph=g, eager=[], replay=[])
        for _ in range(ROUNDS):
            for c in cases.values():
                c["eager"].append(common.time_ms(c["run"], "cuda", flush="read") * 1e3)
                c["replay"].append(common.time_ms(c["graph"].replay, "cuda", flush="read") * 1e3)
        base = {k: statistics.median(cases[("contig", k)][m]) for k in ("fused", "kernel") for m in ("eager",)}
        print(f"\nB={batch} L={seqlen}: us, median of {ROUNDS} rounds (eager / graph)")
        print("| layout | combine | eager us | graph us | eager / contig eager (same combine) |")
        print("|---|---|---|---|---|")
        for (lname, combine), c in cases.items():
            e, r = statistics.median(c["eager"]), statistics.median(c["replay"])
            print(f"| {lname} | {combine} | {e:.2f} | {r:.2f} | {e / base[combine]:.3f} |", flush=True)
        del cases, layouts
        torch.cuda.empty_cache()
    print(f"total {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
