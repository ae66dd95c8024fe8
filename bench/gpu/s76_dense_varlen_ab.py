"""Session 76: ragged dense calls (flash_attn_func, Nq = Nk not a multiple of 128) on the packed Gluon kernels
(policy.DENSE_AS_VARLEN on, launchers/dense_varlen.py) against the route before (off: the Triton kernels), with SDPA's
CUDNN_ATTENTION on the same inputs for scale; bf16, 16k tokens a case, forward and forward + backward, three rotated
rounds (bench.common.median_of_rounds), plans on. Batch 0, head 0 of each arm checked against float64 first.
Prediction (bench/NOTES.md "Session 76", before the run): the packed kernels ran 1.2-1.9x the Triton varlen kernels
in session 51 and ~0.9-1.0x the dense Gluon kernels at equal token counts (features, varlen row); the dense Triton
kernels at ragged lengths run like the Triton varlen ones, so on / off ~1.2-1.6x forward and ~1.2-1.5x forward +
backward at D = 128, less at D = 64.
Rule (pre-registered): keep the route on for a (pass, D) if every measured case has median on / off >= 1.00 and every
round >= 0.98; else restrict it to the cases that pass.
    PYTHONPATH=src python bench/gpu/s76_dense_varlen_ab.py OUT_JSON
    S76_CASES=windows|sweep128|sweep64 PYTHONPATH=src python bench/gpu/s76_dense_varlen_ab.py OUT_JSON  (windows)
    PYTHONPATH=src python bench/gpu/s76_dense_varlen_ab.py --render OUT_JSON     (no GPU: OUT_JSON's .md and .png)"""
import json
import os
import sys

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

import flashtriton
from flashtriton.bench import common
from flashtriton.launchers import plans, policy

# D, H, N (B = 16384 // N), causal, window ((left, 0) or None)
CASES = [(128, 16, 1000, False), (128, 16, 1000, True), (128, 16, 2100, False), (128, 16, 2100, True),
         (128, 16, 4000, False), (128, 16, 4000, True), (128, 16, 700, True), (64, 32, 2100, False),
         (64, 32, 2100, True)]
# S76_CASES=windows (after session 76's run): ragged sliding windows, which that run did not time
WINDOW_CASES = [(128, 16, 2100, False, (256, 0)), (128, 16, 4000, False, (1024, 0)), (64, 32, 4000, False, (256, 0))]
# S76_CASES=sweep128 / sweep64 (session 79): the window-width sweep that decides a width-aware window entry
# (most telling first, so a run cut by its deadline still brackets the line: session 78 timed (1024, 0) at 4000)
SWEEP_CASES = {"sweep128": [(128, 16, n, False, (left, 0)) for n, left in
                            ((4000, 2048), (8000, 1024), (8000, 2048), (4000, 512), (8000, 512), (2100, 512),
                             (2100, 1024), (4000, 256), (8000, 256), (4000, 1024), (2100, 256))],
               "sweep64": [(64, 32, n, False, (left, 0)) for n in (4000, 8000) for left in (512, 1024, 2048)]}
# "on": every ragged D = 64 / 128 call routed (the A/B's arm; the library's table is policy.DENSE_AS_VARLEN)
ALL_ON = {kernel: {kind: {128: 1, 64: 1} for kind in ("plain", "causal", "window")} for kernel in ("fwd", "bwd")}


