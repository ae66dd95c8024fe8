"""Shared benchmark plumbing: timing, FLOP and byte counts, environment, result files."""
from __future__ import annotations

import datetime
import json
import os
import platform
import re
import statistics
import sys
import time
from pathlib import Path

import torch


def attention_flops(batch, nheads, seqlen_q, seqlen_k, head_dim, causal, mode="fwd"):
    """FlashAttention-2 paper's count: 4 * B * H * Nq * Nk * D for the forward pass
    (two matmuls), halved when causal; backward = 2.5x forward, fwd+bwd = 3.5x."""
    f = 4.0 * batch * nheads * seqlen_q * seqlen_k * head_dim
    if causal:
        f /= 2
    return f * {"fwd": 1.0, "bwd": 2.5, "fwd_bwd": 3.5}[mode]


def time_ms(fn, device: str, warmup_ms: float = 25, rep_ms: float = 100, flush: str = "zero") -> float:
    """Median milliseconds per call. CUDA: CUDA events around each call, L2 flushed before
    it. flush="zero" is triton.testing.do_bench (it zeroes a 256 MB buffer, which leaves
    L2 full of dirty lines: the timed call then also pays for writing up to L2's 50 MB
    back to memory, ~11 us at 4.5 TB/s on the H200); flush="read" reads a 256 MB buffer
    instead, leaving L2 cold but clean, as a model's weight reads between two attention
    calls would (bench/NOTES.md, Session 5). CPU: wall clock around whole calls."""
    if device == "cuda":
        if flush == "zero":
            from triton.testing import do_bench
            return do_bench(fn, warmup=warmup_ms, rep=rep_ms, return_mode="median")
        if flush != "read":
            raise ValueError(f"flush: must be 'zero' or 'read', got {flush!r}")
        return _time_read_flush(fn, warmup_ms, rep_ms)
    fn()  # warm-up (allocations, first-call work)
    times = []
    deadline = time.perf_counter() + max(rep_ms, 1) / 1000
    while len(times) < 3 or (time.perf_counter() < deadline and len(times) < 50):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


_flush_buffer = None


def _time_read_flush(fn, warmup_ms, rep_ms):
    global _flush_buffer
    if _flush_buffer is None:
        _flush_buffer = torch.ones(64 * 2**20, dtype=torch.float32, device="cuda")   # 256 MB
    flush = lambda: _flush_buffer.sum()  # noqa: E731  (reads only; writes one scalar)
    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(5):
        flush()
        fn()
    end.record()
    torch.cuda.synchronize()
    per_call = max(start.elapsed_time(end) / 5, 1e-3)
    for _ in range(max(1, int(warmup_ms / per_call))):
        fn()
    n = max(5, min(1000, int(rep_ms / per_call)))
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    for i in range(n):
        flush()
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    return statistics.median(a.elapsed_time(b) for a, b in zip(starts, ends))


def capture_graph(fn):
    """fn captured in a CUDA graph after two warm-up calls on a side stream (compiles and
    allocator pools outside the capture); returns (graph, fn's outputs in the capture),
    replayed once. A backward must be captured with its forward: autograd runs it on
    the forward's stream, and the legacy stream is forbidden while capturing."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
        fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        outs = fn()
    graph.replay()
    torch.cuda.synchronize()
    return graph, outs


def graph_time_ms(fn) -> float:
    """Median ms of one CUDA-graph replay of fn (forward only, no autograd): the GPU
    time without the host's launch overhead, as a serving loop or torch.compile's
    reduce-overhead mode would see it."""
    with torch.no_grad():
        graph, _ = capture_graph(fn)
    return time_ms(graph.replay, "cuda")


def host_us(fn, calls: int = 100, reps: int = 1) -> float:
    """Host time per call of fn in microseconds, the GPU held busy (torch.cuda._sleep) so
    that no call waits on it: wall time / calls, the least of `reps` loops. What an eager
    call costs the CPU, apart from its kernels (bench/gpu/s13_host.py, s14_*.py)."""
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(reps):
        torch.cuda._sleep(400_000_000)          # a few hundred ms of GPU spin
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - t0) / calls * 1e6)
        torch.cuda.synchronize()
    return best


def graph_backward_ms(call, inputs, dout) -> float:
    """Median ms of a backward pass as CUDA-graph replays: forward+backward of call()
    (an attention call on `inputs`, which require grad) minus its forward alone, each
    captured in its own graph (the backward with its forward: see capture_graph)."""
    from triton.testing import do_bench

    def both():
        return torch.autograd.grad(call(), inputs, dout)

    def fwd():
        with torch.no_grad():
            return call()

    (g_both, _), (g_fwd, _) = capture_graph(both), capture_graph(fwd)
    return (do_bench(g_both.replay, warmup=30, rep=200, return_mode="median")
            - do_bench(g_fwd.replay, warmup=30, rep=200, return_mode="median"))


def kernel_times_us(fn, top: int = 6) -> list:
    """[(kernel name, GPU us)] of one call of fn under torch's profiler, longest first (the
    per-kernel breakdown the A/B scripts print; fn is run once before, outside the profile)."""
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as p:
        fn()
        torch.cuda.synchronize()
    ev = [(e.key, e.device_time_total) for e in p.key_averages() if e.device_time_total > 0]
    return sorted(ev, key=lambda x: -x[1])[:top]


def time_passes(call, inputs, dout, device: str, modes=("fwd", "bwd", "fwd_bwd")) -> dict:
    """{mode: time_ms} of an attention call: "fwd" call(); "bwd" the gradients of inputs through one
    retained forward's output; "fwd_bwd" a forward and its gradients a step."""
    times = {}
    for mode in modes:
        if mode == "fwd":
            f = call
        elif mode == "bwd":
            out = call()
            f = lambda: torch.autograd.grad(out, inputs, dout, retain_graph=True)  # noqa: E731
        else:
            f = lambda: torch.autograd.grad(call(), inputs, dout)  # noqa: E731
        times[mode] = time_ms(f, device)
    return times


