"""The feature benchmark (GPU, bf16, D=128): what varlen, sliding windows, dropout,
the deterministic backward and float32 inputs cost, side by side in one run.

    python -m flashtriton.bench.features --out DIR

Cases (the targets are those of the feature issue; each row says whether it is met):
  varlen   16k tokens in random lengths 128..4096 against the dense kernel on equal
           lengths with the same token count; TFLOP/s count useful FLOPs only
           (sum over sequences of the FA2 count), target >= 0.9x dense.
  window   window (1024, 0) at N = 16k: TFLOP/s over the FLOPs inside the band
           against full causal (over the causal triangle), target >= 0.85x; and the
           time against SDPA with the same boolean mask (its memory-efficient
           kernel: FA2 CUDA and cuDNN take no arbitrary mask) and compiled
           FlexAttention with a sliding-window block mask.
  dropout  p = 0.1 against p = 0, forward+backward, target <= 1.15x time.
  determ.  deterministic=True against the default backward (reported, no target).
  paged    the varlen batch, forward only, with k and v in a paged cache (block_table;
           pages of 256 and 16 keys dealt in random order) against packed k, v
           (reported, no target).
  float32  float32 inputs (exact fp32 dots, and with FLASHTRITON_ALLOW_TF32=x3 / =1)
           against bf16, and SDPA's float32 (memory-efficient kernel).

Every configuration is first checked against a float64 reference on one head, then
timed with triton.testing.do_bench (median), in --rounds rounds (default prefill.ROUNDS) with
a case's configurations in rotated order each round, the median of the rounds kept (bench/
NOTES.md "Session 48": the first configuration timed after an idle read fastest). Results:
features.{json,md}.
"""
from __future__ import annotations

import argparse
import math
import os
import random

import torch
import torch.nn.functional as F

import flashtriton
from flashtriton import paged, reference
from flashtriton.bench import common, prefill

HEAD_DIM, NHEADS = 128, 16
DEVICE = "cuda"  # --smoke: "cpu", tiny shapes, to check the harness itself
ROUNDS = prefill.ROUNDS  # --rounds: timing rounds a case, the order rotated each round, the median kept
MAX_REL_ERR = {torch.bfloat16: 2e-2, torch.float32: 1e-4}


def _flops_band(nq, nk, left, right, head_dim, nheads, mode):
    """FA2 count over the (query, key) pairs inside the window band only."""
    pairs = 0
    off = nk - nq
    for i in range(nq):
        lo = 0 if left < 0 else max(0, i + off - left)
        hi = nk - 1 if right < 0 else min(nk - 1, i + off + right)
        pairs += max(0, hi - lo + 1)
    return 4.0 * nheads * pairs * head_dim * {"fwd": 1.0, "bwd": 2.5, "fwd_bwd": 3.5}[mode]


def _time3(fn, inputs, dout, modes=("fwd", "bwd", "fwd_bwd")):
    """{mode: ms} of fn's forward, backward (one retained forward) and forward+backward."""
    return common.time_passes(fn, inputs, dout, DEVICE, modes)


def _timed(units: dict) -> tuple:
    """common.median_of_rounds over ROUNDS rounds: units {name: fn() -> {mode: ms}}; returns
    (medians, errors)."""
    medians, _, errors = common.median_of_rounds(units, ROUNDS)
    return medians, errors


def _check_head0(out, q, k, v, **kw):
    """Relative error of out[:, :, 0] against float64 (dense layout (B, N, H, D))."""
    sl = lambda t: t[:, :, :1].detach().double()  # noqa: E731
    ref = reference.attention(sl(q), sl(k), sl(v), softmax_scale=1 / math.sqrt(q.shape[-1]), **kw)[0]
    return common.max_rel_err(out[:, :, :1], ref)


def _row(case, provider, ms_by_mode, flops_by_mode, **extra):
    row = dict(case=case, provider=provider, **extra)
    for mode, ms in ms_by_mode.items():
        row[f"{mode}_ms"] = ms
        if flops_by_mode:
            row[f"{mode}_tflops"] = flops_by_mode[mode] / ms / 1e9
    return row


def _random_lengths(total, lo, hi, seed):
    rnd = random.Random(seed)
    lens = []
    while sum(lens) < total:
        lens.append(rnd.randint(lo, hi))
    excess = sum(lens) - total
    lens[-1] -= excess
    if lens[-1] < lo:  # fold a short tail into the previous sequence while it stays <= hi
        tail = lens.pop()
        lens[-1] += tail
        if lens[-1] > hi:
            lens.append(lens[-1] - hi)
            lens[-2] = hi
    return lens


