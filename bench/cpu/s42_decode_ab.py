"""A/B (session 42): the compiled decode kernel of cpu/native.py, the working tree's build (new) against
a baseline build of another version of the C source (old: HEAD's src/flashtriton/cpu/native.py unless
--old-source names a file), in one process, with torch SDPA (enable_gqa) and a torch sum over the same
K / V bytes (the bandwidth reference), at the bench's decode shape: B=1, Hq=32, Hk=8, D=128, bf16 and
fp32, L in {8k, 32k}, torch's threads (2 here).

    PYTHONPATH=src python bench/cpu/s42_decode_ab.py [--rounds 7] [--lens 8192,32768] [--dtypes bf16,fp32]
        [--old-source FILE] [--old-defines FT_NO_PF,...] [--new-defines ...] [--threads N] [--no-wait]

Each round calls every function of a case once, in a rotated order (SDPA, sum, old, new, ...), so every
call runs right after a different one (caches as the bench leaves them: its decode runs right after
SDPA); per function: min and median ms over the rounds, GB/s = K + V bytes / time, and the decode's
GB/s as % of the sum's. Before each round it waits (up to 20 s) for the machine to be idle (other
users' jobs on the 2 vCPUs turned 2-thread calls into 10-20 ms scheduler quanta). Both builds run
ft_decode (kernel_call: the kernel's own entry point, any build); outputs are checked against
float64 (flashtriton.reference_decode) and old against new bitwise (the session-42 changes keep the
arithmetic order).
"""
import argparse
import ctypes
import math
import os
import statistics
import subprocess
import time

import torch
import torch.nn.functional as F

from flashtriton import reference_decode
from flashtriton.bench import common
from flashtriton.cpu import config, decode, native
from flashtriton.cpu.forward import q_scale
from flashtriton.launchers.prefill import AttnParams

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def old_source(path):
    """C_SOURCE of a version of native.py: the file at path, else HEAD's (git show)."""
    if path:
        text = open(path).read()
    else:
        text = subprocess.run(["git", "-C", ROOT, "show", "HEAD:src/flashtriton/cpu/native.py"], check=True,
                              capture_output=True, text=True).stdout
    ns = {"__name__": "s42_old_native"}
    exec(compile(text, "old_native.py", "exec"), ns)
    return ns["C_SOURCE"]


def _busy_fraction(dt=0.1):
    """Fraction of all CPUs' time busy over dt seconds (/proc/stat), while this process sleeps."""
    def snap():
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        return sum(v), v[3] + v[4]          # total, idle + iowait
    t0, i0 = snap()
    time.sleep(dt)
    t1, i1 = snap()
    return 1 - (i1 - i0) / max(t1 - t0, 1)


def wait_quiet(limit_s=20.0, busy=0.15):
    """Waits (up to limit_s) until the machine is idle apart from this process: other users' jobs on the
    2 vCPUs turn each 2-thread call into scheduler quanta (10-20 ms); returns the seconds waited."""
    t0 = time.perf_counter()
    while _busy_fraction() > busy and time.perf_counter() - t0 < limit_s:
        pass
    return time.perf_counter() - t0


def summary(times, name, base="old"):
    """(min, median, median of the per-round ratios name / base) of the ms lists times[name] (the A/B tools'
    summary line: rounds rotate the order, so the per-round ratio cancels a round's drift)."""
    t = times[name]
    return min(t), statistics.median(t), statistics.median(b / a for a, b in zip(times[base], t))


def build(source, defines, stem):
    return native._open(native._build(tuple(defines), source=source, stem=stem))


def decode_inputs(dtype, seqlen, hq=32, hk=8, d=128):
    """(q, k, v, params) of one decode step over a seqlen-position cache (seeded by seqlen)."""
    torch.manual_seed(seqlen)
    q = torch.randn(1, 1, hq, d, dtype=dtype)
    k = torch.randn(1, seqlen, hk, d, dtype=dtype)
    v = torch.randn(1, seqlen, hk, d, dtype=dtype)
    return q, k, v, AttnParams(1 / math.sqrt(d))


