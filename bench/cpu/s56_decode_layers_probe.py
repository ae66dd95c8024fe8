"""Where the CPU decode call's host time goes, by layer (session 56): bf16 8k, B = 1, Hq = 32, Hk = 8, D = 128,
each variant timed right after an SDPA call (cold caches, as the bench's rows), rotated rounds:
  api      flashtriton.flash_attn_with_kvcache (use_backend("cpu"), value_checks(False), as the bench)
  fwd      backends.get("cpu").kvcache_fwd with the call's params (skips kvcache.py's front end)
  compiled decode._attend_compiled with the library, starts, n and out prepared (skips kvcache_fwd)
  lean     the ctypes call with every constant prepared (lens.tolist, out, meta only: s54_lean_call_bound.py)
Checks the four outputs are equal first. Medians of the per-variant times and of the per-round ratios to api.

    PYTHONPATH=src python bench/cpu/s56_decode_layers_probe.py 21
"""
import sys, time, statistics, ctypes, math, torch, torch.nn.functional as F
import flashtriton
from flashtriton import kvcache, backends
from flashtriton.cpu import decode, native, config
from flashtriton.cpu.forward import q_scale
from flashtriton.launchers.prefill import AttnParams
L = 8192
torch.manual_seed(0)
q = torch.randn(1, 1, 32, 128, dtype=torch.bfloat16)
kc = torch.randn(1, L, 8, 128, dtype=torch.bfloat16); vc = torch.randn_like(kc)
lens = torch.full((1,), L, dtype=torch.int32)
params = kvcache._attn_params(1 / math.sqrt(128), -1, -1, 0.0)
lib = native.load()
es = 2; ks = kc.stride(); qs = q.stride()
scale = q_scale(params)
work = decode._scratch_ptr("work", 1 * 8 * 8 * 4 * (128 + 16))
lsep = decode._scratch_ptr("lse", 32)
cpu = backends.get("cpu")
def lean():
    n = lens.tolist()[0]
    out = torch.empty_like(q, memory_format=torch.contiguous_format)
    threads = torch.get_num_threads()
    splits = max(1, min(config.DECODE_ITEMS_PER_THREAD * threads, n // config.DECODE_MIN_PIECE))
    meta = (ctypes.c_int64 * 6)(0, 0, 0, n, 0, n)
    lib.ft_decode(kc.data_ptr(), vc.data_ptr(), ks[0] * es, ks[1] * es, ks[2] * es, 0, None, 0, meta,
                  q.data_ptr(), qs[0] * es, qs[1] * es, qs[2] * es, scale, 1, 8, 1, 4, 4, 128, splits,
                  1, work, out.data_ptr(), 1 * 32 * 128 * es, 32 * 128 * es, 128 * es, lsep, threads, 0)
    return out
def compiled():
    n = lens.tolist()
    out = torch.empty_like(q, memory_format=torch.contiguous_format)
    decode.compiled_launch(q, kc, vc, params, None, out).run(q, kc, vc, lens, None, None, None, 0, 0, out, None)
    return out
def fwd():
    return cpu.kvcache_fwd(q, kc, vc, None, None, None, None, lens, None, None, None, params, True, None, 0,
                           need_lse=False)[0]
def api():
    return flashtriton.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=lens)
sdpa = lambda: F.scaled_dot_product_attention(q.transpose(1, 2), kc.transpose(1, 2), vc.transpose(1, 2), enable_gqa=True)
with flashtriton.use_backend("cpu"), kvcache.value_checks(False):
    fns = {"api": api, "fwd": fwd, "compiled": compiled, "lean": lean}
    ref = api()
    for n_, f in fns.items():
        assert torch.equal(f(), ref), n_
    t = {n: [] for n in fns}
    names = list(fns)
    for r in range(int(sys.argv[1])):
        for n in names[r % 4:] + names[:r % 4]:
            sdpa(); t0 = time.perf_counter(); fns[n](); t[n].append((time.perf_counter() - t0) * 1e6)
for n in fns:
    print("%-9s med %5.0f min %5.0f us   per-round / api %.3f" % (n, statistics.median(t[n]), min(t[n]),
          statistics.median(b / a for a, b in zip(t["api"], t[n]))))
