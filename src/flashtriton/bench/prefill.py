"""Prefill and training benchmark on the GPU: the FlashAttention-2 paper's grid.

batch x seqlen = 16k tokens, hidden 2048 (H = 2048 / D), seqlen 512 .. 16k, causal and
not. For each shape every provider (flashtriton, SDPA FLASH_ATTENTION = FA2 CUDA, SDPA
CUDNN_ATTENTION, compiled FlexAttention) is first checked against a float64
reference on one (batch, head) slice, forward and gradients, then timed on the same
inputs: forward, backward, forward+backward, median of triton.testing.do_bench.
TFLOP/s use the FA2 paper's count (bench.common.attention_flops).
"""
from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import torch

from flashtriton import reference
from flashtriton.bench import common, providers

TOKENS, HIDDEN = 16384, 2048
SEQLENS = [512, 1024, 2048, 4096, 8192, 16384]
# Seconds the GPU idles before each shape of the grid. Workaround, H200, torch 2.11, triton 3.6,
# 2026-12-03 (bench/NOTES.md "Session 38"): the first shape after another one, timed back to back,
# read its forward+backward 3-12% slower than its forward and backward add up (D = 64, 4k right after
# 8k: +2.9 / +12.1%, ours alone), while after 3 s of idle it added up (+1.2 / -0.1%), as it does in a
# fresh process. Not the power cap (the same clocks in both; 1.5 s of load at the same shape just
# before: +0.4 / +0.9%), not NVML's query; cause unknown.
SETTLE_S = 3.0
# Also (main): the grid's first shape runs once before the grid, its rows discarded, unless --no-warmup. H200,
# torch 2.11, triton 3.6, 2026-12-03 (bench/NOTES.md "Session 39"): the first shape of a grid process, D = 128
# non-causal 512 bf16, read our forward+backward at 293 TFLOP/s, below its own backward's 332; the same cell timed
# later in another grid process, after other shapes, read 356 (its forward and backward add up to ~365). The
# settle does not cover it (nothing ran before the first shape). The warm-up keeps compilation out of the first
# row but did not lift that cell: with it (session 40, same GPU and versions) the first shape read forward /
# backward 462 / 333 as later and forward+backward 309, ~0.1 ms a step of host time in the autograd-timed cell.
# Timing rounds a shape (--rounds): every provider timed this many times, the order rotated each round, the
# median reported. H200, torch 2.11, triton 3.6, 2026-12-04 (bench/NOTES.md "Session 48"): with one reading a cell
# the grid always timed ours first after the settle, and every provider's first round reads fastest (ours' forward
# by 4-18% at D = 128 from 2k: boost clocks after the idle, the 700 W cap later), while cuDNN's first reading after
# an idle gap sat 9-10% above its median (session 46). Three rounds cost ~10% more grid time (the checks, Flex's
# compiles and the settle dominate).
ROUNDS = 3
# Relative error allowed against float64 (a bf16 attention lands near 3e-3).
MAX_REL_ERR = {torch.bfloat16: 2e-2, torch.float16: 5e-3}


def _reference_slice(q, k, v, dout, causal):
    """float64 out and grads of batch 0, query head 0 (and its kv head)."""
    h, hk = q.shape[2], k.shape[2]
    sl = lambda t, j: t[:1, :, j:j + 1].double()  # noqa: E731
    kw = dict(softmax_scale=1 / math.sqrt(q.shape[-1]), window_right=0 if causal else -1)
    q0, k0, v0, do0 = sl(q, 0), sl(k, 0), sl(v, 0), sl(dout, 0)
    out = reference.attention(q0, k0, v0, **kw)[0]
    dq, dk, dv = reference.attention_grad(do0, q0, k0, v0, **kw)
    # dk, dv of kv head 0 sum over its whole query group: only compare them when the group is one head
    return out, dq, (dk, dv) if h == hk else None


