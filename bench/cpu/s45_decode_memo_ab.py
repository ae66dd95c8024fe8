"""A/B of the CPU step memo (session 45): the bench's decode call (bench/cpu.py's ours(): flash_attn_with_kvcache
under use_backend("cpu") and value_checks(False)) through an old revision's kvcache.py and cpu/decode.py ("old",
loaded from git under other module names: their own memos) against the working tree's ("new"), in one process, on
the working tree's compiled kernel. Each round calls each in a rotated order, every call right after an SDPA call on
the same inputs (the bench's order). Prints min / median ms, GB/s (K + V bytes / time), the median of the per-round
ratios new / old, the share of the read bandwidth (bench/cpu.py's read_bandwidth, once per case) and whether
every call's output equals old's first one bitwise.

    PYTHONPATH=src python bench/cpu/s45_decode_memo_ab.py --rounds 15 [--lens 8192,32768] [--dtypes bf16,fp32]
        [--old-rev HEAD] [--flush sdpa|read|none]
"""
import argparse
import importlib.util
import os
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
from flashtriton.bench.cpu import read_bandwidth  # noqa: E402


def old_module(path, name, rev):
    """src/flashtriton/<path> at git revision rev, as the module <name> (a sibling of the tree's module)."""
    text = subprocess.run(["git", "-C", ab.ROOT, "show", f"{rev}:src/flashtriton/{path}"], check=True,
                          capture_output=True, text=True).stdout
    file = os.path.join(tempfile.mkdtemp(), name.rsplit(".", 1)[1] + ".py")
    with open(file, "w") as f:
        f.write(text)
    spec = importlib.util.spec_from_file_location(name, file)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def case(dtype, seqlen, impls, rounds, flush):
    q = torch.randn(1, 1, 32, 128, dtype=dtype)
    kc = torch.randn(1, seqlen, 8, 128, dtype=dtype)
    vc = torch.randn(1, seqlen, 8, 128, dtype=dtype)
    lens = torch.full((1,), seqlen, dtype=torch.int32)

    def call(name):
        kv, fwd = impls[name]
        fcpu.kvcache_fwd = fwd
        # each side's own value_checks switch (session 56: the old module's stayed on under the new one's
        # value_checks(False), so "old" ran the value checks: the ~5% that identical code read in favour of "new")
        with flashtriton.use_backend("cpu"), kv.value_checks(False):
            return kv.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=lens)
    junk = torch.rand(96 * 2 ** 20 // 4)
    pre = {"sdpa": lambda: F.scaled_dot_product_attention(q.transpose(1, 2), kc.transpose(1, 2), vc.transpose(1, 2),
                                                          enable_gqa=True),
           "read": lambda: junk.sum(), "none": lambda: None}[flush]
    names = list(impls)
    want = call("old")
    same = True
    times = {n: [] for n in names}
    for r in range(rounds):
        ab.wait_quiet()
        for n in names[r % len(names):] + names[:r % len(names)]:
            pre()
            t0 = time.perf_counter()
            out = call(n)
            times[n].append((time.perf_counter() - t0) * 1e3)
            same = same and torch.equal(out, want)
    fcpu.kvcache_fwd = impls["new"][1]
    bw = read_bandwidth()
    nb = 2 * seqlen * 8 * 128 * kc.element_size()
    print(f"{str(dtype).replace('torch.', '')} L={seqlen // 1024}k after {flush}, {rounds} rounds, read bandwidth "
          f"{bw:.1f} GB/s; every output == old's bitwise: {same}", flush=True)
    for n in names:
        mn, md, rr = ab.summary(times, n)
        print(f"  {n:4s} min {mn:7.3f} med {md:7.3f} ms  {nb / mn / 1e6:5.1f} / {nb / md / 1e6:5.1f} GB/s "
              f"({100 * nb / md / 1e6 / bw:3.0f}% of the read bandwidth at the median)  per-round ratio / old "
              f"{rr:.3f}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--lens", default="8192,32768")
    ap.add_argument("--dtypes", default="bf16,fp32")
    ap.add_argument("--flush", default="sdpa", choices=["sdpa", "read", "none"])
    ap.add_argument("--old-rev", default="HEAD")
    a = ap.parse_args()
    old_kv = old_module("kvcache.py", "flashtriton._kvcache_old", a.old_rev)
    old_dec = old_module("cpu/decode.py", "flashtriton.cpu._decode_old", a.old_rev)
    impls = {"old": (old_kv, old_dec.kvcache_fwd), "new": (kvcache, fcpu.kvcache_fwd)}
    dts = {"bf16": torch.bfloat16, "fp32": torch.float32}
    for dt in a.dtypes.split(","):
        for n in a.lens.split(","):
            case(dts[dt], int(n), impls, a.rounds, a.flush)


if __name__ == "__main__":
    main()
