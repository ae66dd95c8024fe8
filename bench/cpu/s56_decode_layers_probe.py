"""Where the CPU decode call's host time goes, by layer (session 56): bf16 8k, B = 1, Hq = 32, Hk = 8, D = 128
(s54_lean_call_bound.py's inputs and its api / lean calls), each variant timed right after an SDPA call (cold caches,
as the bench's rows), rotated rounds:
  api      flashtriton.flash_attn_with_kvcache (use_backend("cpu"), value_checks(False), as the bench)
  fwd      backends.get("cpu").kvcache_fwd with the call's params (skips kvcache.py's front end)
  compiled the compiled launch built and run (skips kvcache_fwd's own lines)
  lean     the ctypes call with every constant prepared (lens.tolist, out, meta only)
  lean2    the same with the meta array prebuilt too (out and the call only)
Checks the outputs are equal first. Medians of the per-variant times and of the per-round ratios to api.
Session 56: before the held launch lean / lean2 read 0.86-0.94 / 0.82-0.88 of api, after it 0.92-0.96 / 0.87-0.91.

    PYTHONPATH=src python bench/cpu/s56_decode_layers_probe.py 21
"""
import ctypes
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import flashtriton  # noqa: E402
from flashtriton import backends, kvcache  # noqa: E402
from flashtriton.cpu import decode  # noqa: E402
from s54_lean_call_bound import L, api, consts, es, kc, ks, lean, lens, lib, lsep, q, qs, sdpa, vc, work  # noqa: E402

params = kvcache._attn_params(q.shape[-1] ** -0.5, -1, -1, 0.0)
cpu = backends.get("cpu")
meta0 = (ctypes.c_int64 * 6)(0, 0, 0, L, 0, L)


def lean2():
    out = torch.empty_like(q, memory_format=torch.contiguous_format)
    lib.ft_decode(kc.data_ptr(), vc.data_ptr(), ks[0] * es, ks[1] * es, ks[2] * es, 0, None, 0, meta0, q.data_ptr(),
                  qs[0] * es, qs[1] * es, qs[2] * es, consts["scale"], 1, 8, 1, 4, 4, 128, 8, 1, work, out.data_ptr(),
                  1 * 32 * 128 * es, 32 * 128 * es, 128 * es, lsep, 2, 0)
    return out


def compiled():
    out = torch.empty_like(q, memory_format=torch.contiguous_format)
    decode.compiled_launch(q, kc, vc, params, None, out).run(q, kc, vc, lens, None, None, None, None, None, 0, out, None)
    return out


def fwd():
    return cpu.kvcache_fwd(q, kc, vc, None, None, None, None, lens, None, None, None, params, True, None, 0,
                           need_lse=False)[0]


if __name__ == "__main__":
    with flashtriton.use_backend("cpu"), kvcache.value_checks(False):
        fns = {"api": api, "fwd": fwd, "compiled": compiled, "lean": lean, "lean2": lean2}
        ref = api()
        for n_, f in fns.items():
            assert torch.equal(f(), ref), n_
        t = {n: [] for n in fns}
        names = list(fns)
        for r in range(int(sys.argv[1])):
            for n in names[r % len(names):] + names[:r % len(names)]:
                sdpa(); t0 = time.perf_counter(); fns[n](); t[n].append((time.perf_counter() - t0) * 1e6)
    for n in fns:
        print("%-9s med %5.0f min %5.0f us   per-round / api %.3f" % (n, statistics.median(t[n]), min(t[n]),
              statistics.median(b / a for a, b in zip(t["api"], t[n]))))