def _check(fn, q, k, v, dout, causal, ref):
    out = fn(q, k, v, causal)
    grads = torch.autograd.grad(out, (q, k, v), dout)
    errs = [common.max_rel_err(out[:1, :, :1], ref[0]), common.max_rel_err(grads[0][:1, :, :1], ref[1])]
    if ref[2] is not None:
        errs += [common.max_rel_err(grads[1][:1, :, :1], ref[2][0]), common.max_rel_err(grads[2][:1, :, :1], ref[2][1])]
    return errs[0], max(errs[1:])


def _time_modes(fn, q, k, v, dout, causal, modes, device):
    """Milliseconds per mode of one provider: {mode: ms}."""
    return common.time_passes(lambda: fn(q, k, v, causal), (q, k, v), dout, device, modes)


def _qkv(batch, seqlen, nheads, head_dim, dtype, device, layout):
    """q, k, v (B, N, H, D) that need gradients. layout "bnhd": contiguous; "bhnd": views
    of (B, H, N, D) memory (transposed), as a model that applies rotary embeddings in
    (B, H, N, D) and calls the flash-attn API passes them."""
    if layout == "bnhd":
        return [torch.randn(batch, seqlen, nheads, head_dim, dtype=dtype, device=device, requires_grad=True)
                for _ in range(3)]
    if layout == "bhnd":
        return [torch.randn(batch, nheads, seqlen, head_dim, dtype=dtype, device=device,
                            requires_grad=True).transpose(1, 2) for _ in range(3)]
    raise ValueError(f"layout: must be bnhd or bhnd, got {layout!r}")