def bench_varlen(rows, causal, total=16384, lo=128, hi=4096, seed=0):
    lens = _random_lengths(total, lo, hi, seed)
    dev, dt = DEVICE, torch.bfloat16
    cu = torch.tensor([0] + list(torch.tensor(lens).cumsum(0).tolist()), dtype=torch.int32, device=dev)
    q, k, v = (torch.randn(total, NHEADS, HEAD_DIM, device=dev, dtype=dt, requires_grad=True) for _ in range(3))
    dout = torch.randn_like(q)
    mx = max(lens)
    fn = lambda: flashtriton.flash_attn_varlen_func(q, k, v, cu, cu, mx, mx, causal=causal)  # noqa: E731
    # check: the longest sequence, head 0, against float64
    j = lens.index(mx)
    a, b = cu[j].item(), cu[j + 1].item()
    out = fn()
    err = _check_head0(out[a:b].unsqueeze(0), q[a:b].unsqueeze(0), k[a:b].unsqueeze(0), v[a:b].unsqueeze(0),
                       window_right=0 if causal else -1)
    useful = {m: sum(common.attention_flops(1, NHEADS, n, n, HEAD_DIM, causal, m) for n in lens)
              for m in ("fwd", "bwd", "fwd_bwd")}
    # dense: equal lengths, the same token count
    nseq = len(lens)
    n = total // nseq
    bq, bk, bv = (torch.randn(nseq, n, NHEADS, HEAD_DIM, device=dev, dtype=dt, requires_grad=True) for _ in range(3))
    bdo = torch.randn_like(bq)
    dfn = lambda: flashtriton.flash_attn_func(bq, bk, bv, causal=causal)  # noqa: E731
    derr = _check_head0(dfn()[:1], bq[:1], bk[:1], bv[:1], window_right=0 if causal else -1)
    dense = {m: common.attention_flops(nseq, NHEADS, n, n, HEAD_DIM, causal, m) for m in ("fwd", "bwd", "fwd_bwd")}
    ms, errors = _timed({"varlen": lambda: _time3(fn, (q, k, v), dout), "dense": lambda: _time3(dfn, (bq, bk, bv), bdo)})
    if errors:
        raise RuntimeError(f"varlen: timing failed: {errors}")
    rows.append(_row("varlen", "flashtriton varlen", ms["varlen"], useful, causal=causal, err=err,
                     shape=f"{len(lens)} seqs, {total} tokens, lengths {min(lens)}..{mx}"))
    rows.append(_row("varlen", "flashtriton dense (equal lengths)", ms["dense"], dense, causal=causal, err=derr,
                     shape=f"B={nseq} N={n}"))
    for m in ("fwd", "bwd", "fwd_bwd"):
        rows[-2][f"{m}_vs_dense"] = rows[-2][f"{m}_tflops"] / rows[-1][f"{m}_tflops"]
    rows[-2]["target"] = ">= 0.9x dense TFLOP/s"
    rows[-2]["met"] = all(rows[-2][f"{m}_vs_dense"] >= 0.9 for m in ("fwd", "bwd", "fwd_bwd"))


