"""The CPU benchmark (issue 6): flashtriton's CPU backend against torch's own CPU
attention (scaled_dot_product_attention) on the same inputs, in one run.

Cases and targets (bf16 / fp32 as listed):
  prefill forward, B=1, H=8, N=4096, D=128, non-causal   bf16 >= 2.0x SDPA, fp32 >= 1.0x
  causal, same shape                                     >= 1.8x faster than our non-causal
  forward + backward, B=1, H=8, N=2048, D=64             >= 1.0x SDPA's forward + backward
  decode, B=1, Hq=32, Hk=8, D=128, L in {8k, 32k}        >= 5x SDPA (enable_gqa) and
                                                         >= 50% of the read bandwidth
  small model, B=4, H=12, N=512, D=64, forward           >= 1.0x SDPA

"Validate, then time": every case first checks flashtriton's output against the
float64 reference (the last 128 query rows of the full problem for prefill, every
row for decode; gradients on a 512-token problem with the same code path), then
times the providers of the case interleaved (A, B, A, B, ...: a machine shared
with other jobs slows both alike) and reports the median of whole calls.

SDPA runs on the same tensors: (B, N, H, D) views transposed to (B, H, N, D), and for
decode the (B, L, Hk, D) cache transposed to (B, Hk, L, D) with enable_gqa=True.
Decode bandwidth = K and V bytes of the attended positions / time. The machine's read
bandwidth is measured in the same run twice: at the start (the best of a few sums over a
512 MiB tensor) and alongside each decode row (a sum over a 256 MiB tensor timed in the
row's own interleaved rounds, median). The decode's share is taken of the higher of the
two: session 54 found the VM's read bandwidth switching between ~36 and ~60 GB/s over
tens of seconds, and the start figure alone had always caught the lower mode since
session 42 (bench/NOTES.md, "Session 54").

    python -m flashtriton.bench.cpu            # about a minute on 2 cores
    python -m flashtriton.bench.cpu --quick    # small shapes, a smoke test of the harness
Results: bench/results/<cpu>/cpu.json and cpu.md. Decode runs the path config.DECODE_PATH
selects (FLASHTRITON_CPU_DECODE=compiled, the default: the C kernel of cpu/native.py,
built or loaded from its cache before timing; =ops: torch ops); the forward runs the
path config.FWD_PATH selects (FLASHTRITON_CPU_FORWARD=auto, the default: the C kernel of
cpu/native_prefill.py where it builds and applies, else torch ops), the backward the path
config.BWD_PATH selects (FLASHTRITON_CPU_BACKWARD=auto: the C kernel of cpu/native_backward.py
for float32 math, else torch ops). The table names the path of every row.
"""
from __future__ import annotations

import argparse
import math
import statistics
import time

import torch
import torch.nn.functional as F

import flashtriton
from flashtriton import kvcache, reference, reference_decode
from flashtriton.bench import common
from flashtriton.launchers.prefill import AttnParams

CHECK_ROWS = 128
MAX_REL_ERR = {torch.bfloat16: 2e-2, torch.float32: 1e-4}


def _sdpa(q, k, v, causal=False, gqa=False):
    return F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                          is_causal=causal, enable_gqa=gqa).transpose(1, 2)


def _ours(q, k, v, causal=False):
    with flashtriton.use_backend("cpu"):
        return flashtriton.flash_attn_func(q, k, v, causal=causal)