def bench_shape(provs, batch, seqlen, nheads, head_dim, causal, dtype, modes=("fwd", "bwd", "fwd_bwd"),
                device="cuda", graph_upto=0, layout="bnhd", rounds=1):
    """One shape, every provider: check them all, then time the ones that passed, in
    `rounds` rotated rounds (median). Up to seqlen graph_upto the forward is also timed as
    a CUDA-graph replay (fwd_graph_*), which removes host overhead. layout: the memory of
    q, k, v and dout (_qkv)."""
    q, k, v = _qkv(batch, seqlen, nheads, head_dim, dtype, device, layout)
    dout = torch.randn_like(q)                                          # the same strides as q
    ref = _reference_slice(q.detach(), k.detach(), v.detach(), dout, causal)
    rows, timed = {}, []
    for name, fn in provs.items():
        row = dict(provider=name, dtype=str(dtype).replace("torch.", ""), head_dim=head_dim, causal=causal,
                   seqlen=seqlen, batch=batch, nheads=nheads)
        rows[name] = row
        if layout != "bnhd":
            row["layout"] = layout
        try:
            row["fwd_err"], row["bwd_err"] = _check(fn, q, k, v, dout, causal, ref)
        except Exception as exc:  # a provider that does not support this shape
            row["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:120]}"
            continue
        if max(row["fwd_err"], row["bwd_err"]) > MAX_REL_ERR[dtype]:
            row["error"] = "accuracy check failed: not timed"
            continue
        timed.append(name)
    # Timing: `rounds` passes over the providers, each in rotated order; a mode's figure is the
    # median over the rounds (its per-round readings kept as <mode>_ms_rounds when rounds > 1).
    units = {name: (lambda fn=provs[name]: _time_modes(fn, q, k, v, dout, causal, modes, device)) for name in timed}
    medians, readings, errors = common.median_of_rounds(units, rounds)
    for name, err in errors.items():
        rows[name]["error"] = err
    for name in timed:
        row = rows[name]
        for mode, ms in medians.get(name, {}).items():
            ms_list = readings[name][mode]
            row[f"{mode}_ms"] = ms
            row[f"{mode}_tflops"] = common.attention_flops(batch, nheads, seqlen, seqlen, head_dim, causal,
                                                           mode) / ms / 1e9
            if rounds > 1:
                row[f"{mode}_ms_rounds"] = ms_list
                row["rounds"] = rounds
        if device == "cuda" and seqlen <= graph_upto:
            fn = provs[name]
            try:
                ms = common.graph_time_ms(lambda: fn(q, k, v, causal))
                row["fwd_graph_ms"] = ms
                row["fwd_graph_tflops"] = common.attention_flops(batch, nheads, seqlen, seqlen, head_dim, causal) / ms / 1e9
            except Exception as exc:  # a provider that cannot be captured
                row["graph_error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:120]}"
    rows = list(rows.values())
    del q, k, v, dout
    if device == "cuda":
        torch.cuda.empty_cache()
    return rows


def peak_memory(batch=1, nheads=16, seqlen=32768, head_dim=128, dtype=torch.bfloat16):
    """Peak bytes of forward+backward, over the bytes of q, k, v, out, dout, dq, dk, dv."""
    import flashtriton
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    q, k, v = (torch.randn(batch, seqlen, nheads, head_dim, dtype=dtype, device="cuda", requires_grad=True)
               for _ in range(3))
    dout = torch.randn_like(q)
    out = flashtriton.flash_attn_func(q, k, v)
    grads = torch.autograd.grad(out, (q, k, v), dout)
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - base
    tensors = 8 * q.numel() * q.element_size()
    del grads, out
    return dict(shape=f"B={batch} H={nheads} N={seqlen} D={head_dim} {dtype}", peak_bytes=peak,
                tensor_bytes=tensors, ratio=peak / tensors)


def markdown(rows, env) -> str:
    lines = [f"GPU: {env['device']} ({env.get('sms')} SMs), torch {env['torch']}, triton {env['triton']}, "
             f"{env['date']}. TFLOP/s, forward / backward / forward+backward (FA2 paper FLOP count); "
             "`x` = error or unsupported."
             + (" Cells are medians of rotated timing rounds (every provider timed in each round; rounds "
                f"per cell: {', '.join(str(n) for n in sorted({r.get('rounds', 1) for r in rows}))})."
                if any(r.get("rounds", 1) > 1 for r in rows) else ""), ""]
    names = list(dict.fromkeys(r["provider"] for r in rows))
    keyf = lambda r: (r["dtype"], r["head_dim"], r["causal"])  # noqa: E731
    for key in dict.fromkeys(keyf(r) for r in rows):
        dtype, d, causal = key
        lines.append(f"### {dtype}, D={d}, {'causal' if causal else 'non-causal'}")
        lines.append("")
        lines.append("| N | " + " | ".join(names) + " | ours / cuDNN (fwd, bwd) |")
        lines.append("|---|" + "---|" * (len(names) + 1))
        for n in sorted({r["seqlen"] for r in rows if keyf(r) == key}):
            cells, by = [], {r["provider"]: r for r in rows if keyf(r) == key and r["seqlen"] == n}
            for name in names:
                r = by.get(name)
                if r is None or "error" in r:
                    cells.append("x")
                else:
                    cells.append(" / ".join(f"{r.get(m + '_tflops', float('nan')):.0f}" for m in ("fwd", "bwd", "fwd_bwd")))
            o, c = by.get("flashtriton", {}), by.get("sdpa-cudnn", {})
            ratio = "–"
            if "fwd_tflops" in o and "fwd_tflops" in c:
                ratio = f"{o['fwd_tflops'] / c['fwd_tflops']:.2f}, {o.get('bwd_tflops', 0) / c.get('bwd_tflops', 1):.2f}"
            lines.append(f"| {n} | " + " | ".join(cells) + f" | {ratio} |")
        lines.append("")
    graph_rows = [r for r in rows if "fwd_graph_tflops" in r]
    if graph_rows:
        lines.append("### Forward as CUDA-graph replay (no host overhead), TFLOP/s")
        lines.append("")
        lines.append("| dtype | D | causal | N | " + " | ".join(names) + " |")
        lines.append("|---|---|---|---|" + "---|" * len(names))
        for key in dict.fromkeys((r["dtype"], r["head_dim"], r["causal"], r["seqlen"]) for r in graph_rows):
            by = {r["provider"]: r for r in graph_rows if (r["dtype"], r["head_dim"], r["causal"], r["seqlen"]) == key}
            cells = [f"{by[n]['fwd_graph_tflops']:.0f}" if n in by else "x" for n in names]
            lines.append(f"| {key[0]} | {key[1]} | {'yes' if key[2] else 'no'} | {key[3]} | " + " | ".join(cells) + " |")
        lines.append("")
    errs = [r for r in rows if "error" in r]
    if errs:
        lines.append("Not timed: " + "; ".join(sorted({f"{r['provider']} D={r['head_dim']}: {r['error']}" for r in errs})))
    return "\n".join(lines)


def plot(rows, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    panels = sorted({(r["dtype"], r["head_dim"], r["causal"]) for r in rows})
    modes = ("fwd", "bwd", "fwd_bwd")
    fig, axes = plt.subplots(len(panels), 3, figsize=(15, 3.2 * len(panels)), squeeze=False)
    for i, (dtype, d, causal) in enumerate(panels):
        for j, mode in enumerate(modes):
            ax = axes[i][j]
            for name in dict.fromkeys(r["provider"] for r in rows):
                pts = sorted((r["seqlen"], r[f"{mode}_tflops"]) for r in rows
                             if (r["dtype"], r["head_dim"], r["causal"]) == (dtype, d, causal)
                             and r["provider"] == name and f"{mode}_tflops" in r)
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=name)
            ax.set_xscale("log", base=2)
            ax.set_title(f"{mode}, {dtype}, D={d}, {'causal' if causal else 'non-causal'}", fontsize=9)
            ax.set_xlabel("seqlen")
            ax.set_ylabel("TFLOP/s")
            ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def merge(paths, out_path):
    """One table from several runs' JSON files (same GPU and versions): a later file's row
    replaces an earlier one with the same (dtype, D, causal, N, provider); the header
    names every run's date. Writes out_path (.json) and its .md and .png."""
    import json
    rows, envs, runs = {}, [], []
    keyf = lambda r: (r["dtype"], r["head_dim"], r["causal"], r["seqlen"], r["provider"])  # noqa: E731
    for path in paths:
        data = json.loads(Path(path).read_text())
        env = data["environment"]
        envs.append(env)
        # an already merged file lists its runs, and its rows name theirs: kept as they are
        own = env.get("runs") or sorted({r.get("run", env["date"]) for r in data["rows"]})
        runs += [r for r in own if r not in runs]
        for r in data["rows"]:
            rows[keyf(r)] = dict(r, run=r.get("run", env["date"]))
    for field in ("device", "torch", "triton"):
        if len({e[field] for e in envs}) != 1:
            raise ValueError(f"merge: the runs differ in {field}: {sorted({e[field] for e in envs})}")
    env = dict(envs[-1], runs=runs, date="rows from the runs of " + ", ".join(runs)
               + " (a later run's row replaces an earlier one)")
    out = Path(out_path)
    rows = list(rows.values())      # in the first run's order; new keys at the end
    common.write_json(out, env, rows)
    out.with_suffix(".md").write_text(markdown(rows, env) + "\n")
    plot(rows, out.with_suffix(".png"))
    return rows


def _smoke(out_dir):
    """The whole pipeline (check, time, table, plot) on tiny CPU shapes."""
    import torch.nn.functional as F
    provs = {"flashtriton": providers.ours,
             "sdpa-math": lambda q, k, v, c: F.scaled_dot_product_attention(
                 q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=c).transpose(1, 2)}
    rows = []
    for causal in (False, True):
        rows += bench_shape(provs, 1, 64, 2, 32, causal, torch.bfloat16, device="cpu")
    env = common.environment("cpu")
    out = common.results_dir("cpu", out_dir)
    common.write_json(out / "prefill-smoke.json", env, rows)
    (out / "prefill-smoke.md").write_text(markdown(rows, env) + "\n")
    plot(rows, out / "prefill-smoke.png")
    return rows


def main(argv=None, out_dir=None):
    ap = argparse.ArgumentParser(prog="python -m flashtriton bench", description=__doc__)
    ap.add_argument("--head-dims", type=int, nargs="+", default=[64, 128])
    ap.add_argument("--dtypes", nargs="+", default=["bfloat16"])
    ap.add_argument("--seqlens", type=int, nargs="+", default=SEQLENS)
    ap.add_argument("--causal", choices=["both", "yes", "no"], default="both")
    ap.add_argument("--no-flex", action="store_true", help="skip FlexAttention (its compiles are slow)")
    ap.add_argument("--graph-upto", type=int, default=1024,
                    help="also time the forward as a CUDA-graph replay up to this seqlen")
    ap.add_argument("--out", default=out_dir)
    ap.add_argument("--tag", default="prefill", help="file name stem of the results")
    ap.add_argument("--settle", type=float, default=SETTLE_S,
                    help="seconds the GPU idles before each shape (0: none; see SETTLE_S)")
    ap.add_argument("--no-warmup", action="store_true",
                    help="do not run the first shape once, discarded, before the grid (see the note at SETTLE_S)")
    ap.add_argument("--rounds", type=int, default=ROUNDS,
                    help="time every provider this many times a shape, in rotated order, and report the median "
                         "(see ROUNDS)")
    ap.add_argument("--memory", action="store_true", help="also measure peak memory at B=1, H=16, N=32k, D=128")
    ap.add_argument("--smoke", action="store_true", help="tiny shapes on the CPU: checks the harness itself")
    ap.add_argument("--layout", choices=["bnhd", "bhnd"], default="bnhd",
                    help="q, k, v contiguous (B, N, H, D), or views of (B, H, N, D) memory (use another --tag)")
    ap.add_argument("--merge", nargs="+", metavar="JSON",
                    help="no timing: merge these result files (later rows win) into <out>/<tag>.json/.md/.png")
    args = ap.parse_args(argv)
    if args.rounds < 1:
        raise ValueError(f"--rounds: must be >= 1, got {args.rounds}")
    if args.merge:
        return merge(args.merge, Path(args.out or ".") / f"{args.tag}.json")
    if args.smoke:
        return _smoke(args.out)
    env = common.environment("cuda")
    provs = providers.gpu_providers(include_flex=not args.no_flex)
    causals = {"both": [False, True], "yes": [True], "no": [False]}[args.causal]
    shapes = [(getattr(torch, dt), d, c, n) for dt in args.dtypes for d in args.head_dims for c in causals
              for n in args.seqlens]
    bar = common.Progress(len(shapes), "prefill")
    out = common.results_dir("cuda", args.out)
    if args.memory:
        env["peak_memory"] = peak_memory()
    rows = []
    env["settle_s"] = args.settle
    env["rounds"] = args.rounds
    env["warmup"] = bool(shapes) and not args.no_warmup
    if env["warmup"]:
        # the first shape once, every provider, results discarded (the note at SETTLE_S)
        dtype, d, causal, n = shapes[0]
        bench_shape(provs, TOKENS // n, n, HIDDEN // d, d, causal, dtype, graph_upto=args.graph_upto,
                    layout=args.layout)
    for dtype, d, causal, n in shapes:
        time.sleep(args.settle)
        rows += bench_shape(provs, TOKENS // n, n, HIDDEN // d, d, causal, dtype, graph_upto=args.graph_upto,
                            layout=args.layout, rounds=args.rounds)
        common.write_json(out / f"{args.tag}.json", env, rows)  # after every shape: a timeout keeps the rest
        bar.step(f"{dtype} D={d} causal={causal} N={n}")
    md = markdown(rows, env)
    if args.memory:
        pm = env["peak_memory"]
        md += (f"\n\nPeak memory of forward+backward, {pm['shape']}: {pm['peak_bytes'] / 2**20:.0f} MiB = "
               f"{pm['ratio']:.3f} x the bytes of q, k, v, out, dout, dq, dk, dv.")
    (out / f"{args.tag}.md").write_text(md + "\n")
    plot(rows, out / f"{args.tag}.png")
    print(md)
    return rows


if __name__ == "__main__":
    main()
