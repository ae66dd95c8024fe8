"""Session 28: page-16 decode, the row gather against the page gather (issue 5).

Page 16 at B = 1, L = 8k measured 21.6 us as a CUDA graph against 19.1 contiguous (+12.7%,
target 10%). What the CPU machine found (session 28 helper, sm_90a compile, no GPU; bench/
NOTES.md "Page 16 at B = 1, 8k: the gather's instructions"): the pipelined loop of the
row gather holds 613 SASS instructions a 64-key tile against 342 for the contiguous cache
with pointer loads (FLASHTRITON_DECODE_KV_LOAD=pointer) and ~270 for TMA: one table entry
loaded per row (8 cp.async of 4 bytes a thread), and every row pointer built with signed
division / modulo and 64-bit multiplies, ~235 integer instructions in one block between
the softmax and the P @ V mma - on the path from a tile's arrival to the issue of the copy
two tiles ahead, with one warp per scheduler to issue them. gather="pages"
(FLASHTRITON_DECODE_GATHER=pages) loads BLOCK_N / 16 table entries a tile and builds the
pointers page by page: 299 instructions a tile with int32 offsets (both caches span
< 2**31 elements, as here), 332 with int64; same stages, same 72 KB of shared memory. The
batch regime's 32-key gather tile: 370 -> 212.

Cases, CUDA graphs of one step, read-only L2 flush (the decode bench's method), value
checks off, Hq 32, Hk 8, D 128, bf16, one query, every case interleaved round by round:
  contig   contiguous cache (TMA), the ratio's denominator
  rows     page 16, shuffled pool, gather="rows" (the default before this A/B; "pages" since)
  pages    page 16, the same pool, gather="pages" (int32 offsets)
  pages64  the same with int64 offsets (GATHER_INT32_LIMIT = 0), B = 1 8k only
Outputs are checked first: each against the fp32 reference (batch element 0), and pages /
pages64 against rows bitwise (same tiles, same order of operations).

PREDICTION (graph us, read flush):
  - B = 1 8k: rows 21.3-21.9 (as s27); pages 20.1-20.8, 0.8-1.5 us less (the ~314 fewer
    instructions a tile x 8 tiles a program, ~1.2 cycles each at ~1.9 GHz = 1.6 us if all
    were on the critical path; ~5 of the 8 tile bodies are, in a loop bound by memory
    latency); ratio to contig 1.05-1.09 (target 1.10: met); pages64 between them, 0.1-0.4
    us above pages.
  - B = 1 128k (32 splits, 64 tiles a program, two programs an SM): rows ~144-145, pages
    1-4 us less (ratio 1.01-1.04 from ~1.05).
  - B = 32 32k (batch regime, 32-key gather tile, bandwidth bound): pages within +-1% of rows
    (ratio ~1.00-1.03); no case slower than rows by more than 1%.
  If pages is not faster at 8k, the integer work is hidden behind memory latency and the
  gap lies elsewhere (then: DRAM locality of 16-row pages, an ncu memory chart of rows vs
  contig-pointer).

Run on the H200 (repo root, ~60-80 s with a cold Triton cache):
    PYTHONPATH=src python bench/gpu/s28_decode_paged16_ab.py [rounds=3]
"""
import statistics
import sys
import time

import torch

from flashtriton.bench import common
from flashtriton.bench.decode import make_inputs, ours, reference_out
from flashtriton.launchers import decode as decode_launcher
from flashtriton.launchers import plans

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 3
SHAPES = [(1, 8192), (1, 131072), (32, 32768)]


class Case:
    def __init__(self, name, inp, gather="rows", int64=False):
        self.name, self.inp, self.gather, self.int64 = name, inp, gather, int64
        self.graph = None
        self.us = []

    def run(self):
        """One step under this case's options. The int32 limit is not part of a plan's key:
        the int64 case forgets the plans before and after its call (plans.clear)."""
        if not self.int64:
            with decode_launcher.options(gather=self.gather):
                return ours(self.inp)
        limit = decode_launcher.GATHER_INT32_LIMIT
        plans.clear()
        decode_launcher.GATHER_INT32_LIMIT = 0
        try:
            with decode_launcher.options(gather=self.gather):
                return ours(self.inp)
        finally:
            decode_launcher.GATHER_INT32_LIMIT = limit
            plans.clear()

    def capture(self):
        self.run()
        torch.cuda.synchronize()
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.out = self.run()
        self.graph.replay()             # capture records only: the output exists after a replay
        torch.cuda.synchronize()

    def time(self):
        self.us.append(common.time_ms(self.graph.replay, "cuda", flush="read") * 1e3)


def main():
    t0 = time.perf_counter()
    torch.manual_seed(0)
    print(f"== s28 decode page-16 gather A/B, {torch.cuda.get_device_name()}, rounds {ROUNDS}", flush=True)
    results = []
    for batch, seqlen in SHAPES:
        contig = make_inputs(batch, seqlen, "cuda")
        paged = make_inputs(batch, seqlen, "cuda", page_size=16)
        cases = [Case("contig", contig), Case("rows", paged), Case("pages", paged, "pages")]
        if (batch, seqlen) == (1, 8192):
            cases.append(Case("pages64", paged, "pages", int64=True))
        # correctness first: the eager output against the fp32 reference, then the variants
        # against rows bitwise
        ref_c, ref_p = reference_out(contig), reference_out(paged)
        outs = {}
        for c in cases:
            out = c.run()
            torch.cuda.synchronize()
            err = common.max_rel_err(out[:1], ref_c if c.name == "contig" else ref_p)
            outs[c.name] = out
            print(f"B={batch} L={seqlen} {c.name:8s} max rel err vs fp32 reference {err:.2e}", flush=True)
            assert err < 2e-2, f"{c.name}: error {err}"
        for name in ("pages", "pages64"):
            if name in outs:
                same = torch.equal(outs[name], outs["rows"])
                diff = (outs[name].float() - outs["rows"].float()).abs().max().item()
                print(f"B={batch} L={seqlen} {name} == rows bitwise: {same} (max abs diff {diff:.2e})", flush=True)
        for c in cases:
            c.capture()
            err = common.max_rel_err(c.out[:1], ref_c if c.name == "contig" else ref_p)
            assert err < 2e-2, f"{c.name} (graph): error {err}"
        for _ in range(ROUNDS):
            for c in cases:
                c.time()
        med = {c.name: statistics.median(c.us) for c in cases}
        for c in cases:
            print(f"B={batch} L={seqlen} {c.name:8s} graph us {med[c.name]:8.2f}  (rounds "
                  f"{' '.join(f'{u:.2f}' for u in c.us)})  / contig {med[c.name] / med['contig']:.3f}", flush=True)
        print(f"B={batch} L={seqlen} pages - rows: {med['pages'] - med['rows']:+.2f} us "
              f"({(med['pages'] / med['rows'] - 1) * 100:+.1f}%)", flush=True)
        results.append((batch, seqlen, med))
        del cases, contig, paged, outs
        torch.cuda.empty_cache()
    print("| B | L | contig | page 16 rows | page 16 pages | rows / contig | pages / contig |")
    print("|---|---|---|---|---|---|---|")
    for batch, seqlen, med in results:
        print(f"| {batch} | {seqlen} | {med['contig']:.1f} | {med['rows']:.1f} | {med['pages']:.1f} | "
              f"{med['rows'] / med['contig']:.3f} | {med['pages'] / med['contig']:.3f} |")
    print(f"total {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