def rotated(names: list, r: int) -> list:
    """The timing order in round r: names rotated left by r, so that over len(names) rounds every
    name is timed first once."""
    r %= max(len(names), 1)
    return names[r:] + names[:r]


def median_of_rounds(units: dict, rounds: int) -> tuple:
    """Rotated timing rounds: units {name: fn() -> {mode: ms}}, each called once a round, the order
    rotated every round (rotated). Returns (medians {name: {mode: ms}}, readings {name: {mode: [ms of
    each round]}}, errors {name: "Type: first line"}); a unit that raises is recorded in errors and
    not called again, and has no medians. Why rounds: bench/NOTES.md "Session 48" (every provider's
    first round after an idle reads fastest on the H200)."""
    readings: dict = {name: {} for name in units}
    errors: dict = {}
    names = list(units)
    for r in range(rounds):
        for name in rotated(names, r):
            if name in errors:
                continue
            try:
                for mode, ms in units[name]().items():
                    readings[name].setdefault(mode, []).append(ms)
            except Exception as exc:  # noqa: BLE001  (recorded, not fatal: the other units still run)
                errors[name] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:120]}"
    medians = {name: {m: statistics.median(v) for m, v in rd.items()} for name, rd in readings.items()
               if name not in errors}
    return medians, readings, errors


def short_error(exc) -> str:
    """One line for an A/B script's log: the exception's type and its message's last line."""
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[-1][:300] if lines else ''}"


def head0_grad_refs(q, k, v, dout, **kw) -> tuple:
    """(float64, same-dtype) reference gradients (dq, dk, dv) of batch 0, head 0 of these
    (B, N, H, D) tensors (kw: the reference's softmax_scale / window_left / window_right):
    what the A/B scripts check each variant against before timing it."""
    from flashtriton import reference
    args = [t[:1, :, :1] for t in (q, k, v)]
    d0 = dout[:1, :, :1]
    return (reference.attention_grad(d0.double(), *(t.double() for t in args), **kw),
            reference.attention_grad(d0, *args, **kw))


def head0_grad_check(grads, refs, factor: float = 3.0) -> tuple:
    """(ok, text): batch 0, head 0 of grads (dq, dk, dv) against head0_grad_refs' float64
    gradients, each within factor x the same-dtype reference's error (+1e-4), and every
    element of grads finite."""
    truth, lowp = refs
    ok, res = True, []
    for i, name in enumerate(("dq", "dk", "dv")):
        err = (grads[i][:1, :, :1].double() - truth[i]).abs().max().item()
        base = (lowp[i].double() - truth[i]).abs().max().item()
        good = err <= factor * base + 1e-4 and bool(torch.isfinite(grads[i]).all().item())
        ok = ok and good
        res.append(f"{name} {err:.1e} (torch {base:.1e}){'' if good else ' WRONG'}")
    return ok, "f64 err " + ", ".join(res)

def graph_or_eager_ms(fn) -> tuple:
    """(ms, mark): graph_time_ms(fn), or where the capture fails time_ms(fn) eagerly with
    mark "*" (the A/B scripts' timing; the failure printed)."""
    try:
        return graph_time_ms(fn), ""
    except Exception as exc:  # noqa: BLE001  (reported, then timed eagerly)
        print(f"  (graph capture failed: {short_error(exc)}; eager)", flush=True)
        torch.cuda.synchronize()
        return time_ms(fn, "cuda"), "*"


def timing_rounds(calls: dict, flops: dict, label: str, timer=graph_or_eager_ms) -> dict:
    """The A/B scripts' two timing rounds, the second in reverse order (drift between variants
    shows as disagreement between the rounds): calls {name: fn}, flops {name: FLOPs a call};
    prints "<label> round r <name>: <ms> ms <TFLOP/s>" per timing and returns {name: [TFLOP/s
    of each round]} (a call that raises is printed and skipped). timer(fn) -> (ms, mark)."""
    tf = {name: [] for name in calls}
    names = list(calls)
    for rnd, order in enumerate((names, names[::-1])):
        for name in order:
            try:
                ms, mark = timer(calls[name])
            except Exception as exc:  # noqa: BLE001  (reported; the other variants still run)
                print(f"{label} round {rnd + 1} {name}: {short_error(exc)}", flush=True)
                continue
            tf[name].append(flops[name] / ms / 1e9)
            print(f"{label} round {rnd + 1} {name}: {ms:.3f} ms{mark} {tf[name][-1]:.0f} TFLOP/s", flush=True)
    return {name: t for name, t in tf.items() if t}


