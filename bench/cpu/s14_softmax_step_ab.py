"""Session 14 (issue 6): the CPU decode's online-softmax step over NS score vectors of 16
keys (cpu/native.py, NSUB_BF16 / NSUB_F32), NS = 1, 2, 4 in one binary, switched at run
time (ft_set_ns), 8 alternations: separately built libraries differed by up to +-20% from
build to build on the 2-core VM, more than the change itself.

Usage: python bench/cpu/s14_softmax_step_ab.py L {bf16,fp32} {flush,sdpa,hot}
  flush: a 128 MB read before each call (cache cold, as between a model's layers);
  sdpa:  torch SDPA on the same cache before each call (the CPU bench's order);
  hot:   back to back (L = 2k: the cache stays in L3, so this times the compute).
Prediction (before the runs): bf16 -5-10% (one max, one rescale and one sum per 64 keys
instead of per 16; the P @ V accumulators loaded and stored a quarter as often).
"""
import sys, time, torch, statistics
import flashtriton
from flashtriton import kvcache
from flashtriton.cpu import native
from flashtriton.bench.cpu import _sdpa
src = native.C_SOURCE
old = "    const int NS = BF16 ? NSUB_BF16 : NSUB_F32;"
assert src.count(old) == 1
src = src.replace(old, "    const int NS = g_ns;")
src = src.replace("#define NSUB_MAX 4", "#define NSUB_MAX 4\nstatic int g_ns = 4;\nvoid ft_set_ns(int n) { g_ns = n; }", 1)
lib = native._open(native._build((), source=src, stem="s14rt"))
native.load = lambda: lib
L = int(sys.argv[1]); dt = {"bf16": torch.bfloat16, "fp32": torch.float32}[sys.argv[2]]; mode = sys.argv[3]
torch.manual_seed(0)
q = torch.randn(1, 1, 32, 128, dtype=dt); kc = torch.randn(1, L, 8, 128, dtype=dt); vc = torch.randn(1, L, 8, 128, dtype=dt)
lens = torch.full((1,), L, dtype=torch.int32)
junk = torch.ones(32 * 2**20)
def f():
    with flashtriton.use_backend("cpu"), kvcache.value_checks(False):
        return flashtriton.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=lens)
res = {1: [], 2: [], 4: []}
for rep in range(8):
    for ns in ((1, 2, 4) if rep % 2 == 0 else (4, 2, 1)):
        lib.ft_set_ns(ns)
        f()
        ts = []
        for _ in range(12):
            if mode == "flush": junk.sum()
            elif mode == "sdpa": _sdpa(q, kc, vc, gqa=True)
            t0 = time.perf_counter(); f(); ts.append(time.perf_counter() - t0)
        res[ns].append(statistics.median(ts) * 1e6)
print(f"L={L//1024}k {sys.argv[2]} {mode:5s} " + "  ".join(f"NS={ns}: {statistics.median(v):7.1f} us (min {min(v):7.1f})" for ns, v in res.items()), flush=True)
