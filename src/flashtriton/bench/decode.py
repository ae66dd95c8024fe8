"""Decode benchmark on the GPU: one new query per sequence against a KV cache.

Shapes (issue 5): bf16, H = 32 query heads, Hk = 8 KV heads, D = 128, Sq = 1,
B in {1, 8, 32, 128} x L in {1k, 8k, 32k, 128k} (shapes whose cache exceeds
MAX_CACHE_GB, or 55% of the GPU's memory, are skipped). Providers, on the same inputs: flashtriton's
flash_attn_with_kvcache (default split heuristic, contiguous cache, value checks
off as in a serving loop), SDPA FLASH_ATTENTION (FA2 CUDA) and SDPA CUDNN_ATTENTION,
both with enable_gqa=True on (B, Hk, L, D) views of the same cache.
Extra rows: paged caches (page 16 and 256, shuffled pool), the append of one token
with rotary, and a sweep of flashtriton's launch variants (combine, append, tiles,
split counts) for tuning.

Every provider is first checked against the reference (flashtriton.reference_decode,
fp32, on batch element 0), then timed with triton.testing.do_bench (median; L2
flushed before every call, so even the small caches are read from HBM). Each
timing is taken eagerly and, where the provider can be captured, as a CUDA graph
replay (what a serving loop runs: no Python or launch overhead on the CPU side).
Bandwidth = bytes of K and V read / time = 2 * B * Hk * L * D * 2 bytes / time.

Results: bench/results/<gpu>/decode.json, decode.md (tables + the issue's targets)
and decode.png (GB/s against L, one line per B and provider).

    python -m flashtriton.bench.decode            # the full run (about 2 minutes on an H200)
    python -m flashtriton.bench.decode --quick    # fewer shapes, no variant sweep
    python -m flashtriton.bench.decode --smoke    # tiny shapes on the CPU: checks this harness
"""
from __future__ import annotations

import argparse
import math
import time

import torch

import flashtriton
from flashtriton import kvcache, reference_decode
from flashtriton.bench import common
from flashtriton.launchers import decode as launcher
from flashtriton.launchers.prefill import AttnParams

NHEADS, NHEADS_K, HEAD_DIM = 32, 8, 128
BATCHES = [1, 8, 32, 128]
SEQLENS = [1024, 8192, 32768, 131072]
# K + V bytes per shape: B = 128 x 128k (68.7 GB) runs on a 141 GB H200 since session 28 (a
# provider that needs a contiguous copy of it runs out of memory and gets an error row)
MAX_CACHE_GB = 72.0
MAX_REL_ERR = 1e-2         # against the fp32 reference (bf16 decode lands near 2e-3)
PAGED_SHAPES = [(1, 8192), (1, 131072), (32, 32768)]
APPEND_SHAPES = [(1, 8192), (32, 32768), (1, 131072)]
# (B, L, page size or 0), most important first: the sweep stops after VARIANT_BUDGET_S.
VARIANT_SHAPES = [(1, 8192, 0), (32, 32768, 0), (1, 131072, 0), (32, 32768, 16), (128, 8192, 0)]
VARIANT_BUDGET_S = 40.0

# The targets (H200, bf16, Hq=32, Hk=8, D=128) and the baselines it quotes.
TARGETS = """| target | baseline in the issue |
|---|---|
| B=1, L=128k: >= 4.0 TB/s | cuDNN 3.85, FA2-CUDA 3.43 TB/s |
| B=1, L=8k: latency <= 22.6 us | cuDNN 22.6 us |
| B=32, L=32k: >= 1.6x FA2-CUDA and >= 1.0x cuDNN | FA2-CUDA 2.55, cuDNN 4.49 TB/s |
| paged, page 16 and 256: within 10% of contiguous | |
| append 1 token + rotary: adds <= 10% | |"""


def kv_bytes(batch, seqlen, esize=2):
    return 2 * batch * NHEADS_K * seqlen * HEAD_DIM * esize


# ----------------------------------------------------------------------------------------
# inputs and providers

