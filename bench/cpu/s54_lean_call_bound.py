"""Bound (session 54) on what a leaner CPU decode replay could save: the API call (use_backend("cpu"),
value_checks(False), as the bench's decode row) against a prototype that does only the per-call work (lens.tolist,
the output, the meta array, the ctypes call with every constant prepared; bf16 8k, B = 1, Hq = 32, Hk = 8, D = 128),
alternating, each right after an SDPA call; checks the two outputs are equal first. Session 54, two runs of 21
rounds: api 1197 / 1121 us median, lean 1111 / 976, per-round ratio 0.97 / 0.87.

    PYTHONPATH=src python bench/cpu/s54_lean_call_bound.py 21
"""
import sys, time, statistics, ctypes, math, torch, torch.nn.functional as F
import flashtriton
from flashtriton import kvcache
from flashtriton.cpu import decode, native, config
from flashtriton.cpu.forward import q_scale
from flashtriton.launchers.prefill import AttnParams
L = 8192
torch.manual_seed(0)
q = torch.randn(1, 1, 32, 128, dtype=torch.bfloat16)
kc = torch.randn(1, L, 8, 128, dtype=torch.bfloat16); vc = torch.randn_like(kc)
lens = torch.full((1,), L, dtype=torch.int32)
params = AttnParams(1 / math.sqrt(128))
lib = native.load()
es = 2; ks = kc.stride(); qs = q.stride()
consts = dict(scale=q_scale(params))
work = decode._scratch_ptr("work", 1 * 8 * 8 * 4 * (128 + 16))
lsep = decode._scratch_ptr("lse", 32)
def lean():
    n = lens.tolist()[0]
    out = torch.empty_like(q, memory_format=torch.contiguous_format)
    threads = torch.get_num_threads()
    splits = max(1, min(config.DECODE_ITEMS_PER_THREAD * threads, n // config.DECODE_MIN_PIECE))
    meta = (ctypes.c_int64 * 6)(0, 0, 0, n, 0, n)
    rc = lib.ft_decode(kc.data_ptr(), vc.data_ptr(), ks[0] * es, ks[1] * es, ks[2] * es, 0, None, 0, meta,
                       q.data_ptr(), qs[0] * es, qs[1] * es, qs[2] * es, consts["scale"], 1, 8, 1, 4, 4, 128, splits,
                       1, work, out.data_ptr(), 1 * 32 * 128 * es, 32 * 128 * es, 128 * es, lsep, threads, 0)
    return out
def api():
    return flashtriton.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=lens)
sdpa = lambda: F.scaled_dot_product_attention(q.transpose(1, 2), kc.transpose(1, 2), vc.transpose(1, 2), enable_gqa=True)
if __name__ == "__main__":      # (bench/cpu/s56_decode_layers_probe.py imports the set-up above)
    with flashtriton.use_backend("cpu"), kvcache.value_checks(False):
        a = api(); b = lean()
        assert torch.equal(a, b), "lean != api"
        fns = {"api": api, "lean": lean}
        t = {n: [] for n in fns}
        for r in range(int(sys.argv[1])):
            for n in (list(fns) if r % 2 else list(fns)[::-1]):
                sdpa(); t0 = time.perf_counter(); fns[n](); t[n].append((time.perf_counter() - t0) * 1e6)
    for n in fns: print(n, "med %.0f min %.0f us" % (statistics.median(t[n]), min(t[n])))
    print("per-round lean/api", statistics.median(b / a for a, b in zip(t["api"], t["lean"])))
