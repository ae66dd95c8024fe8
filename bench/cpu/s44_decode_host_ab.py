"""A/B of the CPU decode's host path (session 44): the bench's own decode call (bench/cpu.py's ours():
flashtriton.flash_attn_with_kvcache under use_backend("cpu")) with HEAD's cpu/decode.py ("old", loaded from
git under another module name) against the working tree's ("new"), both on the working tree's compiled kernel,
in one process: each round calls each in a rotated order, every call right after an SDPA call on the same
inputs (as the bench's time_interleaved leaves the caches). Prints min / median ms, GB/s (K + V bytes / time),
the median of the per-round ratios new / old, and checks old == new bitwise.

    PYTHONPATH=src python bench/cpu/s44_decode_host_ab.py --rounds 31 [--lens 8192,32768] [--dtypes bf16,fp32]
        [--flush sdpa|read] [--trace]
"""
import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import s42_decode_ab as ab  # noqa: E402
import flashtriton  # noqa: E402
import flashtriton.cpu as fcpu  # noqa: E402
from flashtriton import kvcache  # noqa: E402
from flashtriton.cpu import native  # noqa: E402


def head_module(name, rev="HEAD"):
    """cpu/<name>.py at git revision rev, as the module flashtriton.cpu._<name>_old."""
    text = subprocess.run(["git", "-C", ab.ROOT, "show", f"{rev}:src/flashtriton/cpu/{name}.py"], check=True,
                          capture_output=True, text=True).stdout
    path = os.path.join(tempfile.mkdtemp(), f"_{name}_old.py")
    with open(path, "w") as f:
        f.write(text)
    spec = importlib.util.spec_from_file_location(f"flashtriton.cpu._{name}_old", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def case(dtype, seqlen, impls, rounds, flush, tr):
    q = torch.randn(1, 1, 32, 128, dtype=dtype)
    kc = torch.randn(1, seqlen, 8, 128, dtype=dtype)
    vc = torch.randn(1, seqlen, 8, 128, dtype=dtype)
    lens = torch.full((1,), seqlen, dtype=torch.int32)

    def ours():
        with flashtriton.use_backend("cpu"), kvcache.value_checks(False):
            return flashtriton.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=lens)
    junk = torch.rand(96 * 2 ** 20 // 4)
    pre = {"sdpa": lambda: F.scaled_dot_product_attention(q.transpose(1, 2), kc.transpose(1, 2), vc.transpose(1, 2),
                                                          enable_gqa=True),
           "read": lambda: junk.sum(), "none": lambda: None}[flush]
    outs = {}
    for n, fn in impls.items():
        fcpu.kvcache_fwd = fn
        outs[n] = ours()
    same = all(torch.equal(outs[n], outs["old"]) for n in impls)
    names = list(impls)
    times = {n: [] for n in names}
    host = {n: [] for n in names}
    for r in range(rounds):
        ab.wait_quiet()
        for n in names[r % len(names):] + names[:r % len(names)]:
            fcpu.kvcache_fwd = impls[n]
            pre()
            t0 = time.perf_counter()
            ours()
            times[n].append((time.perf_counter() - t0) * 1e3)
            if tr:
                host[n].append(times[n][-1] - (tr[1][1] - tr[1][0]) / tr[0] * 1e3)
    fcpu.kvcache_fwd = impls["new"]
    nb = 2 * seqlen * 8 * 128 * kc.element_size()
    print(f"{str(dtype).replace('torch.', '')} L={seqlen // 1024}k after {flush}, {rounds} rounds; old == new bitwise: "
          f"{same}", flush=True)
    for n in names:
        mn, md, rr = ab.summary(times, n)
        print(f"  {n:4s} min {mn:7.3f} med {md:7.3f} ms  {nb / mn / 1e6:5.1f} / {nb / md / 1e6:5.1f} GB/s  "
              f"per-round ratio / old {rr:.3f}" + (f"; host (call - kernel) min {min(host[n]) * 1e3:5.0f} med "
                                                   f"{statistics.median(host[n]) * 1e3:5.0f} us" if tr else ""),
              flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=31)
    ap.add_argument("--lens", default="8192,32768")
    ap.add_argument("--dtypes", default="bf16,fp32")
    ap.add_argument("--flush", default="sdpa", choices=["sdpa", "read", "none"])
    ap.add_argument("--old-rev", default="HEAD")
    ap.add_argument("--trace", action="store_true", help="both on the FT_TRACE build: also the host time per call")
    a = ap.parse_args()
    tr = None
    if a.trace:     # (TSC ticks a second, the kernel's entry / return stamps)
        import ctypes
        lib = native.load_variant("FT_TRACE")
        native._library.lib = lib
        lib.ft_rdtsc.restype = ctypes.c_uint64
        e0, t0 = lib.ft_rdtsc(), time.perf_counter()
        time.sleep(0.2)
        tr = ((lib.ft_rdtsc() - e0) / (time.perf_counter() - t0), (ctypes.c_uint64 * 512).in_dll(lib, "ft_trace"))
    impls = {"old": head_module("decode", a.old_rev).kvcache_fwd, "new": fcpu.kvcache_fwd}
    dts = {"bf16": torch.bfloat16, "fp32": torch.float32}
    for dt in a.dtypes.split(","):
        for n in a.lens.split(","):
            case(dts[dt], int(n), impls, a.rounds, a.flush, tr)


if __name__ == "__main__":
    main()