def bench_paged(rows, causal, total=16384, lo=128, hi=4096, seed=0, pages=(256, 16)):
    """The varlen case's batch, forward only, with the keys and values in a paged cache
    (flash_attn_varlen_func's block_table) against the same call on packed k, v."""
    lens = _random_lengths(total, lo, hi, seed)
    dev, dt = DEVICE, torch.bfloat16
    cu = torch.tensor([0] + list(torch.tensor(lens).cumsum(0).tolist()), dtype=torch.int32, device=dev)
    q, k, v = (torch.randn(total, NHEADS, HEAD_DIM, device=dev, dtype=dt) for _ in range(3))
    mx = max(lens)
    j = lens.index(mx)
    a, b = cu[j].item(), cu[j + 1].item()
    useful = {"fwd": sum(common.attention_flops(1, NHEADS, n, n, HEAD_DIM, causal, "fwd") for n in lens)}
    calls = {"packed k, v (varlen)": lambda: flashtriton.flash_attn_varlen_func(q, k, v, cu, cu, mx, mx,
                                                                                 causal=causal)}
    for page in pages:
        kc, vc, table = paged.scatter_to_pages(k, v, lens, page, generator=torch.Generator().manual_seed(seed))
        calls[f"paged, page {page}"] = (lambda kc=kc, vc=vc, table=table: flashtriton.flash_attn_varlen_func(
            q, kc, vc, cu, cu, mx, mx, causal=causal, block_table=table))
    errs = {}
    with torch.no_grad():
        for name, fn in calls.items():
            out = fn()
            errs[name] = _check_head0(out[a:b].unsqueeze(0), q[a:b].unsqueeze(0), k[a:b].unsqueeze(0),
                                      v[a:b].unsqueeze(0), window_right=0 if causal else -1)
        ms, errors = _timed({name: (lambda fn=fn: {"fwd": common.time_ms(fn, DEVICE)}) for name, fn in calls.items()})
    if errors:
        raise RuntimeError(f"paged: timing failed: {errors}")
    base = None
    for name in calls:
        rows.append(_row("paged", name, ms[name], useful, causal=causal, err=errs[name],
                         shape=f"{len(lens)} seqs, {total} tokens, lengths {min(lens)}..{mx}"))
        if base is None:
            base = rows[-1]
        else:
            rows[-1]["fwd_vs_packed"] = rows[-1]["fwd_tflops"] / base["fwd_tflops"]


def bench_window(rows, seqlen=16384, left=1024, with_flex=True):
    dev, dt = DEVICE, torch.bfloat16
    q, k, v = (torch.randn(1, seqlen, NHEADS, HEAD_DIM, device=dev, dtype=dt, requires_grad=True) for _ in range(3))
    dout = torch.randn_like(q)
    band = {m: _flops_band(seqlen, seqlen, left, 0, HEAD_DIM, NHEADS, m) for m in ("fwd", "bwd", "fwd_bwd")}
    tri = {m: _flops_band(seqlen, seqlen, -1, 0, HEAD_DIM, NHEADS, m) for m in ("fwd", "bwd", "fwd_bwd")}
    qh, kh, vh = (t.transpose(1, 2) for t in (q, k, v))  # (B, H, N, D) views for SDPA / Flex

    def check(out):
        return _check_head0(out, q, k, v, window_left=left, window_right=0)

    # every configuration checked first (Flex compiles here), then all timed in rotated rounds
    fns, errs, failed = {}, {}, []
    fns["flashtriton window"] = lambda: flashtriton.flash_attn_func(q, k, v, window_size=(left, 0))  # noqa: E731
    errs["flashtriton window"] = check(fns["flashtriton window"]())
    fns["flashtriton causal"] = lambda: flashtriton.flash_attn_func(q, k, v, causal=True)  # noqa: E731
    errs["flashtriton causal"] = _check_head0(fns["flashtriton causal"](), q, k, v, window_right=0)
    idx = torch.arange(seqlen, device=dev)
    mask = (idx[None, :] <= idx[:, None]) & (idx[None, :] >= idx[:, None] - left)  # (Nq, Nk) bool, True = attend
    sdpa = lambda: F.scaled_dot_product_attention(qh, kh, vh, attn_mask=mask).transpose(1, 2)  # noqa: E731
    try:
        errs["sdpa"] = check(sdpa())
        fns["sdpa"] = sdpa
    except Exception as exc:  # recorded, not fatal
        failed.append(dict(case="window", provider="sdpa + boolean mask", error=f"{type(exc).__name__}: {exc}"[:160]))
    if with_flex:
        try:
            from torch.nn.attention.flex_attention import create_block_mask, flex_attention
            torch._functorch.config.donated_buffer = False
            flex = torch.compile(flex_attention, dynamic=False)

            def sliding(b, h, i, j):
                return (j <= i) & (j >= i - left)
            bm = create_block_mask(sliding, None, None, seqlen, seqlen, device=dev)
            fx = lambda: flex(qh, kh, vh, block_mask=bm).transpose(1, 2)  # noqa: E731
            errs["flex"] = check(fx())
            fns["flex"] = fx
        except Exception as exc:  # recorded, not fatal
            failed.append(dict(case="window", provider="flex", error=f"{type(exc).__name__}: {exc}"[:160]))
    ms, errors = _timed({name: (lambda f=f: _time3(f, (q, k, v), dout)) for name, f in fns.items()})
    for name in ("flashtriton window", "flashtriton causal"):
        if name in errors:
            raise RuntimeError(f"window: timing {name} failed: {errors[name]}")
    r_w = _row("window", f"flashtriton window ({left}, 0)", ms["flashtriton window"], band,
               err=errs["flashtriton window"])
    r_c = _row("window", "flashtriton causal (full)", ms["flashtriton causal"], tri, err=errs["flashtriton causal"])
    for m in ("fwd", "bwd", "fwd_bwd"):
        r_w[f"{m}_vs_causal"] = r_w[f"{m}_tflops"] / r_c[f"{m}_tflops"]
    r_w["target"] = ">= 0.85x causal TFLOP/s; faster than SDPA mask and Flex"
    rows += [r_w, r_c]
    labels = {"sdpa": "sdpa + boolean mask (mem-efficient)", "flex": "flex (compiled, sliding block mask)"}
    for name, label in labels.items():
        if name in errors:
            rows.append(dict(case="window", provider=label, error=errors[name]))
        elif name in ms:
            rows.append(_row("window", label, ms[name], band, err=errs[name]))
    rows += failed
    others = [r for r in rows if r.get("case") == "window" and r["provider"].startswith(("sdpa", "flex"))
              and "fwd_ms" in r]
    r_w["met"] = (all(r_w[f"{m}_vs_causal"] >= 0.85 for m in ("fwd", "bwd", "fwd_bwd"))
                  and all(r_w[f"{m}_ms"] < o[f"{m}_ms"] for o in others for m in ("fwd", "bwd", "fwd_bwd")))


