"""Session 18 (issue 6): A/B of CPU decode kernel variants, base against copies of
native.C_SOURCE edited here, interleaved, each call after a 128 MB read (cold L3),
medians; outputs compared (allclose: a variant's blocking changes the softmax's rounding).
Variant "phase": the odd OpenMP thread's first block of each item is half as long, so the
two threads' touch (memory) and compute phases alternate instead of coinciding (one core
reads ~38-41 GB/s alone, the two ~50 together on the CI VM). Result: bench/NOTES.md.

    PYTHONPATH=src python bench/cpu_decode_phase_ab.py [REPS]
"""
import sys, time, statistics
import torch
import flashtriton
from flashtriton.cpu import native

src = native.C_SOURCE
old_loop = """    for (int64_t j = j0; j < j1; j += TB) {
        const int nt = (int)(j1 - j < TB ? j1 - j : TB);"""
assert old_loop in src
phase = src.replace("#include <math.h>", "#include <math.h>\n#include <omp.h>").replace(old_loop, """    const int odd = omp_get_thread_num() & 1;
    for (int64_t j = j0, first = 1; j < j1; j += (first && odd ? TB / 2 : TB), first = 0) {
        const int64_t tb = first && odd ? TB / 2 : TB;
        const int nt = (int)(j1 - j < tb ? j1 - j : tb);""")
VARIANTS = {"base": src, "phase": phase}
libs = {k: native._open(native._build((), s, stem="abdecode")) for k, s in VARIANTS.items()}
flush = torch.empty(32 * 2**20, dtype=torch.float32).uniform_()

def run(dtype, L):
    B, Hq, Hk, D = 1, 32, 8, 128
    kc = torch.randn(B, L, Hk, D, dtype=dtype)
    vc = torch.randn(B, L, Hk, D, dtype=dtype)
    q = torch.randn(B, 1, Hq, D, dtype=dtype)
    seqlens = torch.full((B,), L, dtype=torch.int32)
    res = {k: [] for k in libs}
    outs = {}
    for rep in range(int(sys.argv[1]) if len(sys.argv) > 1 else 15):
        for k, lib in (libs.items() if rep % 2 == 0 else reversed(list(libs.items()))):
            native.load = lambda lib=lib: lib
            flush.sum()
            t = time.perf_counter()
            o = flashtriton.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=seqlens)
            res[k].append(time.perf_counter() - t)
            outs[k] = o
    for k in libs:
        assert torch.allclose(outs[k].float(), outs["base"].float(), atol=2e-2, rtol=2e-2), k
    kv = 2 * B * L * Hk * D * kc.element_size()
    print(dtype, L, "  ".join(f"{k} {statistics.median(v)*1e6:.0f} us ({kv/statistics.median(v)/1e9:.1f} GB/s)" for k, v in res.items()), flush=True)

for dtype in (torch.float32, torch.bfloat16):
    for L in (8192, 32768):
        run(dtype, L)
