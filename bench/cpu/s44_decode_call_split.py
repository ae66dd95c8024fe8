"""Per-call split (session 44): the bench's decode call and the kernel call alone (s42_decode_ab.kernel_call; decode._attend_compiled until session 56), after SDPA / a read flush:
wall time against the C kernel's own time (FT_TRACE build swapped in), i.e. the host share.

    PYTHONPATH=src python bench/cpu/s44_decode_call_split.py --L 8192 --rounds 15 --flush sdpa,read
"""
import os, sys, time, statistics, ctypes, argparse, math, torch
import torch.nn.functional as F
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import s42_decode_ab as ab
import flashtriton
from flashtriton import kvcache
from flashtriton.cpu import decode, native
ap = argparse.ArgumentParser()
ap.add_argument("--L", type=int, default=8192)
ap.add_argument("--dtype", default="bf16")
ap.add_argument("--rounds", type=int, default=15)
ap.add_argument("--flush", default="sdpa,read")
a = ap.parse_args()
dt = {"bf16": torch.bfloat16, "fp32": torch.float32}[a.dtype]
lib = native.load_variant("FT_TRACE")
lib.ft_rdtsc.restype = ctypes.c_uint64
tr = (ctypes.c_uint64 * 512).in_dll(lib, "ft_trace")
decode.compiled_library = lambda dtype: lib
q = torch.randn(1, 1, 32, 128, dtype=dt)
kc = torch.randn(1, a.L, 8, 128, dtype=dt)
vc = torch.randn(1, a.L, 8, 128, dtype=dt)
lens = torch.full((1,), a.L, dtype=torch.int32)
def ours():
    with flashtriton.use_backend("cpu"), kvcache.value_checks(False):
        return flashtriton.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=lens)
out = torch.empty_like(q); lse = torch.empty(1, 32, 1)
p = ab.decode_inputs(dt, 64)[3]
direct = lambda: ab.kernel_call(lib, q, kc, vc, p, out, lse)
ours(); direct()
e0, t0 = lib.ft_rdtsc(), time.perf_counter()
time.sleep(0.2)
ghz = (lib.ft_rdtsc() - e0) / (time.perf_counter() - t0) / 1e9
junk = torch.rand(96 * 2 ** 20 // 4)
FL = {"read": lambda: junk.sum(), "none": lambda: None,
      "sdpa": lambda: F.scaled_dot_product_attention(q.transpose(1, 2), kc.transpose(1, 2), vc.transpose(1, 2),
                                              enable_gqa=True)}
st = {}
for r in range(a.rounds):
    ab.wait_quiet()
    for fl in a.flush.split(","):
        for name, fn in (("bench_call", ours), ("attend_compiled", direct)):
            FL[fl]()
            a0 = lib.ft_rdtsc(); fn(); a1 = lib.ft_rdtsc()
            T = list(tr)
            d = st.setdefault((fl, name), {"wall": [], "pre": [], "kernel": [], "post": []})
            d["wall"].append((a1 - a0) / ghz / 1e3); d["pre"].append((T[0] - a0) / ghz / 1e3)
            d["kernel"].append((T[1] - T[0]) / ghz / 1e3); d["post"].append((a1 - T[1]) / ghz / 1e3)
print(f"{a.dtype} L={a.L}, {a.rounds} rounds, us (median / min)")
for (fl, name), d in st.items():
    print(f"  after {fl:5s} {name:16s} "
          + "  ".join(f"{k} {statistics.median(v):7.1f} / {min(v):7.1f}" for k, v in d.items()))