def bench_dropout_determinism(rows, batch=2, seqlen=4096):
    dev, dt = DEVICE, torch.bfloat16
    q, k, v = (torch.randn(batch, seqlen, NHEADS, HEAD_DIM, device=dev, dtype=dt, requires_grad=True)
               for _ in range(3))
    dout = torch.randn_like(q)
    shape = f"B={batch} H={NHEADS} N={seqlen} D={HEAD_DIM}"
    for causal in (False, True):
        fl = {m: common.attention_flops(batch, NHEADS, seqlen, seqlen, HEAD_DIM, causal, m)
              for m in ("fwd", "bwd", "fwd_bwd")}
        base_fn = lambda: flashtriton.flash_attn_func(q, k, v, causal=causal)  # noqa: E731
        err = _check_head0(base_fn(), q, k, v, window_right=0 if causal else -1)
        # dropout: checked against the reference with the very keep-mask the kernel drew
        drop_fn = lambda: flashtriton.flash_attn_func(q, k, v, dropout_p=0.1, causal=causal)  # noqa: E731
        torch.manual_seed(1)
        out, _, probs = flashtriton.flash_attn_func(q, k, v, dropout_p=0.1, causal=causal, return_attn_probs=True)
        keep = probs[:, :1] >= 0  # (B, 1, Nq, Nk): S_dmask's sign carries the keep bit
        sl = lambda t: t[:, :, :1].detach().double()  # noqa: E731
        ref = reference.attention(sl(q), sl(k), sl(v), softmax_scale=1 / math.sqrt(HEAD_DIM), dropout_p=0.1,
                                  dropout_mask=keep, window_right=0 if causal else -1)[0]
        derr = common.max_rel_err(out[:, :, :1], ref)
        del probs, keep
        det_fn = lambda: flashtriton.flash_attn_func(q, k, v, causal=causal, deterministic=True)  # noqa: E731
        ms, errors = _timed({
            "base": lambda: _time3(base_fn, (q, k, v), dout),
            "drop": lambda: _time3(drop_fn, (q, k, v), dout),
            "det": lambda: _time3(det_fn, (q, k, v), dout, modes=("bwd", "fwd_bwd"))})
        if errors:
            raise RuntimeError(f"dropout / deterministic: timing failed: {errors}")
        base, drop, det = ms["base"], ms["drop"], ms["det"]
        rows.append(_row("dropout", "p = 0 (default backward)", base, fl, causal=causal, shape=shape, err=err))
        r = _row("dropout", "p = 0.1", drop, None, causal=causal, shape=shape, err=derr)
        for m in ("fwd", "bwd", "fwd_bwd"):
            r[f"{m}_vs_base"] = drop[m] / base[m]
        r["target"] = "fwd+bwd <= 1.15x time of p = 0"
        r["met"] = r["fwd_bwd_vs_base"] <= 1.15
        rows.append(r)
        r = _row("deterministic", "deterministic=True", det, None, causal=causal, shape=shape)
        for m in det:
            r[f"{m}_vs_base"] = det[m] / base[m]
        rows.append(r)