def ratio_cells(tf: dict, base: str) -> str:
    """The A/B scripts' table cells from timing_rounds' {name: [TFLOP/s a round]}: "name r1 / r2
    (lo-hi x)", each round's figure against the best of `base`'s rounds."""
    ref = max(tf.get(base, [float("nan")]))
    return " | ".join(f"{name} " + " / ".join(f"{x:.0f}" for x in t) + f" ({min(t) / ref:.3f}-{max(t) / ref:.3f}x)"
                      for name, t in tf.items())


def head0_fwd_check(q, k, v, o, lse, factor: float = 2.0, **kw) -> tuple:
    """(ok, text): batch 0, head 0 of a forward's o (B, N, H, D) and lse (B, H, N) against the
    float64 reference (kw: softmax_scale / window_left / window_right), each within factor x
    the same-dtype reference's error (+1e-4), every element finite; lse None: o only."""
    from flashtriton import reference
    args = [t[:1, :, :1] for t in (q, k, v)]
    out64, lse64 = reference.attention(*(t.double() for t in args), **kw)
    outlp, lselp = reference.attention(*args, **kw)
    err = (o[:1, :, :1].double() - out64).abs().max().item()
    base = (outlp.double() - out64).abs().max().item()
    ok = err <= factor * base + 1e-4 and bool(torch.isfinite(o).all().item())
    text = f"f64 err {err:.1e} (torch {base:.1e})"
    if lse is not None:
        err_lse = (lse[:1, :1].double() - lse64).abs().max().item()
        base_lse = (lselp.double() - lse64).abs().max().item()
        ok = ok and err_lse <= factor * base_lse + 1e-4 and bool(torch.isfinite(lse).all().item())
        text += f", lse {err_lse:.1e} ({base_lse:.1e})"
    return ok, text



def same_outputs(a, b) -> str:
    """"bitwise" if two (out, lse) pairs are equal, else their largest differences."""
    (o1, l1), (o2, l2) = a, b
    if torch.equal(o1, o2) and torch.equal(l1, l2):
        return "bitwise"
    return (f"DIFFER: out max {(o1.float() - o2.float()).abs().max().item():.1e}, "
            f"lse max {(l1 - l2).abs().max().item():.1e}")


def device_slug(device: str) -> str:
    if device == "cuda":
        name = torch.cuda.get_device_name()
    else:
        name = f"cpu-{os.cpu_count()}core"
    return re.sub(r"[^A-Za-z0-9]+", "-", name).strip("-").lower()


def environment(device: str) -> dict:
    import triton
    env = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "torch": torch.__version__, "triton": triton.__version__, "python": platform.python_version(),
        "device": torch.cuda.get_device_name() if device == "cuda" else platform.processor() or "cpu",
        "threads": torch.get_num_threads(),
    }
    if device == "cuda":
        env["sms"] = torch.cuda.get_device_properties(0).multi_processor_count
    return env


def results_dir(device: str, root: str | None = None) -> Path:
    base = Path(root) if root else Path.cwd() / "bench" / "results"
    d = base / device_slug(device)
    d.mkdir(parents=True, exist_ok=True)
    return d


def write_json(path: Path, env: dict, rows: list) -> None:
    path.write_text(json.dumps({"environment": env, "rows": rows}, indent=1))


def markdown_table(rows: list, columns: list, headers: list | None = None) -> str:
    headers = headers or columns
    out = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(columns)]
    for r in rows:
        cells = []
        for c in columns:
            v = r.get(c, "")
            cells.append(f"{v:.1f}" if isinstance(v, float) else ("–" if v is None else str(v)))
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


class Progress:
    """A one-line progress bar on stderr (no dependency)."""

    def __init__(self, total: int, label: str = ""):
        self.total, self.done, self.label, self.t0 = total, 0, label, time.perf_counter()

    def step(self, what: str = ""):
        self.done += 1
        width = 30
        fill = int(width * self.done / max(self.total, 1))
        elapsed = time.perf_counter() - self.t0
        sys.stderr.write(f"\r{self.label} [{'#' * fill}{'.' * (width - fill)}] {self.done}/{self.total} "
                         f"{elapsed:5.0f}s {what[:40]:<40}")
        if self.done == self.total:
            sys.stderr.write("\n")
        sys.stderr.flush()


def max_rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    """||out - ref|| / ||ref|| over finite elements; inf if out has NaN where ref has not."""
    out, ref = out.double(), ref.double()
    if not torch.equal(torch.isfinite(out), torch.isfinite(ref)):
        return float("inf")
    m = torch.isfinite(ref)
    return ((out[m] - ref[m]).norm() / ref[m].norm().clamp_min(1e-30)).item()
