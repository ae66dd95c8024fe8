"""Session 18 (issue 6): CPU decode kernel variants against the committed one, each built
from an edited copy of native.C_SOURCE, called interleaved, each call after a 128 MB read
(cold L3); medians; outputs compared (allclose: a variant's blocking changes the
softmax's rounding). Results: bench/NOTES.md, "Session 18".

- phase: the odd OpenMP thread's first block of each item is half as long, so the two
  threads' touch (memory) and compute phases alternate instead of coinciding;
- touch2 / touch4: the touch (the block's cache lines read in address order before its
  compute) over 2 / 4 blocks at once; notouch: none;
- ns2 / ns1: NSUB_BF16 2 / 1 (bf16 blocks of 32 / 16 keys instead of 64).

    PYTHONPATH=src python bench/cpu_decode_variants_ab.py [REPS] [variant,variant,...] [--bf16-only]
"""
import statistics
import sys
import time

import torch

import flashtriton
from flashtriton.cpu import native

SRC = native.C_SOURCE
# the touch block of item(): from its comment to the closing brace after the empty asm
_T0 = SRC.index("        {   /* 4-byte loads: every line is touched")
_T1 = SRC.index("\n        }\n", SRC.index('__asm__ volatile("" : : "r"(sink));', _T0)) + len("\n        }")
TOUCH = SRC[_T0:_T1]
LOOP = """    for (int64_t j = j0; j < j1; j += TB) {
        const int nt = (int)(j1 - j < TB ? j1 - j : TB);"""
assert LOOP in SRC


def touch_m(m):
    """The touch of m blocks at once, at every m-th block."""
    return SRC.replace(TOUCH, f"""        if ((j - j0) % ({m} * TB) == 0) {{
            uint32_t sink = 0;
            const int64_t je = j + {m} * TB < j1 ? j + {m} * TB : j1;
            for (int64_t jj = j; jj < je; jj++) {{
                const char *kq = row_ptr(a, a->k, b, a->start[b] + jj), *vq = row_ptr(a, a->v, b, a->start[b] + jj);
                for (int64_t o = 0; o < span; o += 64) {{
                    uint32_t x, y;
                    memcpy(&x, kq + o, 4); memcpy(&y, vq + o, 4);
                    sink += x + y;
                }}
            }}
            __asm__ volatile("" : : "r"(sink));
        }}""")


PHASE = SRC.replace("#include <math.h>", "#include <math.h>\n#include <omp.h>").replace(LOOP, """    const int odd = omp_get_thread_num() & 1;
    for (int64_t j = j0, first = 1; j < j1; j += (first && odd ? TB / 2 : TB), first = 0) {
        const int64_t tb = first && odd ? TB / 2 : TB;
        const int nt = (int)(j1 - j < tb ? j1 - j : tb);""")
VARIANTS = {"base": SRC, "phase": PHASE, "touch2": touch_m(2), "touch4": touch_m(4), "notouch": SRC.replace(TOUCH, ""),
            "ns2": SRC.replace("#define NSUB_BF16 4", "#define NSUB_BF16 2"),
            "ns1": SRC.replace("#define NSUB_BF16 4", "#define NSUB_BF16 1")}


def run(libs, flush, dtype, length, reps):
    b, hq, hk, d = 1, 32, 8, 128
    kc, vc = (torch.randn(b, length, hk, d, dtype=dtype) for _ in range(2))
    q = torch.randn(b, 1, hq, d, dtype=dtype)
    seqlens = torch.full((b,), length, dtype=torch.int32)
    res, outs = {k: [] for k in libs}, {}
    for rep in range(reps):
        for k, lib in (libs.items() if rep % 2 == 0 else reversed(list(libs.items()))):
            native.load = lambda lib=lib: lib
            flush.sum()
            t = time.perf_counter()
            outs[k] = flashtriton.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=seqlens)
            res[k].append(time.perf_counter() - t)
    for k in libs:
        assert torch.allclose(outs[k].float(), outs["base"].float(), atol=2e-2, rtol=2e-2), k
    kv = 2 * b * length * hk * d * kc.element_size()
    print(dtype, length, "  ".join(f"{k} {statistics.median(v) * 1e6:.0f} us ({kv / statistics.median(v) / 1e9:.1f} GB/s)"
                                   for k, v in res.items()), flush=True)


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    reps = int(args[0]) if args else 15
    names = args[1].split(",") if len(args) > 1 else list(VARIANTS)
    names = ["base"] + [n for n in names if n != "base"]
    libs = {k: native._open(native._build((), VARIANTS[k], stem="abdecode")) for k in names}
    flush = torch.empty(32 * 2**20, dtype=torch.float32).uniform_()
    for dtype in ((torch.bfloat16,) if "--bf16-only" in sys.argv else (torch.float32, torch.bfloat16)):
        for length in (8192, 32768):
            run(libs, flush, dtype, length, reps)


if __name__ == "__main__":
    main()