def _with_tf32(fn, tf32: str):
    """fn() with FLASHTRITON_ALLOW_TF32 set to tf32 ("0", "1" or "x3") for the call, restored after."""
    old = os.environ.get("FLASHTRITON_ALLOW_TF32")
    os.environ["FLASHTRITON_ALLOW_TF32"] = tf32
    try:
        return fn()
    finally:
        if old is None:
            os.environ.pop("FLASHTRITON_ALLOW_TF32")
        else:
            os.environ["FLASHTRITON_ALLOW_TF32"] = old


def bench_fp32(rows, batch=2, seqlen=4096):
    dev = DEVICE
    shape = f"B={batch} H={NHEADS} N={seqlen} D={HEAD_DIM}"
    fl = {m: common.attention_flops(batch, NHEADS, seqlen, seqlen, HEAD_DIM, False, m) for m in ("fwd", "bwd", "fwd_bwd")}
    units, errs, order = {}, {}, []
    for dt, tf32 in ((torch.bfloat16, "0"), (torch.float32, "0"), (torch.float32, "x3"), (torch.float32, "1")):
        q, k, v = (torch.randn(batch, seqlen, NHEADS, HEAD_DIM, device=dev, dtype=dt, requires_grad=True)
                   for _ in range(3))
        dout = torch.randn_like(q)
        fn = lambda q=q, k=k, v=v: flashtriton.flash_attn_func(q, k, v)  # noqa: E731
        knob = f" (FLASHTRITON_ALLOW_TF32={tf32})" if tf32 != "0" else ""
        name = "flashtriton " + str(dt).replace("torch.", "") + knob
        errs[name] = _with_tf32(lambda: _check_head0(fn(), q, k, v), tf32)
        units[name] = lambda fn=fn, q=q, k=k, v=v, dout=dout, tf32=tf32: _with_tf32(
            lambda: _time3(fn, (q, k, v), dout), tf32)
        order.append(name)
        if dt == torch.float32 and tf32 == "0":
            qh, kh, vh = (t.transpose(1, 2) for t in (q, k, v))
            sd = lambda qh=qh, kh=kh, vh=vh: F.scaled_dot_product_attention(qh, kh, vh).transpose(1, 2)  # noqa: E731
            name = "sdpa float32 (default backend)"
            errs[name] = _check_head0(sd(), q, k, v)
            units[name] = lambda sd=sd, q=q, k=k, v=v, dout=dout: _time3(sd, (q, k, v), dout)
            order.append(name)
    ms, errors = _timed(units)
    if errors:
        raise RuntimeError(f"float32: timing failed: {errors}")
    for name in order:
        rows.append(_row("float32", name, ms[name], fl, shape=shape, err=errs[name]))


def markdown(rows, env) -> str:
    lines = [f"# Feature benchmark ({env['device']}, torch {env['torch']}, triton {env['triton']}, {env['date']})",
             "", "bf16, D=128, H=16 unless stated. TFLOP/s count useful FLOPs (FA2 paper's count; for windows,",
             "only the pairs inside the band). Times: median of triton.testing.do_bench, then the median of "
             f"{env.get('rounds', 1)} timing round(s), the configurations of a case in rotated order each round.", ""]
    cols = ["case", "provider", "causal", "shape", "fwd_ms", "bwd_ms", "fwd_bwd_ms", "fwd_tflops", "bwd_tflops",
            "fwd_bwd_tflops", "err"]
    extra = [c for c in ("fwd_vs_dense", "bwd_vs_dense", "fwd_bwd_vs_dense", "fwd_vs_causal", "bwd_vs_causal",
                         "fwd_bwd_vs_causal", "fwd_vs_packed", "fwd_vs_base", "bwd_vs_base", "fwd_bwd_vs_base", "met", "error")
             if any(c in r for r in rows)]
    fmt_rows = []
    for r in rows:
        f = dict(r)
        for c in cols + extra:
            if isinstance(f.get(c), float):
                f[c] = f"{f[c]:.2e}" if c == "err" else (f"{f[c]:.3f}" if c.endswith("_ms") or "_vs_" in c
                                                          else f"{f[c]:.1f}")
        fmt_rows.append(f)
    lines.append(common.markdown_table(fmt_rows, cols + extra))
    return "\n".join(lines) + "\n"


