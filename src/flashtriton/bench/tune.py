"""Tile sweep for the prefill kernels on the GPU: finds the tuned defaults of
kernels/configs.py and measures what autotuning costs a user.

Phase 1 compiles every candidate in parallel worker processes (Triton's on-disk
cache then holds them); phase 2 times them one by one in this process, so the
timings never share the GPU. For each (kernel, head dim, causal) it reports every
tile's time and the best, at B x N = 16k tokens, hidden 2048.

    python -m flashtriton.bench.tune --head-dims 64 128 --seqlen 4096
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import multiprocessing as mp
import os
import subprocess
import sys
import time

import torch

TOKENS, HIDDEN = 16384, 2048


def _shape(d, n):
    return TOKENS // n, n, HIDDEN // d, d


def _run_once(kernel, d, causal, tile, n, timed):
    """Run fwd (+ bwd) with `tile` as the default of `kernel`; time it when asked.
    causal: False, True, or "w<L>" for a sliding window (L, 0)."""
    from flashtriton.kernels import configs
    from flashtriton.launchers import plans
    table = configs.DEFAULTS.setdefault(_table(kernel, n, causal, d), {})
    saved = table.get(d)
    table[d] = configs.Tile(*tile)
    # Launch plans key on the call, not on configs.DEFAULTS: without this every candidate
    # after the first replayed the first one's launches (bug from session 10 to 19: the
    # sweep of 2026-11-30 at N = 1k timed 18 dK/dV tiles within 1%).
    plans.clear()
    try:
        return _run_with_defaults(kernel, d, causal, n, timed)
    finally:
        plans.clear()
        if saved is None:
            del table[d]
        else:
            table[d] = saved


def _table(kernel, n, causal, d):
    """The defaults table a launch at sequence length n consults (configs.default_table);
    a window sweep writes the "_window" table (created if absent). Before 2026-11-30 this
    ignored the masked tables, so a causal sweep at D = 64 timed dkdv_masked's tile for
    every dK/dV candidate."""
    from flashtriton.kernels import configs
    if isinstance(causal, str):
        return kernel + "_window"
    return configs.default_table(kernel, d, n, masked=bool(causal))


def _run_with_defaults(kernel, d, causal, n, timed):
    import flashtriton
    from flashtriton.bench import common
    b, n, h, d = _shape(d, n)
    q, k, v = (torch.randn(b, n, h, d, dtype=torch.bfloat16, device="cuda", requires_grad=True) for _ in range(3))
    dout = torch.randn_like(q)
    if isinstance(causal, str):
        kw = dict(window_size=(int(causal[1:]), 0))
    else:
        kw = dict(causal=causal)
    out = flashtriton.flash_attn_func(q, k, v, **kw)
    torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)
    if not timed:
        return None
    if kernel == "fwd":
        f = lambda: flashtriton.flash_attn_func(q, k, v, **kw)  # noqa: E731
        mode = "fwd"
    else:
        f = lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)  # noqa: E731
        mode = "bwd"
    ms = common.time_ms(f, "cuda")
    if isinstance(causal, str):  # FLOPs inside the band only
        left = int(causal[1:])
        pairs = sum(min(i, left) + 1 for i in range(n))
        flops = 4.0 * b * h * pairs * d * {"fwd": 1.0, "bwd": 2.5}[mode]
    else:
        flops = common.attention_flops(b, h, n, n, d, causal, mode)
    return ms, flops / ms / 1e9


def _compile_job(args):
    try:
        _run_once(*args, timed=False)
        return None
    except Exception as exc:  # reported, and the tile is skipped in phase 2
        return f"{type(exc).__name__}: {str(exc).splitlines()[0][:100]}"


def first_call_tuning_seconds(d: int, n: int, autotune: bool = True) -> float:
    """Seconds a user's first fwd+bwd call spends with FLASHTRITON_AUTOTUNE=1 at a new
    shape bucket, in a fresh process with an empty Triton cache (compiles included).
    autotune=False: the same cold call with the fixed defaults (compiles only)."""
    code = (
        "import time, torch, flashtriton\n"
        f"b, n, h, d = {TOKENS // n}, {n}, {HIDDEN // d}, {d}\n"
        "q, k, v = (torch.randn(b, n, h, d, dtype=torch.bfloat16, device='cuda', requires_grad=True) for _ in range(3))\n"
        "torch.cuda.synchronize(); t = time.perf_counter()\n"
        "out = flashtriton.flash_attn_func(q, k, v, causal=True); out.backward(torch.randn_like(out))\n"
        "torch.cuda.synchronize(); print(time.perf_counter() - t)\n")
    env = dict(os.environ, FLASHTRITON_AUTOTUNE="1" if autotune else "0", TRITON_CACHE_DIR=f"/tmp/ft-cold-cache-{time.time_ns()}")
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    if res.returncode != 0:
        raise RuntimeError(res.stderr[-2000:])
    return float(res.stdout.strip().splitlines()[-1])


def breakdown(head_dims, n):
    """CUDA time of each kernel in one forward+backward, from torch.profiler."""
    import flashtriton
    from torch.profiler import ProfilerActivity, profile
    for d in head_dims:
        for causal in (False, True):
            b, n_, h, d_ = _shape(d, n)
            q, k, v = (torch.randn(b, n_, h, d_, dtype=torch.bfloat16, device="cuda", requires_grad=True)
                       for _ in range(3))
            dout = torch.randn_like(q)
            for _ in range(2):  # compile, warm up
                torch.autograd.grad(flashtriton.flash_attn_func(q, k, v, causal=causal), (q, k, v), dout)
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(5):
                    torch.autograd.grad(flashtriton.flash_attn_func(q, k, v, causal=causal), (q, k, v), dout)
                torch.cuda.synchronize()
            fwd_flops = 4.0 * b * h * n_ * n_ * d_ / (2 if causal else 1)
            print(f"D={d} causal={causal} N={n_}:")
            for e in sorted(prof.key_averages(), key=lambda e: -e.device_time_total)[:6]:
                us = e.device_time_total / 5
                work = {"attn_fwd_kernel": 1.0, "attn_bwd_dkdv_kernel": 2.0, "attn_bwd_dq_kernel": 1.5}.get(e.key)
                rate = f"{work * fwd_flops / us / 1e6:.0f} TFLOP/s of matmul work" if work else ""
                print(f"   {e.key[:40]:<40} {us:9.1f} us  {rate}")


def main(argv=None):
    from flashtriton.kernels import configs
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--head-dims", type=int, nargs="+", default=[64, 128])
    ap.add_argument("--kernels", nargs="+", default=["fwd", "dkdv", "dq"])
    ap.add_argument("--seqlen", type=int, default=4096)
    ap.add_argument("--workers", type=int, default=12)
    ap.add_argument("--out", default=None)
    ap.add_argument("--first-call", action="store_true", help="also time a cold first call with autotuning")
    ap.add_argument("--breakdown", action="store_true", help="only profile the kernels of one fwd+bwd per shape")
    ap.add_argument("--window", type=int, default=None,
                    help="sweep sliding window (WINDOW, 0) instead of causal / not: the *_window tables")
    args = ap.parse_args(argv)
    # The compile workers hold CUDA contexts: the sharing guard (launchers/sharing.py)
    # would take the warp-specialized kernels away from the workers and, while NVML still
    # lists them, from the timing phase, which runs alone by design.
    os.environ.setdefault("FLASHTRITON_GPU_SHARED", "0")
    if args.breakdown:
        return breakdown(args.head_dims, args.seqlen)
    masks = (f"w{args.window}",) if args.window is not None else (False, True)
    jobs = [(kern, d, causal, (t.block_m, t.block_n, t.num_warps, t.num_stages), args.seqlen)
            for d in args.head_dims for causal in masks for kern in args.kernels
            for t in configs.sweep_candidates(kern, d, 2)]
    t0 = time.perf_counter()
    with cf.ProcessPoolExecutor(args.workers, mp_context=mp.get_context("spawn")) as pool:
        failures = dict(zip(jobs, pool.map(_compile_job, jobs)))
    print(f"compiled {len(jobs)} tile variants in {time.perf_counter() - t0:.0f}s", flush=True)
    rows = []
    for job in jobs:
        kern, d, causal, tile, n = job
        row = dict(kernel=kern, head_dim=d, causal=causal, tile=tile, seqlen=n)
        if failures[job]:
            row["error"] = failures[job]
        else:
            row["ms"], row["tflops"] = _run_once(*job, timed=True)
        rows.append(row)
    best = {}
    for r in rows:
        key = (r["kernel"], r["head_dim"], r["causal"])
        if "ms" in r and (key not in best or r["ms"] < best[key]["ms"]):
            best[key] = r
    print(f"seqlen {args.seqlen}")
    print("| kernel | D | causal | best tile (BM, BN, warps, stages) | TFLOP/s | default's TFLOP/s |")
    print("|---|---|---|---|---|---|")
    for (kern, d, causal), r in sorted(best.items()):
        dflt = configs.default_tile(kern, d, args.seqlen, window_band=args.window, masked=bool(causal))
        dflt_t = (dflt.block_m, dflt.block_n, dflt.num_warps, dflt.num_stages)
        dr = next((x for x in rows if (x["kernel"], x["head_dim"], x["causal"], x["tile"]) == (kern, d, causal, dflt_t)
                   and "tflops" in x), None)
        print(f"| {kern} | {d} | {causal} | {r['tile']} | {r['tflops']:.0f} | {dr['tflops'] if dr else float('nan'):.0f} |")
    result = dict(rows=rows, best={f"{k[0]}-{k[1]}-{k[2]}": v["tile"] for k, v in best.items()})
    # One tile per (kernel, D) for the defaults table: the least total time over causal and not.
    tiles = {}
    for kern in args.kernels:
        for d in args.head_dims:
            totals = {}
            for r in rows:
                if r["kernel"] == kern and r["head_dim"] == d and "ms" in r:
                    totals.setdefault(r["tile"], []).append(r["ms"])
            full = {t: sum(v) for t, v in totals.items() if len(v) == len(masks)}
            if full:
                tiles.setdefault(_table(kern, args.seqlen, masks[0], d), {})[str(d)] = min(full, key=full.get)
    result["tiles"] = tiles
    print("tiles:", json.dumps(tiles))
    if args.first_call:
        result["first_call_seconds"] = {d: first_call_tuning_seconds(d, args.seqlen) for d in args.head_dims}
        print("first call with autotuning (cold cache), seconds:", result["first_call_seconds"])
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "tune.json"), "w") as f:
            json.dump(result, f, indent=1)
        with open(os.path.join(args.out, "tiles.json"), "w") as f:
            json.dump(tiles, f)
    for r in rows:
        if "error" in r:
            print("failed:", r["kernel"], r["head_dim"], r["causal"], r["tile"], r["error"])
    return result


if __name__ == "__main__":
    main()