def read_bandwidth(mib: int = 512) -> float:
    """GB/s: the best of three full reads (sums) of a mib-MiB float32 tensor."""
    x = torch.rand(mib * 2 ** 20 // 4)
    x.sum()
    best = 0.0
    for _ in range(3):
        t0 = time.perf_counter()
        x.sum()
        best = max(best, x.numel() * 4 / (time.perf_counter() - t0) / 1e9)
    return best


def _check_prefill(q, k, v, out, causal):
    """Relative error of out's last CHECK_ROWS query rows against float64."""
    rows = min(CHECK_ROWS, q.shape[1])
    qs = q[:, -rows:].double()
    # the last rows of a square causal problem keep their bottom-right alignment
    ref = reference.attention(qs, k.double(), v.double(), softmax_scale=1 / math.sqrt(q.shape[-1]),
                              window_right=0 if causal else -1)[0]
    return common.max_rel_err(out[:, -rows:], ref)


def _check_grads(dtype, h, d, n=512):
    """Relative errors of dq, dk, dv against float64 on an n-token problem."""
    q, k, v = (torch.randn(1, n, h, d, dtype=dtype, requires_grad=True) for _ in range(3))
    out = _ours(q, k, v)
    dout = torch.randn_like(out)
    grads = torch.autograd.grad(out, (q, k, v), dout)
    args = [t.detach().double() for t in (q, k, v)]
    ref = reference.attention_grad(dout.double(), *args, softmax_scale=1 / math.sqrt(d))
    return max(common.max_rel_err(g, r) for g, r in zip(grads, ref))


def time_interleaved(fns: dict, budget_s: float = 1.5, min_runs: int = 5) -> dict:
    """Median milliseconds per call of each fn, calling them in turn (one warm-up
    call each) until every fn has min_runs samples and budget_s has passed, or
    4 * budget_s has passed."""
    for f in fns.values():
        f()
    times = {k: [] for k in fns}
    t_start = time.perf_counter()
    while True:
        for k, f in fns.items():
            t0 = time.perf_counter()
            f()
            times[k].append((time.perf_counter() - t0) * 1e3)
        elapsed = time.perf_counter() - t_start
        enough = min(len(v) for v in times.values()) >= min_runs
        if (enough and elapsed >= budget_s) or elapsed >= 4 * budget_s:
            return {k: statistics.median(v) for k, v in times.items()}


def _row(case, dtype, shape, ours_ms, torch_ms, err, target, met, **extra):
    r = dict(case=case, dtype=str(dtype).replace("torch.", ""), shape=shape, ours_us=round(ours_ms * 1e3, 1),
             torch_us=round(torch_ms * 1e3, 1) if torch_ms else None,
             ratio=round(torch_ms / ours_ms, 2) if torch_ms else None, rel_err=float(f"{err:.2e}"),
             target=target, met=met)
    r.update(extra)
    return r


def _checked(err, dtype, what):
    if not err <= MAX_REL_ERR[dtype]:
        raise AssertionError(f"{what}: relative error {err:.2e} > {MAX_REL_ERR[dtype]:.0e}; not timing a wrong result")


def bench_prefill(dtype, b, h, n, d):
    """Non-causal and causal forward; returns two rows."""
    q, k, v = (torch.randn(b, n, h, d, dtype=dtype) for _ in range(3))
    shape = f"B={b} H={h} N={n} D={d}"
    err = {}
    for causal in (False, True):
        err[causal] = _check_prefill(q, k, v, _ours(q, k, v, causal), causal)
        _checked(err[causal], dtype, f"prefill {shape} causal={causal}")
    ms = time_interleaved({(p, c): (lambda p=p, c=c: (_ours if p == "ours" else _sdpa)(q, k, v, c))
                           for p in ("ours", "sdpa") for c in (False, True)}, budget_s=3.0)
    goal = 2.0 if dtype == torch.bfloat16 else 1.0
    nc, c = ms[("ours", False)], ms[("ours", True)]
    path = _forward_path()
    return [_row("prefill fwd", dtype, shape, nc, ms[("sdpa", False)], err[False], f">= {goal}x SDPA",
                 ms[("sdpa", False)] / nc >= goal, path=path),
            _row("prefill fwd causal", dtype, shape, c, ms[("sdpa", True)], err[True], ">= 1.8x our non-causal",
                 nc / c >= 1.8, causal_speedup=round(nc / c, 2), path=path)]


def _forward_path():
    """The path the last CPU forward took: "compiled" (cpu/native_prefill.py) or "ops"."""
    from flashtriton.cpu import forward as cpu_forward
    return cpu_forward.LAST_PATH


def _backward_path():
    """The path the last CPU backward took: "compiled" (cpu/native_backward.py) or "ops"."""
    from flashtriton.cpu import backward as cpu_backward
    return cpu_backward.LAST_PATH


def bench_fwd_bwd(dtype, b, h, n, d):
    err = _check_grads(dtype, h, d)
    _checked(err, dtype, "forward+backward")
    q, k, v = (torch.randn(b, n, h, d, dtype=dtype, requires_grad=True) for _ in range(3))
    dout = torch.randn(b, n, h, d, dtype=dtype)

    def ours():
        out = _ours(q, k, v)
        torch.autograd.grad(out, (q, k, v), dout)

    def sdpa():
        out = _sdpa(q, k, v)
        torch.autograd.grad(out, (q, k, v), dout)

    ms = time_interleaved({"ours": ours, "sdpa": sdpa})
    a, t = ms["ours"], ms["sdpa"]
    return [_row("fwd+bwd", dtype, f"B={b} H={h} N={n} D={d}", a, t, err, ">= 1.0x SDPA", t / a >= 1.0,
                 path=f"{_forward_path()} forward, {_backward_path()} backward")]


_READ_BUF: list = []


def _read_alongside():
    """One sum over a 256 MiB float32 tensor (allocated and touched once per process): the read bandwidth timed
    in a decode row's own rounds."""
    if not _READ_BUF:
        x = torch.rand(256 * 2 ** 20 // 4)
        x.sum()
        _READ_BUF.append(x)
    return _READ_BUF[0].sum()


def bench_decode(dtype, seqlen, bandwidth, hq=32, hk=8, d=128):
    q = torch.randn(1, 1, hq, d, dtype=dtype)
    k_cache = torch.randn(1, seqlen, hk, d, dtype=dtype)
    v_cache = torch.randn(1, seqlen, hk, d, dtype=dtype)
    lens = torch.full((1,), seqlen, dtype=torch.int32)

    def ours():
        return flashtriton.flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=lens)

    ref = reference_decode.kvcache_fwd(q.double(), k_cache.double(), v_cache.double(), None, None, None, None,
                                       lens, None, None, None, AttnParams(1 / math.sqrt(d)), True, None, 0)[0]
    # The backend and the value checks (off) are set once around the check and the timing loop, as a decode loop
    # sets them, not entered in every timed call (session 46: two context managers ~40-60 us of cold Python a call).
    with flashtriton.use_backend("cpu"), kvcache.value_checks(False):
        err = common.max_rel_err(ours(), ref)
        _checked(err, dtype, f"decode L={seqlen}")
        from flashtriton.cpu import decode as cpu_decode
        path = cpu_decode.LAST_PATH     # "compiled" (cpu/native.py) or "ops" (torch ops)
        ms = time_interleaved({"ours": ours, "sdpa": lambda: _sdpa(q, k_cache, v_cache, gqa=True),
                               "read": _read_alongside})
    a, t = ms["ours"], ms["sdpa"]
    nbytes = 2 * seqlen * hk * d * k_cache.element_size()
    gbs = nbytes / (a / 1e3) / 1e9
    read_gbs = _READ_BUF[0].numel() * 4 / (ms["read"] / 1e3) / 1e9
    pct = 100 * gbs / max(bandwidth, read_gbs)
    return [_row("decode", dtype, f"B=1 Hq={hq} Hk={hk} D={d} L={seqlen // 1024}k", a, t, err,
                 ">= 5x SDPA, >= 50% BW", t / a >= 5 and pct >= 50, gbs=round(gbs, 1), bw_pct=round(pct, 1),
                 read_gbs=round(read_gbs, 1), path=path)]


def bench_small(dtype, b=4, h=12, n=512, d=64):
    q, k, v = (torch.randn(b, n, h, d, dtype=dtype) for _ in range(3))
    out = _ours(q, k, v)
    err = _check_prefill(q, k, v, out, False)
    _checked(err, dtype, "small model")
    ms = time_interleaved({"ours": lambda: _ours(q, k, v), "sdpa": lambda: _sdpa(q, k, v)})
    a, t = ms["ours"], ms["sdpa"]
    return [_row("small model fwd", dtype, f"B={b} H={h} N={n} D={d}", a, t, err, ">= 1.0x SDPA", t / a >= 1.0,
                 path=_forward_path())]


COLUMNS = ["case", "dtype", "shape", "ours_us", "torch_us", "ratio", "gbs", "read_gbs", "bw_pct", "rel_err", "target",
           "met", "path"]
HEADERS = ["case", "dtype", "shape", "ours (us)", "torch SDPA (us)", "SDPA / ours", "GB/s", "read GB/s alongside",
           "% read BW", "rel. err", "target", "met", "path"]


def markdown(rows, env) -> str:
    lines = [f"# CPU benchmark ({env['date']})", "",
             f"torch {env['torch']}, {env['device']}, {env['threads']} threads, float32 engine: {env['engine']}, "
             f"read bandwidth measured at the start of this run: {env['read_gbs']} GB/s (decode rows: % of the "
             f"higher of it and the read bandwidth timed alongside the row).", "",
             f"Decode path: {env['decode_path']} ({env['decode_build']}).", "",
             common.markdown_table([dict(r, met="yes" if r["met"] else "NO",
                                         ratio=(f"{r['ratio']:.2f}" if r.get("ratio") else None),
                                         ours_us=f"{r['ours_us']:.0f}",
                                         torch_us=(f"{r['torch_us']:.0f}" if r.get("torch_us") else None),
                                         rel_err=f"{r['rel_err']:.1e}")
                                    for r in rows], COLUMNS, HEADERS), ""]
    causal = [r for r in rows if "causal_speedup" in r]
    for r in causal:
        lines.append(f"- causal {r['dtype']}: {r['causal_speedup']}x faster than our non-causal (target 1.8x)")
    return "\n".join(lines) + "\n"


def plot(rows, path):
    """Speed-up over torch SDPA per case (bars), with each case's SDPA target as a tick;
    decode bars are labelled with their GB/s."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    labels = [f"{r['case']}\n{r['dtype'].replace('bfloat16', 'bf16').replace('float32', 'fp32')} {r['shape']}"
              for r in rows]
    fig, ax = plt.subplots(figsize=(max(8, 1.05 * len(rows)), 4.8))
    bars = ax.bar(range(len(rows)), [r["ratio"] for r in rows],
                  color=["tab:green" if r["met"] else "tab:red" for r in rows])
    for b, r in zip(bars, rows):
        if r.get("gbs"):
            ax.annotate(f"{r['gbs']:.0f} GB/s", (b.get_x() + b.get_width() / 2, b.get_height()),
                        ha="center", va="bottom", fontsize=7)
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels(labels, rotation=40, ha="right", fontsize=6.5)
    ax.set_ylabel("torch SDPA time / ours")
    ax.set_title("flashtriton CPU backend against torch SDPA (green: target met)", fontsize=10)
    ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def _decode_build(config, native) -> str:
    """Builds (or loads from the on-disk cache) the compiled decode kernel when it is
    the selected path, and says what that cost; the error, if any, is raised by the
    first decode call (no silent fallback)."""
    if config.DECODE_PATH != "compiled":
        return "torch ops, selected with FLASHTRITON_CPU_DECODE=ops"
    t0 = time.perf_counter()
    try:
        native.load()
    except native.NativeUnavailable as e:
        return f"kernel unavailable: {e}"
    # bf16 caches: the AMX build when config.DECODE_AMX selects it (built here, not in the timed calls)
    amx = "bf16 on AMX tiles (compiled-amx)"
    if config.DECODE_AMX == "off":
        amx = "bf16 on AVX-512: FLASHTRITON_CPU_DECODE_AMX=off"
    else:
        try:
            native.load_amx()
        except native.NativeUnavailable as e:
            amx = f"bf16 on AVX-512: AMX unavailable ({e})"
    s = time.perf_counter() - t0
    if native.COMPILE_SECONDS is not None:
        return f"C kernel compiled in this run: {s:.1f} s, cached in {native.cache_dir()}; {amx}"
    return f"C kernel loaded from the cache in {s * 1e3:.0f} ms; {amx}"


def main(out_dir=None, quick=False) -> list[dict]:
    """Runs the CPU suite, prints the table, writes bench/results/<cpu>/cpu.{json,md}."""
    from flashtriton.cpu import config, engine, native
    start = time.perf_counter()
    decode_build = _decode_build(config, native)
    bw = read_bandwidth(128 if quick else 512)
    if quick:
        plan = [(bench_prefill, (torch.bfloat16, 1, 2, 1024, 64)),
                (bench_fwd_bwd, (torch.float32, 1, 2, 512, 64)),
                (bench_decode, (torch.bfloat16, 4096, bw)),
                (bench_small, (torch.float32, 2, 4, 256, 64))]
    else:
        plan = [(bench_prefill, (torch.bfloat16, 1, 8, 4096, 128)),
                (bench_prefill, (torch.float32, 1, 8, 4096, 128)),
                (bench_fwd_bwd, (torch.bfloat16, 1, 8, 2048, 64)),
                (bench_fwd_bwd, (torch.float32, 1, 8, 2048, 64)),
                (bench_decode, (torch.bfloat16, 8192, bw)),
                (bench_decode, (torch.bfloat16, 32768, bw)),
                (bench_decode, (torch.float32, 8192, bw)),
                (bench_decode, (torch.float32, 32768, bw)),
                (bench_small, (torch.bfloat16,)),
                (bench_small, (torch.float32,))]
    bar = common.Progress(len(plan), "cpu bench")
    rows = []
    for fn, args in plan:
        rows += fn(*args)
        bar.step(f"{fn.__name__} {args[0]}")
    env = common.environment("cpu")
    env.update(engine=engine.NAME, read_gbs=round(bw, 1), seconds=round(time.perf_counter() - start, 1),
               decode_path=config.DECODE_PATH, decode_build=decode_build)
    md = markdown(rows, env)
    print(md)
    d = common.results_dir("cpu", out_dir)
    common.write_json(d / "cpu.json", env, rows)
    (d / "cpu.md").write_text(md)
    try:
        plot(rows, d / "cpu.png")
    except ImportError:  # matplotlib is a bench extra; the table is the result
        pass
    print(f"wrote {d / 'cpu.json'} and {d / 'cpu.md'} in {env['seconds']} s")
    return rows


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small shapes (a smoke test)")
    ap.add_argument("--out", default=None, help="results root (default bench/results)")
    a = ap.parse_args()
    main(out_dir=a.out, quick=a.quick)