def plot(rows, path):
    """One panel per case: forward, backward and forward+backward milliseconds of every
    configuration, side by side (lower is better)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    cases = list(dict.fromkeys(r["case"] for r in rows if any(f"{m}_ms" in r for m in ("fwd", "bwd", "fwd_bwd"))))
    fig, axes = plt.subplots(1, len(cases), figsize=(5.2 * len(cases), 4.6), squeeze=False)
    for ax, case in zip(axes[0], cases):
        sel = [r for r in rows if r["case"] == case and any(f"{m}_ms" in r for m in ("fwd", "bwd", "fwd_bwd"))]
        labels = [r["provider"] + ("" if r.get("causal") in (None, "") else (" causal" if r["causal"] else ""))
                  for r in sel]
        for j, mode in enumerate(("fwd", "bwd", "fwd_bwd")):
            xs = [i + (j - 1) * 0.27 for i in range(len(sel))]
            ax.bar(xs, [r.get(f"{mode}_ms", 0) for r in sel], width=0.27, label=mode)
        ax.set_xticks(range(len(sel)))
        ax.set_xticklabels(labels, rotation=35, ha="right", fontsize=7)
        ax.set_ylabel("ms (lower is better)")
        ax.set_yscale("log")
        ax.set_title(case, fontsize=10)
        ax.grid(alpha=0.3, axis="y")
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m flashtriton.bench.features", description=__doc__)
    ap.add_argument("--out", default=None)
    ap.add_argument("--cases", nargs="+", default=["varlen", "window", "dropout", "float32"])
    ap.add_argument("--no-flex", action="store_true")
    ap.add_argument("--rounds", type=int, default=prefill.ROUNDS,
                    help="timing rounds a case, the configurations in rotated order each round, the median kept "
                         "(prefill.ROUNDS)")
    ap.add_argument("--smoke", action="store_true", help="tiny shapes on the CPU: checks the harness itself")
    ap.add_argument("--replot", metavar="JSON", help="only redraw features.{md,png} next to this results file")
    args = ap.parse_args(argv)
    if args.replot:
        import json
        from pathlib import Path
        data = json.loads(Path(args.replot).read_text())
        (Path(args.replot).parent / "features.md").write_text(markdown(data["rows"], data["environment"]))
        plot(data["rows"], Path(args.replot).parent / "features.png")
        return
    global DEVICE, HEAD_DIM, NHEADS, ROUNDS
    if args.rounds < 1:
        raise ValueError(f"--rounds: must be >= 1, got {args.rounds}")
    ROUNDS = args.rounds
    if args.smoke:
        DEVICE, HEAD_DIM, NHEADS = "cpu", 32, 2
        sizes = dict(varlen=(512, 32, 128), window=(256, 32), batch_n=(1, 128))
    elif not torch.cuda.is_available():
        raise SystemExit("the feature benchmark needs a CUDA GPU (or --smoke)")
    else:
        sizes = dict(varlen=(16384, 128, 4096), window=(16384, 1024), batch_n=(2, 4096))
    env = common.environment(DEVICE)
    env["rounds"] = ROUNDS
    rows: list = []
    out = common.results_dir(DEVICE, args.out)

    def save():
        common.write_json(out / "features.json", env, rows)
        (out / "features.md").write_text(markdown(rows, env))
        plot(rows, out / "features.png")

    for case in args.cases:
        if case == "varlen":
            bench_varlen(rows, False, *sizes["varlen"])
            save()
            bench_varlen(rows, True, *sizes["varlen"])
        elif case == "paged":
            bench_paged(rows, False, *sizes["varlen"])
            save()
            bench_paged(rows, True, *sizes["varlen"])
        elif case == "window":
            bench_window(rows, *sizes["window"], with_flex=not args.no_flex)
        elif case == "dropout":
            bench_dropout_determinism(rows, *sizes["batch_n"])
        elif case == "float32":
            bench_fp32(rows, *sizes["batch_n"])
        else:
            raise SystemExit(f"--cases: unknown case {case!r}")
        save()
        shown = (case, "deterministic") if case == "dropout" else (case,)
        print(markdown([r for r in rows if r.get("case") in shown], env), flush=True)
    print(f"results: {out}/features.md")


if __name__ == "__main__":
    main()
