"""Session 50: packed backwards with a sliding window on the fused Gluon kernel's VARLEN WINDOW variant against the
route before it (bwd.py), bf16, 16k tokens in random lengths lo..hi, windows (1024, 0) and (256, 256) (D = 128,
H = 16) and (1024, 0) at D = 64, H = 32, five rotated rounds (bench.common.median_of_rounds), the backward alone
(common.time_passes' "bwd"), plans on. Switched by policy.GLUON_BWD_FUSED_VARLEN_MIN_N["window"] ({D: 1} on, {} off).
Each configuration's gradients compared first with the other route's (max relative difference, longest sequence).
TFLOP/s count the band's pairs only (common.attention_flops' window form when present, else the dense count scaled
by the band's share computed here).
Prediction (bench/NOTES.md "Session 50"): the dense fused WINDOW backward ran 1.27-1.50x the Triton kernels from 2k
(session 28); packed, the route before is bwd.py without a launch plan: 1.3-1.8x.
Rule (pre-registered): route kind "window" at D = 128 from the smallest max_seqlen of a range from which every
longer range has on / off >= 1.00 (median) for both windows, every round >= 0.98; D = 64 if its one range does."""
import json
import os
import sys

import torch

import flashtriton
from flashtriton.bench import common
from flashtriton.bench.features import _random_lengths
from flashtriton.launchers import plans, policy

RANGES = [(256, 1024), (512, 2048), (128, 4096), (1024, 8192)]
WINDOWS = [(1024, 0), (256, 256)]


def band_pairs(n, left, right):
    """Visible (row, key) pairs of one sequence of n under the window (Nq = Nk = n)."""
    i = torch.arange(n)[:, None]
    j = torch.arange(n)[None, :]
    return int(((j >= i - left) & (j <= i + right)).sum())


def case(lo, hi, window, d, h):
    lens = _random_lengths(16384, lo, hi, 0)
    cu = torch.tensor([0] + torch.tensor(lens).cumsum(0).tolist(), dtype=torch.int32, device="cuda")
    q, k, v = (torch.randn(16384, h, d, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    dout = torch.randn_like(q)
    mx = max(lens)
    # the backward's FLOPs of the band: 2.5x the forward's 4 * pairs * D a head (the FA2 count's ratio)
    flops = sum(2.5 * 4 * band_pairs(n, *window) * d * h for n in lens)
    fn = lambda: flashtriton.flash_attn_varlen_func(q, k, v, cu, cu, mx, mx, window_size=window)  # noqa: E731
    j = lens.index(mx)
    a, b = cu[j].item(), cu[j + 1].item()
    grads, units = {}, {}
    for name, table in (("gluon", {d: 1}), ("before", {})):
        def switched(table=table):
            policy.GLUON_BWD_FUSED_VARLEN_MIN_N = {"window": table}
            return fn()
        policy.GLUON_BWD_FUSED_VARLEN_MIN_N = {"window": table}
        plans.clear()
        out = fn()
        grads[name] = [g[a:b].float() for g in torch.autograd.grad(out, (q, k, v), dout)]
        units[name] = lambda s=switched: common.time_passes(s, (q, k, v), dout, "cuda", ("bwd",))
    diff = {n: ((x - y).abs().max() / y.abs().max()).item()
            for n, x, y in zip(("dq", "dk", "dv"), grads["gluon"], grads["before"])}
    med, reads, errors = common.median_of_rounds(units, 5)
    row = dict(lo=lo, hi=hi, window=window, d=d, h=h, max=mx, errors=errors, rel_diff=diff,
               **{f"{n}_ms": med[n]["bwd"] for n in med}, **{f"{n}_rounds": reads[n]["bwd"] for n in reads})
    for n in med:
        row[f"{n}_tflops"] = flops / med[n]["bwd"] / 1e9
    if "gluon" in med and "before" in med:
        row["ratio"] = row["gluon_tflops"] / row["before_tflops"]
        row["ratio_rounds"] = [o / g for g, o in zip(reads["gluon"]["bwd"], reads["before"]["bwd"])]
    print(f"D={d:3d} {lo:5d}..{hi:5d} window={window!s:11} gluon {row.get('gluon_tflops', 0):6.1f}  before "
          f"{row.get('before_tflops', 0):6.1f}  ratio {row.get('ratio', 0):.3f} (rounds "
          f"{min(row.get('ratio_rounds', [0])):.3f}..)  diff {max(diff.values()):.2e}  {errors or ''}", flush=True)
    return row


def main():
    res = []
    for lo, hi in RANGES:
        for window in WINDOWS:
            res.append(case(lo, hi, window, 128, 16))
    res.append(case(128, 4096, (1024, 0), 64, 32))
    with open(os.path.join(os.environ.get("OUT", "/tmp"), "bwd_varlen_window_ab.json"), "w") as fh:
        json.dump(res, fh, indent=1)


if __name__ == "__main__":
    sys.exit(main())