def kernel_call(lib, q, k, v, params, out, lse, splits=0):
    """One ft_decode call of `lib` (any build: its entry point predates session 56's ft_decode_lens) over the
    whole cache, B = 1, no window; splits 0: cpu/config's default rule (decode.py's)."""
    n, hk, d = k.shape[1], k.shape[2], k.shape[3]
    sq, group = q.shape[1], q.shape[2] // hk
    padded = -(-sq * group // 4) * 4
    threads = torch.get_num_threads()
    if splits <= 0:
        splits = max(1, min(config.DECODE_ITEMS_PER_THREAD * threads, n // config.DECODE_MIN_PIECE))
    meta = (ctypes.c_int64 * (4 + 2 * sq))(0, 0, 0, n, *([0] * sq), *([n] * sq))
    es = k.element_size()
    ks, qs, os_ = k.stride(), q.stride(), out.stride()
    work = decode._scratch_ptr("work", splits * hk * padded * (d + 16))
    bf16 = k.dtype == torch.bfloat16
    rc = lib.ft_decode(k.data_ptr(), v.data_ptr(), ks[0] * es, ks[1] * es, ks[2] * es, 0, None, 0, meta, q.data_ptr(),
                       qs[0] * es, qs[1] * es, qs[2] * es, q_scale(params), 1, hk, sq, group, padded, d, splits,
                       int(bf16), work, out.data_ptr(), os_[0] * es, os_[1] * es, os_[2] * es, lse.data_ptr(), threads,
                       int(bool(lib.amx) and bf16))
    assert rc == 0, rc


def compiled_call(lib, q, k, v, params, record):
    """A call of the compiled decode `lib` into its own out / lse; record(out, lse) after each call."""
    out = torch.empty_like(q)
    lse = torch.empty(1, q.shape[2], 1)

    def f():
        kernel_call(lib, q, k, v, params, out, lse)
        record(out, lse)
    return f


def case(dtype, seqlen, libs, rounds, quiet, hq=32, hk=8, d=128):
    q, k, v, params = decode_inputs(dtype, seqlen, hq, hk, d)
    outs = {}

    def ours(lib, name):
        return compiled_call(lib, q, k, v, params, lambda out, lse: outs.__setitem__(name, out))

    fns = {"sdpa": lambda: F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                                          enable_gqa=True),
           # the same bytes read as float32 (bf16 pairs: the high half is a normal bf16, so no
           # denormal or NaN floats; a bf16 sum with a float32 result ran ~50x slower here)
           "sum": lambda: (k.view(torch.float32).sum(), v.view(torch.float32).sum())}
    for name, lib in libs.items():
        fns[name] = ours(lib, name)
    for f in fns.values():
        f()
    lens = torch.full((1,), seqlen, dtype=torch.int32)
    ref = reference_decode.kvcache_fwd(q.double(), k.double(), v.double(), None, None, None, None, lens, None,
                                       None, None, params, True, None, 0)[0]
    errs = {n: common.max_rel_err(outs[n], ref) for n in libs}
    same = all(torch.equal(outs[n], outs["old"]) for n in libs) if "old" in libs else None
    times = {n: [] for n in fns}
    names = list(fns)
    waited = 0.0
    for r in range(rounds):
        waited += wait_quiet() if quiet else 0.0
        order = names[r % len(names):] + names[:r % len(names)]
        for n in order:
            t0 = time.perf_counter()
            fns[n]()
            times[n].append((time.perf_counter() - t0) * 1e3)
    nbytes = 2 * seqlen * hk * d * k.element_size()
    tag = f"{str(dtype).replace('torch.', '')} L={seqlen // 1024}k"
    sum_min = min(times["sum"])
    print(f"{tag}: K+V {nbytes / 1e6:.1f} MB; rel err vs float64 "
          + ", ".join(f"{n} {e:.2e}" for n, e in errs.items())
          + (f"; old == new bitwise: {same}" if same is not None else "")
          + (f"; waited {waited:.1f} s for an idle machine" if quiet else ""))
    for n in names:
        t = times[n]
        mn, md = min(t), statistics.median(t)
        line = f"  {n:5s} min {mn:8.3f}  median {md:8.3f} ms"
        if n not in ("sdpa",):
            line += f"  {nbytes / mn / 1e6:6.1f} / {nbytes / md / 1e6:6.1f} GB/s"
        if n in libs:
            line += (f"  {100 * sum_min / mn:5.1f}% of the sum's best GB/s; SDPA / this "
                     f"{min(times['sdpa']) / mn:5.1f}x (min) {statistics.median(times['sdpa']) / md:5.1f}x (median)")
        print(line)
    if "old" in libs and "new" in libs:
        print(f"  new / old time: min {min(times['new']) / min(times['old']):.3f}, "
              f"median {statistics.median(times['new']) / statistics.median(times['old']):.3f}; "
              f"per-round ratio median {statistics.median(b / a for a, b in zip(times['old'], times['new'])):.3f}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--lens", default="8192,32768")
    ap.add_argument("--dtypes", default="bf16,fp32")
    ap.add_argument("--old-source", default=None)
    ap.add_argument("--old-defines", default="")
    ap.add_argument("--new-defines", default="")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--no-wait", action="store_true", help="do not wait for an idle machine before each round")
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    split = lambda s: [x for x in s.split(",") if x]
    libs = {"old": build(old_source(a.old_source), split(a.old_defines), "decode_s42old"),
            "new": native.load_variant(*split(a.new_defines)) if a.new_defines else native.load()}
    print(f"threads {torch.get_num_threads()}, rounds {a.rounds}, dpbf16 {libs['new'].ft_dpbf16()}")
    dts = {"bf16": torch.bfloat16, "fp32": torch.float32}
    for dt in split(a.dtypes):
        for n in split(a.lens):
            case(dts[dt], int(n), libs, a.rounds, not a.no_wait)


if __name__ == "__main__":
    main()
