"""Host-path profile (session 44): where the bench decode call's host time goes with cold caches (right after
SDPA): wrappers stamp the TSC around the front end's and cpu/decode.py's functions (inclusive, summed per call);
"C kernel" = ft_decode's own entry / return stamps (the FT_TRACE build, swapped in as native.load()'s library).

    PYTHONPATH=src python bench/cpu/s44_decode_host_profile.py [L]
"""
import os, sys, time, statistics, ctypes, torch, functools
import torch.nn.functional as F
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import s42_decode_ab as ab
import flashtriton
from flashtriton import kvcache, memory, validate, backends
import flashtriton.cpu as fcpu
from flashtriton.cpu import decode, native
L = int(sys.argv[1]) if len(sys.argv) > 1 else 8192
lib = native.load_variant("FT_TRACE")
lib.ft_rdtsc.restype = ctypes.c_uint64
rd = lib.ft_rdtsc
tr = (ctypes.c_uint64 * 512).in_dll(lib, "ft_trace")
native._library.lib = lib
stamps = []
def wrap(mod, name):
    f = getattr(mod, name)
    @functools.wraps(f)
    def w(*a, **k):
        s = rd(); r = f(*a, **k); stamps.append((name, s, rd())); return r
    setattr(mod, name, w)
wrap(kvcache, "_checked_structure"); wrap(validate, "options"); wrap(validate, "_tensor"); wrap(backends, "select")
wrap(backends, "get"); wrap(fcpu, "kvcache_fwd"); wrap(decode, "compiled_ok"); wrap(decode.CompiledLaunch, "run")
wrap(decode, "compiled_library"); wrap(native, "load_amx"); wrap(memory, "empty"); wrap(decode, "_scratch")
wrap(flashtriton, "use_backend"); wrap(kvcache, "_attn_params")
dt = torch.bfloat16
q = torch.randn(1, 1, 32, 128, dtype=dt)
kc, vc = torch.randn(1, L, 8, 128, dtype=dt), torch.randn(1, L, 8, 128, dtype=dt)
lens = torch.full((1,), L, dtype=torch.int32)
def ours():
    with flashtriton.use_backend("cpu"), kvcache.value_checks(False):
        return flashtriton.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=lens)
ours()
e0 = rd(); t0 = time.perf_counter(); time.sleep(0.2); ghz = (rd() - e0) / (time.perf_counter() - t0) / 1e9
sd = lambda: F.scaled_dot_product_attention(q.transpose(1, 2), kc.transpose(1, 2), vc.transpose(1, 2), enable_gqa=True)
acc = {}
for r in range(12):
    ab.wait_quiet(); sd()
    stamps.clear()
    a0 = rd(); ours(); a1 = rd()
    T0, T1 = tr[0], tr[1]
    rows = {"total": a1 - a0, "C kernel": T1 - T0, "pre (to C entry)": T0 - a0, "post": a1 - T1}
    for n, s, e in stamps:
        rows[n] = rows.get(n, 0) + e - s
    for k, v in rows.items():
        acc.setdefault(k, []).append(v / ghz / 1e3)
print(f"bf16 L={L} after SDPA, 12 rounds, us median / min (wrapped functions: inclusive, summed per call)")
for k, v in acc.items():
    print(f"  {k:22s} {statistics.median(v):8.1f} / {min(v):8.1f}")
