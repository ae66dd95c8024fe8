"""Session 18 (issue 6): CPU decode kernel variants against the committed one (edited
copies of native.C_SOURCE, interleaved, each call after a 128 MB read, medians): the
touch (the block's cache lines read in address order before its compute) over 2 or 4
blocks at once, no touch, and NSUB_BF16 2 / 1 (bf16 blocks of 32 / 16 keys instead of
64). Results: bench/NOTES.md, "Session 18".

    PYTHONPATH=src python bench/cpu_decode_touch_ab.py REPS [variants,comma,separated] [bf]
"""
import sys, time, statistics
import torch
import flashtriton
from flashtriton.cpu import native

src = native.C_SOURCE
old_touch = """        {   /* 4-byte loads: every line is touched, nothing past a row's last byte */
            uint32_t sink = 0;
            for (int t = 0; t < nt; t++)
                for (int64_t o = 0; o < span; o += 64) {
                    uint32_t x, y;
                    memcpy(&x, kp[t] + o, 4); memcpy(&y, vp[t] + o, 4);
                    sink += x + y;
                }
            __asm__ volatile("" : : "r"(sink));   /* keeps the loads (an empty asm reading sink) */
        }"""
assert old_touch in src

def touch_m(m):
    return src.replace(old_touch, """        if ((j - j0) %% (%d * TB) == 0) {
            uint32_t sink = 0;
            const int64_t je = j + %d * TB < j1 ? j + %d * TB : j1;
            for (int64_t jj = j; jj < je; jj++) {
                const char *kq = row_ptr(a, a->k, b, a->start[b] + jj), *vq = row_ptr(a, a->v, b, a->start[b] + jj);
                for (int64_t o = 0; o < span; o += 64) {
                    uint32_t x, y;
                    memcpy(&x, kq + o, 4); memcpy(&y, vq + o, 4);
                    sink += x + y;
                }
            }
            __asm__ volatile("" : : "r"(sink));
        }""" % (m, m, m))

VARIANTS = {"base": src, "ns2": src.replace("#define NSUB_BF16 4", "#define NSUB_BF16 2"), "ns1": src.replace("#define NSUB_BF16 4", "#define NSUB_BF16 1"), "touch2": touch_m(2), "touch4": touch_m(4), "notouch": src.replace(old_touch, "")}
only = sys.argv[2].split(",") if len(sys.argv) > 2 else list(VARIANTS)
libs = {k: native._open(native._build((), VARIANTS[k], stem="abdecode")) for k in only}
flush = torch.empty(32 * 2**20, dtype=torch.float32).uniform_()

def run(dtype, L):
    B, Hq, Hk, D = 1, 32, 8, 128
    kc = torch.randn(B, L, Hk, D, dtype=dtype)
    vc = torch.randn(B, L, Hk, D, dtype=dtype)
    q = torch.randn(B, 1, Hq, D, dtype=dtype)
    seqlens = torch.full((B,), L, dtype=torch.int32)
    res = {k: [] for k in libs}
    outs = {}
    for rep in range(int(sys.argv[1])):
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
    print(dtype, L, "  ".join(f"{k} {statistics.median(v)*1e6:.0f}" for k, v in res.items()), "us", flush=True)

for dtype in ((torch.bfloat16,) if len(sys.argv) > 3 else (torch.float32, torch.bfloat16)):
    for L in (8192, 32768):
        run(dtype, L)