def make_inputs(batch, seqlen, device, dtype=torch.bfloat16, page_size=0, append=False):
    """One decode step: q (B, 1, H, D) and a full cache of L tokens (L - 1 cached plus
    the appended one when `append`). Paged caches use a shuffled pool."""
    nheads, nheads_k, head_dim = NHEADS, NHEADS_K, HEAD_DIM
    inp = dict(q=torch.randn(batch, 1, nheads, head_dim, dtype=dtype, device=device))
    if page_size:
        blocks = batch * seqlen // page_size
        shape = (blocks, page_size, nheads_k, head_dim)
        inp["block_table"] = torch.randperm(blocks, device=device).to(torch.int32).view(batch, seqlen // page_size)
    else:
        shape = (batch, seqlen, nheads_k, head_dim)
    inp["k_cache"] = torch.randn(shape, dtype=dtype, device=device)
    inp["v_cache"] = torch.randn(shape, dtype=dtype, device=device)
    n_cached = seqlen - 1 if append else seqlen
    inp["cache_seqlens"] = torch.full((batch,), n_cached, dtype=torch.int32, device=device)
    if append:
        inp["k"] = torch.randn(batch, 1, nheads_k, head_dim, dtype=dtype, device=device)
        inp["v"] = torch.randn(batch, 1, nheads_k, head_dim, dtype=dtype, device=device)
        inv = 1.0 / (10000 ** (torch.arange(0, head_dim, 2, device=device, dtype=torch.float32) / head_dim))
        ang = torch.arange(seqlen, device=device, dtype=torch.float32)[:, None] * inv[None, :]
        inp["rotary_cos"], inp["rotary_sin"] = ang.cos().to(dtype), ang.sin().to(dtype)
    return inp


def ours(inp, causal=False, num_splits=0, checks=False):
    args = {k: v for k, v in inp.items() if k != "q"}
    with kvcache.value_checks(checks):
        return flashtriton.flash_attn_with_kvcache(inp["q"], causal=causal, num_splits=num_splits, **args)


def _sdpa(backend_name):
    def run(inp, views):
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel
        k, v = views
        with sdpa_kernel([getattr(SDPBackend, backend_name)]):
            out = F.scaled_dot_product_attention(inp["q"].transpose(1, 2), k, v, enable_gqa=True)
        return out.transpose(1, 2)
    return run


SDPA = {"sdpa-flash (FA2 CUDA)": "FLASH_ATTENTION", "sdpa-cudnn": "CUDNN_ATTENTION"}


def reference_out(inp, causal=False):
    """fp32 reference of batch element 0 (after the append, if any, which it repeats
    idempotently on a copy of the touched rows)."""
    sl = {}
    for name, t in inp.items():
        if name in ("k_cache", "v_cache"):
            sl[name] = t if "block_table" in inp else t[:1]
        elif name in ("rotary_cos", "rotary_sin"):
            sl[name] = t
        else:
            sl[name] = t[:1]
    if "k" in sl:  # never write the timed cache from the reference
        sl["k_cache"], sl["v_cache"] = sl["k_cache"].clone(), sl["v_cache"].clone()
    d = inp["q"].shape[-1]
    params = AttnParams(1 / math.sqrt(d), -1, 0 if causal else -1, 0.0, 0.0)
    out, _ = reference_decode.kvcache_fwd(
        sl["q"], sl["k_cache"], sl["v_cache"], sl.get("k"), sl.get("v"), sl.get("rotary_cos"), sl.get("rotary_sin"),
        sl["cache_seqlens"], None, None, sl.get("block_table"), params, True, None, 0, compute_dtype=torch.float32)
    return out


def _time(fn, device, graphs):
    """(eager ms, graph-replay ms or None, graph-replay ms under do_bench's zeroing flush or
    None). Decode steps are timed after a read-only L2 flush (common.time_ms, flush="read"):
    a zeroing flush leaves ~50 MB of dirty lines whose write-back lands inside a
    memory-bound step (B = 1, L = 128k, H200: ~13 us of ~139).

    Eager: the better of two medians. Session 28 (H200): the first case timed after the
    B = 128 grid (page 16 at B = 1, 8k) and the first of the append section (no append at
    B = 1, 8k) read 26-27 and 41-43 us eagerly in two runs each, where the same steps
    timed together in one loop (bench/gpu/s28_decode_paged_eager.py, order rotated, 4
    rounds) read 20.4-21.2 us in every round; graphs were unaffected."""
    eager = common.time_ms(fn, device, flush="read")
    if device == "cuda":
        eager = min(eager, common.time_ms(fn, device, flush="read"))
    graph_ms = graph_zero = None
    if graphs and device == "cuda":
        try:
            fn()
            torch.cuda.synchronize()
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                fn()
            graph_ms = common.time_ms(g.replay, device, flush="read")
            graph_zero = common.time_ms(g.replay, device, flush="zero")
            del g
        except Exception:  # a provider that cannot be captured
            graph_ms = graph_zero = None
    return eager, graph_ms, graph_zero


def _row(kind, provider, batch, seqlen, ms, graph_ms, graph_zero_ms, err, **extra):
    nbytes = kv_bytes(batch, seqlen)
    row = dict(kind=kind, provider=provider, batch=batch, seqlen=seqlen, us=ms * 1e3, gbs=nbytes / ms / 1e6,
               rel_err=err, **extra)
    if graph_ms is not None:
        row["graph_us"] = graph_ms * 1e3
        row["graph_gbs"] = nbytes / graph_ms / 1e6
    if graph_zero_ms is not None:
        row["graph_zero_flush_us"] = graph_zero_ms * 1e3
    return row


def _checked(fn, ref, name):
    out = fn()
    err = common.max_rel_err(out[:1], ref)
    if not err <= MAX_REL_ERR:
        raise AssertionError(f"{name}: relative error {err:.2e} > {MAX_REL_ERR:.0e}: not timed")
    return err


def _error_row(kind, provider, batch, seqlen, exc, **extra):
    return dict(kind=kind, provider=provider, batch=batch, seqlen=seqlen,
                error=f"{type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}", **extra)


# ----------------------------------------------------------------------------------------
# sections

def bench_grid(batch, seqlen, device, graphs, sdpa=True):
    inp = make_inputs(batch, seqlen, device)
    ref = reference_out(inp)
    rows = []
    splits = launcher.num_splits_heuristic(batch * NHEADS_K, seqlen, launcher.sm_count(torch.device(device)),
                                           launcher.current_options().min_split_keys)
    try:
        fn = lambda: ours(inp)  # noqa: E731
        err = _checked(fn, ref, "flashtriton")
        rows.append(_row("grid", "flashtriton", batch, seqlen, *_time(fn, device, graphs), err, num_splits=splits))
    except Exception as exc:
        rows.append(_error_row("grid", "flashtriton", batch, seqlen, exc))
    if sdpa:
        views = (inp["k_cache"].transpose(1, 2), inp["v_cache"].transpose(1, 2))
        for name, backend in SDPA.items():
            fn = _sdpa(backend)
            try:
                try:
                    err = _checked(lambda: fn(inp, views), ref, name)
                    use, layout = views, "strided view of the cache"
                except RuntimeError:
                    # the backend refuses the strided (B, Hk, L, D) view: give it a contiguous copy
                    use = tuple(t.contiguous() for t in views)
                    layout = "contiguous (B, Hk, L, D) copy"
                    err = _checked(lambda: fn(inp, use), ref, name)
                rows.append(_row("grid", name, batch, seqlen, *_time(lambda: fn(inp, use), device, graphs), err,
                                 layout=layout))
                del use
            except Exception as exc:
                rows.append(_error_row("grid", name, batch, seqlen, exc))
    del inp
    return rows


PAGED_ROUNDS = 2


def bench_paged(batch, seqlen, device, graphs):
    """Page 16 and 256 (shuffled pool) and the contiguous cache they are compared with, on
    new inputs of the same (B, L), timed in PAGED_ROUNDS interleaved rounds (the best of
    each). Session 28: timed one after the other, page 16 at B = 1, 8k read 25.8-26.9 us
    eagerly against 20.0-21.2 us for the grid section's contiguous step in three runs of
    the table, and 20.5-21.2 us interleaved with it (bench/gpu/s28_decode_paged_eager.py)."""
    cases, rows = [], []
    for page in (0, 16, 256):
        inp = make_inputs(batch, seqlen, device, page_size=page)
        fn = lambda inp=inp: ours(inp)  # noqa: E731
        try:
            cases.append(dict(page=page, fn=fn, err=_checked(fn, reference_out(inp), f"paged {page}"), times=[]))
        except Exception as exc:
            rows.append(_error_row("paged", "flashtriton", batch, seqlen, exc, page_size=page))
    for _ in range(PAGED_ROUNDS if device == "cuda" else 1):
        for c in cases:
            if "exc" in c:
                continue                 # (failed in an earlier round: one error row, not timed again)
            try:
                c["times"].append(_time(c["fn"], device, graphs))
            except Exception as exc:
                c["exc"] = exc
    for c in cases:
        # one row a layout: its best times, or the error (a layout that failed any round has no
        # trustworthy best: an error row only, never both)
        if "exc" in c:
            rows.append(_error_row("paged", "flashtriton", batch, seqlen, c["exc"], page_size=c["page"]))
        else:
            best = [min((t[i] for t in c["times"] if t[i] is not None), default=None) for i in range(3)]
            rows.append(_row("paged", "flashtriton", batch, seqlen, *best, c["err"], page_size=c["page"]))
    return rows


def bench_append(batch, seqlen, device, graphs):
    """The decode step with and without appending one token with rotary (causal, as
    a model runs it), and the separate-kernel append for comparison."""
    rows = []
    inp = make_inputs(batch, seqlen, device, append=True)
    plain = {k: v for k, v in inp.items() if k not in ("k", "v", "rotary_cos", "rotary_sin")}
    plain["cache_seqlens"] = inp["cache_seqlens"] + 1
    for label, case, append_mode in (("no append", plain, "fused"), ("append+rotary", inp, "fused"),
                                     ("append+rotary, separate kernels", inp, "separate")):
        try:
            with launcher.options(append=append_mode):
                fn = lambda: ours(case, causal=True)  # noqa: E731
                err = _checked(fn, reference_out(case, causal=True), label)
                rows.append(_row("append", "flashtriton", batch, seqlen, *_time(fn, device, graphs), err,
                                 variant=label))
        except Exception as exc:
            rows.append(_error_row("append", "flashtriton", batch, seqlen, exc, variant=label))
    del inp, plain
    return rows


def _variants(batch, seqlen, page, sms):
    base = launcher.num_splits_heuristic(batch * NHEADS_K, seqlen, sms, 256)
    v = [("default", {}, 0), ("combine=kernel", dict(combine="kernel"), 0), ("combine=fused", dict(combine="fused"), 0),
         ("kv_load=pointer", dict(kv_load="pointer"), 0), ("block_m=64", dict(block_m=64), 0)]
    tiles = [(32, 4, 3), (64, 4, 4), (64, 8, 3), (128, 4, 3), (128, 8, 4), (64, 4, 2)]
    if page:  # tiles of one page go through TMA; larger ones gather rows
        tiles = [(page, 4, 6), (page, 4, 8), (32, 4, 5), (64, 4, 4), (64, 4, 6), (128, 4, 5)]
    for tile in tiles:
        v.append(("tile=%d,%d,%d" % tile, dict(block_n=tile[0], num_warps=tile[1], num_stages=tile[2]), 0))
    for s in sorted({max(1, base // 2), base * 2, base * 4} - {base}):
        if s <= launcher.MAX_SPLITS:
            v.append((f"splits={s}", {}, s))
    return v


def bench_variants(device, graphs, deadline):
    return bench_variants_at(VARIANT_SHAPES, device, graphs, deadline)


def bench_variants_at(shapes, device, graphs, deadline):
    rows = []
    sms = launcher.sm_count(torch.device(device))
    for batch, seqlen, page in shapes:
        inp = make_inputs(batch, seqlen, device, page_size=page)
        ref = reference_out(inp)
        for label, opts, splits in _variants(batch, seqlen, page, sms):
            label = f"page {page}, {label}" if page else label
            if time.perf_counter() > deadline:
                break
            try:
                with launcher.options(**opts):
                    fn = lambda: ours(inp, num_splits=splits)  # noqa: E731
                    err = _checked(fn, ref, label)
                    rows.append(_row("variant", "flashtriton", batch, seqlen, *_time(fn, device, graphs), err,
                                     variant=label))
            except Exception as exc:
                rows.append(_error_row("variant", "flashtriton", batch, seqlen, exc, variant=label))
        del inp
    # The value checks' host sync, once: what serving without value_checks(False) pays.
    batch, seqlen, _ = shapes[0]
    inp = make_inputs(batch, seqlen, device)
    try:
        ms = common.time_ms(lambda: ours(inp, checks=True), device, flush="read")
        rows.append(_row("variant", "flashtriton", batch, seqlen, ms, None, None, None,
                         variant="value checks on (eager)"))
    except Exception as exc:
        rows.append(_error_row("variant", "flashtriton", batch, seqlen, exc, variant="value checks on (eager)"))
    return rows


# ----------------------------------------------------------------------------------------
# reporting

def _L(n):
    """Cache length for the tables: 8192 -> "8k"."""
    return f"{n // 1024}k" if n >= 1024 and n % 1024 == 0 else str(n)


def _fmt(r, key="gbs"):
    if r is None or "error" in r:
        return "x"
    us = r["us"]
    g = f" ({r['graph_us']:.1f})" if "graph_us" in r else ""
    return f"{us:.1f}{g} µs, {r[key] / 1000:.2f} TB/s"


def _graph_ratios(r, c):
    """' (graph ratio; zeroing-flush graph ratio)' of row r against row c, where timed."""
    if not c or "graph_us" not in r or "graph_us" not in c:
        return ""
    out = f" ({r['graph_us'] / c['graph_us']:.3f}"
    if "graph_zero_flush_us" in r and "graph_zero_flush_us" in c:
        out += f"; {r['graph_zero_flush_us'] / c['graph_zero_flush_us']:.3f}"
    return out + ")"


def markdown(rows, env) -> str:
    lines = [f"GPU: {env['device']} ({env.get('sms')} SMs), torch {env['torch']}, triton {env['triton']}, "
             f"{env['date']}. bf16, H={NHEADS}, Hk={NHEADS_K}, D={HEAD_DIM}, one query per sequence. "
             "µs per step eager (the better of two medians; CUDA-graph replay in parentheses), TB/s of K and V read "
             "(2·B·Hk·L·D·2 bytes / eager time), each call after a read-only 256 MB L2 flush (cold, "
             "clean L2; the zeroing flush of triton's do_bench is compared below). "
             "`x`: error or unsupported (listed below).", ""]
    grid = [r for r in rows if r["kind"] == "grid"]
    names = list(dict.fromkeys(r["provider"] for r in grid))
    lines += ["### Contiguous cache", "",
              "| B | L | " + " | ".join(names) + " | ours / FA2 | ours / cuDNN | splits |",
              "|---|---|" + "---|" * (len(names) + 3)]
    by = {(r["provider"], r["batch"], r["seqlen"]): r for r in grid}
    for b, n in dict.fromkeys((r["batch"], r["seqlen"]) for r in grid):
        cells = [_fmt(by.get((p, b, n))) for p in names]
        o = by.get(("flashtriton", b, n), {})
        ratios = []
        for other in ("sdpa-flash (FA2 CUDA)", "sdpa-cudnn"):
            x = by.get((other, b, n), {})
            ratios.append(f"{x['us'] / o['us']:.2f}" if "us" in o and "us" in x else "–")
        lines.append(f"| {b} | {_L(n)} | " + " | ".join(cells) + " | " + " | ".join(ratios)
                     + f" | {o.get('num_splits', '–')} |")
    lines.append("")
    flushes = [r for r in grid if "graph_zero_flush_us" in r and r["batch"] == 1]
    if flushes:
        lines += ["### CUDA-graph replay at B = 1 by L2 flush method", "",
                  "do_bench's flush zeroes 256 MB and leaves L2 dirty: the timed step then also writes "
                  "up to 50 MB back to memory.", "",
                  "| L | provider | read flush | zeroing flush |", "|---|---|---|---|"]
        for r in flushes:
            nbytes = kv_bytes(r["batch"], r["seqlen"])
            z = r["graph_zero_flush_us"]
            lines.append(f"| {_L(r['seqlen'])} | {r['provider']} | {r['graph_us']:.1f} µs, "
                         f"{r['graph_gbs'] / 1000:.2f} TB/s | {z:.1f} µs, {nbytes / z / 1e6:.2f} TB/s |")
        lines.append("")
    paged = [r for r in rows if r["kind"] == "paged"]
    if paged:
        lines += ["### Paged cache (shuffled pool) against the contiguous cache", "",
                  "| B | L | page | paged | contiguous | paged / contiguous time: eager (graph; graph with the "
                  "zeroing flush) |", "|---|---|---|---|---|---|"]
        ref = {(r["batch"], r["seqlen"]): r for r in paged if r.get("page_size") == 0 and "us" in r}
        for r in paged:
            if r.get("page_size") == 0:
                continue                 # (the contiguous reference timed with the paged rows)
            c = ref.get((r["batch"], r["seqlen"])) or by.get(("flashtriton", r["batch"], r["seqlen"]))
            ratio = f"{r['us'] / c['us']:.3f}" if c and "us" in c and "us" in r else "–"
            ratio += _graph_ratios(r, c)
            lines.append(f"| {r['batch']} | {_L(r['seqlen'])} | {r['page_size']} | {_fmt(r)} | {_fmt(c)} "
                         f"| {ratio} |")
        lines.append("")
    app = [r for r in rows if r["kind"] == "append"]
    if app:
        lines += ["### Appending one token with rotary (causal decode step)", "",
                  "| B | L | variant | time | vs no append |", "|---|---|---|---|---|"]
        base = {(r["batch"], r["seqlen"]): r for r in app if r.get("variant") == "no append" and "us" in r}
        for r in app:
            b0 = base.get((r["batch"], r["seqlen"]))
            over = f"{(r['us'] / b0['us'] - 1) * 100:+.1f}%" if b0 and "us" in r else "–"
            if b0 and "graph_us" in r and "graph_us" in b0:
                over += f" ({(r['graph_us'] / b0['graph_us'] - 1) * 100:+.1f}% graph"
                if "graph_zero_flush_us" in r and "graph_zero_flush_us" in b0:
                    over += f"; {(r['graph_zero_flush_us'] / b0['graph_zero_flush_us'] - 1) * 100:+.1f}% zeroing flush"
                over += ")"
            lines.append(f"| {r['batch']} | {_L(r['seqlen'])} | {r['variant']} | {_fmt(r)} | {over} |")
        lines.append("")
    var = [r for r in rows if r["kind"] == "variant"]
    if var:
        lines += ["### Launch variants of flashtriton (tuning)", "", "| B | L | variant | time |", "|---|---|---|---|"]
        for r in var:
            lines.append(f"| {r['batch']} | {_L(r['seqlen'])} | {r['variant']} | {_fmt(r)} |")
        lines.append("")
    lines += ["### The issue's targets", "", TARGETS, ""]
    errs = [r for r in rows if "error" in r]
    if errs:
        lines.append("Not timed: " + "; ".join(f"{r['provider']} B={r['batch']} L={r['seqlen']}"
                                               f"{' ' + _error_label(r)}: {r['error']}" for r in errs))
    return "\n".join(lines)


def _error_label(r) -> str:
    """What an error row was: its variant, its page size, or the paged section's contiguous
    reference (page_size 0)."""
    if "variant" in r:
        return str(r["variant"])
    if r.get("kind") == "paged":
        return "contiguous (paged section's reference)" if r.get("page_size") == 0 else f"page {r.get('page_size')}"
    return ""


def plot(rows, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    grid = [r for r in rows if r["kind"] == "grid" and "gbs" in r]
    batches = sorted({r["batch"] for r in grid})
    fig, axes = plt.subplots(1, max(1, len(batches)), figsize=(4.2 * max(1, len(batches)), 3.6), squeeze=False)
    for ax, b in zip(axes[0], batches):
        for name in dict.fromkeys(r["provider"] for r in grid):
            pts = sorted((r["seqlen"], r["gbs"]) for r in grid if r["batch"] == b and r["provider"] == name)
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=f"{name}")
        ax.set_xscale("log", base=2)
        ax.set_title(f"decode, B={b}", fontsize=9)
        ax.set_xlabel("L (cached tokens)")
        ax.set_ylabel("GB/s of K and V read")
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


# ----------------------------------------------------------------------------------------
# entry points

def _smoke(out_dir):
    """The whole pipeline (inputs, check, time, table, plot) on tiny CPU shapes: the
    Triton kernels under the interpreter when TRITON_INTERPRET=1, else the CPU's
    default backend. SDPA runs its math backend there."""
    global NHEADS, NHEADS_K, HEAD_DIM, SDPA
    saved = NHEADS, NHEADS_K, HEAD_DIM, SDPA
    NHEADS, NHEADS_K, HEAD_DIM = 4, 2, 32
    SDPA = {"sdpa-math": "MATH"}
    backend = "triton" if launcher.interpreting() else flashtriton.backends.default_for(torch.device("cpu"))
    try:
        with flashtriton.use_backend(backend):
            rows = []
            for b, n in ((1, 64), (2, 128)):
                rows += bench_grid(b, n, "cpu", graphs=False)
            rows += bench_paged(1, 256, "cpu", graphs=False)
            rows += bench_append(1, 64, "cpu", graphs=False)
            with launcher.options(block_n=16):
                rows += bench_variants_at([(1, 128, 0), (1, 128, 16)], "cpu", False, time.perf_counter() + 60)
        return _write(rows, "cpu", out_dir, "decode-smoke", dict(backend=backend))
    finally:
        NHEADS, NHEADS_K, HEAD_DIM, SDPA = saved


def _write(rows, device, out_dir, stem, extra_env=None):
    env = common.environment(device)
    env.update(extra_env or {})
    out = common.results_dir(device, out_dir)
    common.write_json(out / f"{stem}.json", env, rows)
    md = markdown(rows, env)
    (out / f"{stem}.md").write_text(md + "\n")
    plot(rows, out / f"{stem}.png")
    print(md)
    return rows


def main(out_dir=None, quick=False, smoke=False, variants=True, graphs=True) -> list[dict]:
    """Runs the benchmark and writes bench/results/<gpu>/decode.{json,md,png}; returns the rows."""
    if smoke:
        return _smoke(out_dir)
    if not torch.cuda.is_available():
        raise RuntimeError("the decode benchmark needs a CUDA GPU (use --smoke to check the harness on the CPU)")
    device = "cuda"
    start = time.perf_counter()
    batches, seqlens = ([1, 32], [8192, 32768]) if quick else (BATCHES, SEQLENS)
    limit = MAX_CACHE_GB * 1e9
    if device == "cuda":          # (a smaller card: the cache at most 55% of its memory)
        limit = min(limit, 0.55 * torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory)
    shapes = [(b, n) for b in batches for n in seqlens if kv_bytes(b, n) <= limit]
    paged = [s for s in PAGED_SHAPES if not quick or s in shapes]
    append = [s for s in APPEND_SHAPES if not quick or s in shapes]
    bar = common.Progress(len(shapes) + len(paged) + len(append) + (1 if variants and not quick else 0), "decode")
    rows = []
    for b, n in shapes:
        rows += bench_grid(b, n, device, graphs)
        torch.cuda.empty_cache()
        bar.step(f"B={b} L={n}")
    for b, n in paged:
        rows += bench_paged(b, n, device, graphs)
        torch.cuda.empty_cache()
        bar.step(f"paged B={b} L={n}")
    for b, n in append:
        rows += bench_append(b, n, device, graphs)
        torch.cuda.empty_cache()
        bar.step(f"append B={b} L={n}")
    if variants and not quick:
        rows += bench_variants(device, graphs, time.perf_counter() + VARIANT_BUDGET_S)
        bar.step("variants")
    return _write(rows, device, out_dir, "decode", dict(seconds=round(time.perf_counter() - start, 1)))


# ----------------------------------------------------------------------------------------
# offline: compile for Hopper without a GPU

_I32_PTRS = {"SEQLENS", "BATCH_IDX", "LEFTPAD", "BLOCK_TABLE", "COUNTERS"}
_F32_PTRS = {"ALIBI", "LSE", "O_PART", "LSE_PART"}
_F32_ARGS = {"qk_scale", "softcap_scale", "softcap_out"}
_NOT_DIVISIBLE = {"seqlen_q", "seqlen_new", "appended", "n_ro", "rot_half", "n_splits", "m_blocks",
                  "rows_per_block", "window_left", "window_right", "group", "nheads_k"}

# (label, constexprs beyond the shape's) of the split kernel, as the launcher sets them.
COMPILE_CASES = [
    ("contiguous, TMA, fused combine", dict()),
    ("contiguous, pointer loads", dict(KV_TMA=False)),
    ("contiguous, block_m=64", dict(BLOCK_M=64)),
    ("paged 256, TMA", dict(PAGE_SIZE=256)),
    ("paged 16, row gather", dict(PAGE_SIZE=16, KV_TMA=False)),
    ("paged 16, page gather (gather=pages)", dict(PAGE_SIZE=16, KV_TMA=False, PAGE_GATHER=1)),
    ("paged 16, page gather, int32 offsets", dict(PAGE_SIZE=16, KV_TMA=False, PAGE_GATHER=2)),
    ("paged 16, tile 16, TMA", dict(PAGE_SIZE=16, BLOCK_N=16)),
    ("append + rotary, causal", dict(HAS_NEW=True, HAS_ROTARY=True, ROTARY_PER_ROW=True, HAS_RIGHT=True)),
    ("one split (direct store)", dict(SPLIT=False, FUSED_COMBINE=False)),
    ("combine kernel mode", dict(FUSED_COMBINE=False)),
    ("window + softcap + alibi + leftpad", dict(HAS_LEFT=True, HAS_RIGHT=True, HAS_SOFTCAP=True, HAS_ALIBI=True,
                                               HAS_LEFTPAD=True)),
]


def _default_constexprs(fn, const: dict) -> dict:
    """const with every constexpr parameter of fn that has a default and is not given (QK_LEVELS, SHIFT, ...,
    compile_report.constexpr_defaults): typed by the name's case those would become pointers (every split-kernel
    case failed to compile from session 58, which added QK_LEVELS, until session 68)."""
    from flashtriton.bench.compile_report import constexpr_defaults
    for name, default in constexpr_defaults(fn).items():
        const.setdefault(name, default)
    return const


def compile_split_kernel(head_dim=128, dtype="bf16", num_warps=None, num_stages=None, **flags):
    """Compile decode_split_kernel for sm_90a (no GPU needed), with the launcher's default
    tile unless given; returns triton's CompiledKernel."""
    from triton import compile as triton_compile
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from flashtriton.kernels.decode import decode_split_kernel as fn
    bd = launcher.block_d(head_dim)
    bn, warps, stages = launcher.DEFAULT_TILES[bd]
    const = dict(HEAD_DIM=head_dim, BLOCK_D=bd, BLOCK_M=16, BLOCK_N=bn, PAGE_SIZE=0, HAS_BATCH_IDX=False,
                 HAS_LEFTPAD=False, HAS_NEW=False, BLOCK_NEW=16, HAS_ROTARY=False, ROTARY_INTERLEAVED=True,
                 ROTARY_PER_ROW=False,
                 HAS_LEFT=False, HAS_RIGHT=False, HAS_ALIBI=False, HAS_SOFTCAP=False, SPLIT=True,
                 FUSED_COMBINE=True, KV_TMA=True, DOT_PRECISION="tf32", PAGE_GATHER=0)
    const.update(flags)
    _default_constexprs(fn, const)
    sig, attrs = {}, {}
    for i, name in enumerate(fn.arg_names):
        if name in const:
            sig[name] = "constexpr"
            continue
        if name in ("K_DESC", "V_DESC") and const["KV_TMA"]:
            sig[name] = f"tensordesc<{dtype}[{const['BLOCK_N']}, {bd}]>"
            continue
        if name[0].isupper():
            sig[name] = "*i32" if name in _I32_PTRS else "*fp32" if name in _F32_PTRS else f"*{dtype}"
            attrs[(i,)] = [["tt.divisibility", 16]]
        elif name in _F32_ARGS:
            sig[name] = "fp32"
        else:
            sig[name] = "i32"
            if name.startswith("stride_") and name not in ("stride_ls", "stride_ab"):
                attrs[(i,)] = [["tt.divisibility", 16]]  # a (B, S, H, D) stride, D % 16 == 0
    src = ASTSource(fn=fn, signature=sig, constexprs={(fn.arg_names.index(k),): v for k, v in const.items()},
                    attrs=attrs)
    if const["PAGE_SIZE"]:
        stages += 2  # as launcher.tile_for
    return triton_compile(src, target=GPUTarget("cuda", 90, 32),
                          options=dict(num_warps=num_warps or warps, num_stages=num_stages or stages))


def _compile_other(fn, const, f32_ptrs, num_warps=4):
    """Compile one of the small kernels for sm_90a (bf16 data, fp32 where named)."""
    from triton import compile as triton_compile
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    const = _default_constexprs(fn, dict(const))
    sig, attrs = {}, {}
    for i, name in enumerate(fn.arg_names):
        if name in const:
            sig[name] = "constexpr"
        elif name[0].isupper():
            sig[name] = "*i32" if name in _I32_PTRS else "*fp32" if name in f32_ptrs else "*bf16"
            attrs[(i,)] = [["tt.divisibility", 16]]
        else:
            sig[name] = "i32"
    src = ASTSource(fn=fn, signature=sig, constexprs={(fn.arg_names.index(k),): v for k, v in const.items()},
                    attrs=attrs)
    return triton_compile(src, target=GPUTarget("cuda", 90, 32), options=dict(num_warps=num_warps, num_stages=2))


def _other_cases(d):
    from flashtriton.kernels.decode import decode_combine_kernel, merge_states_kernel
    from flashtriton.kernels.rotary_append import append_kv_kernel, rotary_q_kernel
    bd = launcher.block_d(d)
    yield "combine kernel", lambda: _compile_other(decode_combine_kernel, dict(HEAD_DIM=d, BLOCK_D=bd, BLOCK_R=16),
                                                    {"O_PART", "LSE_PART", "LSE"})
    yield "merge_attention_states", lambda: _compile_other(merge_states_kernel, dict(HEAD_DIM=d, BLOCK_D=bd,
                                                                                     BLOCK_S=16), {"LSES", "LSE"})
    for page in (0, 16):
        yield f"separate append, page {page}", lambda page=page: _compile_other(
            append_kv_kernel, dict(HEAD_DIM=d, BLOCK_D=bd, BLOCK_N=16, PAGE_SIZE=page, HAS_BATCH_IDX=False,
                                   HAS_ROTARY=True, INTERLEAVED=False), set())
    yield "separate q rotation", lambda: _compile_other(rotary_q_kernel, dict(HEAD_DIM=d, BLOCK_D=bd, BLOCK_H=16,
                                                                              PER_ROW=True, INTERLEAVED=True), set())


def compile_report(head_dims=(64, 128, 256)):
    """Every COMPILE_CASES variant at each head dim: registers, spills, shared memory, and
    which loads / MMAs the SASS holds (UTMALDG: TMA; LDGSTS: cp.async; HGMMA: wgmma;
    HMMA: mma.sync). Catches GPU-only compile errors before device time is spent."""
    from flashtriton.bench.compile_report import resources
    print("| case | D | regs | spill B | smem KB | UTMALDG | LDGSTS | HGMMA | HMMA |")
    print("|---|---|---|---|---|---|---|---|---|")
    ok = True
    for d in head_dims:
        cases = [(label, lambda flags=flags: compile_split_kernel(d, **flags)) for label, flags in COMPILE_CASES]
        for label, build in cases + list(_other_cases(d)):
            try:
                compiled = build()
                r = resources(compiled)
                ldgsts = compiled.asm.get("ptx", "").count("cp.async.cg") + compiled.asm.get("ptx", "").count(
                    "cp.async.ca")
            except Exception as exc:  # noqa: BLE001  (reported, then fails the run)
                ok = False
                print(f"| {label} | {d} | {type(exc).__name__}: {str(exc).splitlines()[0][:90]} |", flush=True)
                continue
            print(f"| {label} | {d} | {r['regs']} | {r['spill_bytes']} | {r['smem'] / 1024:.0f} | {r['utmaldg']} | "
                  f"{ldgsts} | {r['hgmma']} | {r['hmma']} |", flush=True)
    return ok


def _cli(argv=None):
    ap = argparse.ArgumentParser(prog="python -m flashtriton.bench.decode", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=None, help="results root (default: ./bench/results)")
    ap.add_argument("--quick", action="store_true", help="B in {1, 32}, L in {8k, 32k}, no variant sweep")
    ap.add_argument("--smoke", action="store_true", help="tiny shapes on the CPU: checks the harness itself")
    ap.add_argument("--no-variants", action="store_true", help="skip the sweep of launch variants")
    ap.add_argument("--no-graphs", action="store_true", help="time eagerly only")
    ap.add_argument("--compile-report", action="store_true",
                    help="compile the split kernel for sm_90a offline (no GPU) and report resources")
    args = ap.parse_args(argv)
    if args.compile_report:
        raise SystemExit(0 if compile_report() else 1)
    main(out_dir=args.out, quick=args.quick, smoke=args.smoke, variants=not args.no_variants,
         graphs=not args.no_graphs)


if __name__ == "__main__":
    _cli()