def case(d, h, n, causal, window=None):
    b = 16384 // n
    mask = dict(window_size=window) if window is not None else dict(causal=causal)
    q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    dout = torch.randn_like(q)
    scale = d ** -0.5
    ref_kw = dict(softmax_scale=scale, window_left=window[0] if window else -1,
                  window_right=0 if causal or window else -1)
    refs = common.head0_grad_refs(q.detach(), k.detach(), v.detach(), dout, **ref_kw)
    table = policy.DENSE_AS_VARLEN
    units, checks = {}, {}
    for name in ("on", "off", "cudnn"):
        def call(name=name):
            if name == "cudnn":
                if window is not None:
                    raise NotImplementedError("cuDNN through SDPA: no sliding-window mask without a dense bias")
                with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                    return torch.nn.functional.scaled_dot_product_attention(
                        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=causal).transpose(1, 2)
            policy.DENSE_AS_VARLEN = ALL_ON if name == "on" else {}
            return flashtriton.flash_attn_func(q, k, v, **mask)
        plans.clear()
        try:
            out = call()
            grads = torch.autograd.grad(out, (q, k, v), dout)
            ok_f, text_f = common.head0_fwd_check(q.detach(), k.detach(), v.detach(), out.detach(), None,
                                                  **ref_kw)
            ok_b, text_b = common.head0_grad_check(grads, refs)
            checks[name] = f"{'ok' if ok_f and ok_b else 'WRONG'}: {text_f}; {text_b}"
        except Exception as exc:  # noqa: BLE001 - recorded, the other arms still run
            checks[name] = common.short_error(exc)
            continue
        units[name] = lambda call=call: common.time_passes(call, (q, k, v), dout, "cuda", modes=("fwd", "fwd_bwd"))
    med, reads, errors = common.median_of_rounds(units, 3)
    policy.DENSE_AS_VARLEN = table
    row = dict(d=d, h=h, n=n, b=b, causal=causal, window=window, checks=checks, errors=errors)
    # windows: the band's FLOPs only (row i sees min(i, left) + 1 keys), as the features bench counts them
    band = sum(min(i, window[0]) + 1 for i in range(n)) if window is not None else None
    for mode in ("fwd", "fwd_bwd"):
        flops = common.attention_flops(b, h, n, n, d, causal, mode) if band is None else \
            4.0 * b * h * band * d * {"fwd": 1.0, "fwd_bwd": 3.5}[mode]
        for name in med:
            row[f"{name}_{mode}_ms"] = med[name][mode]
            row[f"{name}_{mode}_tflops"] = flops / med[name][mode] / 1e9
        if "on" in med and "off" in med:
            row[f"{mode}_ratio"] = med["off"][mode] / med["on"][mode]
            row[f"{mode}_ratio_rounds"] = [o / g for g, o in zip(reads["on"][mode], reads["off"][mode])]
        if "on" in med and "cudnn" in med:
            row[f"{mode}_vs_cudnn"] = med["cudnn"][mode] / med["on"][mode]
    return row


def render(path):
    """The Markdown table and the PNG (TFLOP/s of on / off / cuDNN a case, one panel a pass) of a run's JSON."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    with open(path) as f:
        run = json.load(f)
    env, rows = run["env"], run["rows"]
    lines = [f"Ragged dense calls, packed Gluon route on / off (session 76): {env['device']}, torch {env['torch']}, "
             f"triton {env['triton']}, {env['date']}; bf16, 16k tokens (B = 16384 // N), Nq = Nk = N, TFLOP/s "
             "(FlashAttention-2 count; a window: its band only), medians of three rotated rounds.", "",
             "| D | H | N | B | mask | pass | on | off | cuDNN | on / off (rounds) | on / cuDNN |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    def cell(r, key, fmt):
        return format(r[key], fmt) if key in r else "-"
    for r in rows:
        mask = f"window {tuple(r['window'])}" if r.get("window") else ("yes" if r["causal"] else "no")
        for m in ("fwd", "fwd_bwd"):
            rounds = ", ".join(f"{x:.2f}" for x in r.get(f"{m}_ratio_rounds", []))
            lines.append(f"| {r['d']} | {r['h']} | {r['n']} | {r['b']} | {mask} | {m} | "
                         f"{cell(r, f'on_{m}_tflops', '.0f')} | {cell(r, f'off_{m}_tflops', '.0f')} | "
                         f"{cell(r, f'cudnn_{m}_tflops', '.0f')} | {cell(r, f'{m}_ratio', '.3f')} ({rounds}) | "
                         f"{cell(r, f'{m}_vs_cudnn', '.2f')} |")
    base = path[:-5] if path.endswith(".json") else path
    with open(base + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")
    fig, axes = plt.subplots(1, 2, figsize=(12, 4), sharey=True)
    labels = [f"D{r['d']} N{r['n']}{' c' if r['causal'] else ''}{' w' if r.get('window') else ''}" for r in rows]
    x = range(len(rows))
    for ax, m in zip(axes, ("fwd", "fwd_bwd")):
        for i, (name, color) in enumerate((("on", "C0"), ("off", "C1"), ("cudnn", "C2"))):
            ax.bar([j + (i - 1) * 0.27 for j in x], [r.get(f"{name}_{m}_tflops", 0) for r in rows], 0.27,
                   label=name, color=color)
        ax.set_xticks(list(x), labels, rotation=45, ha="right", fontsize=8)
        ax.set_title(f"{m}, bf16, {env['device']}")
        ax.set_ylabel("TFLOP/s")
    axes[0].legend()
    fig.tight_layout()
    fig.savefig(base + ".png", dpi=110)


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--render":
        render(sys.argv[2])
        return
    rows, which = [], os.environ.get("S76_CASES", "")
    for c in WINDOW_CASES if which == "windows" else SWEEP_CASES.get(which, CASES):
        row = case(*c)
        rows.append(row)
        print(json.dumps({k: (round(v, 3) if isinstance(v, float) else v) for k, v in row.items()
                          if not k.endswith("_rounds")}), flush=True)
        if len(sys.argv) > 1:  # after every case, so a run cut by its deadline keeps what it measured
            with open(sys.argv[1], "w") as f:
                json.dump(dict(env=common.environment("cuda"), rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
