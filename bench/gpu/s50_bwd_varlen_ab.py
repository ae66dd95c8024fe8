"""Session 50: the packed (varlen) backward on the fused Gluon kernel's VARLEN variant against the route before it
(bwd_ws_varlen.py non-causal, bwd.py causal), bf16, 16k tokens in random lengths lo..hi (D = 128, H = 16; and
D = 64, H = 32 at two ranges), in rotated rounds (bench.common.median_of_rounds). The route is switched by
policy.GLUON_BWD_FUSED_VARLEN_MIN_N ({D: 1} on, {} off). Timed: the backward alone (common.time_passes' "bwd":
one retained forward, autograd.grad over it), plans on as in a user's process. Each configuration's gradients are
checked first against the other route's (max relative difference of dq / dk / dv, longest sequence).

Prediction (bench/NOTES.md "Session 50", written before the run): the dense fused Gluon backward runs 16k tokens at
~1.20-1.35x bwd_ws.py / bwd.py; the packed batch's ragged tiles (~6% of the work past the sequences' ends) and one
masked key block a sequence cost a few percent: on / off 1.15-1.30x plain, 1.25-1.45x causal at 128..4096.
Rule (pre-registered): a kind's table entry is the smallest max_seqlen of a range from which every longer range has
on / off >= 1.00 in every round; D = 64 routed only if both its ranges pass."""
import json
import os
import sys

import torch

import flashtriton
from flashtriton.bench import common
from flashtriton.bench.features import _random_lengths
from flashtriton.launchers import plans, policy

RANGES = [(64, 256), (128, 512), (256, 1024), (512, 2048), (128, 4096), (1024, 8192)]
RANGES_D64 = [(256, 1024), (128, 4096)]


def case(lo, hi, causal, d, h):
    lens = _random_lengths(16384, lo, hi, 0)
    cu = torch.tensor([0] + torch.tensor(lens).cumsum(0).tolist(), dtype=torch.int32, device="cuda")
    q, k, v = (torch.randn(16384, h, d, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    dout = torch.randn_like(q)
    mx = max(lens)
    flops = sum(common.attention_flops(1, h, n, n, d, causal, "bwd") for n in lens)
    fn = lambda: flashtriton.flash_attn_varlen_func(q, k, v, cu, cu, mx, mx, causal=causal)  # noqa: E731
    j = lens.index(mx)
    a, b = cu[j].item(), cu[j + 1].item()
    grads, units = {}, {}
    for name, table in (("gluon", {d: 1}), ("before", {})):
        def switched(table=table):
            policy.GLUON_BWD_FUSED_VARLEN_MIN_N = {"plain": table, "causal": table}
            return fn()
        policy.GLUON_BWD_FUSED_VARLEN_MIN_N = {"plain": table, "causal": table}
        plans.clear()
        out = fn()
        grads[name] = [g[a:b].float() for g in torch.autograd.grad(out, (q, k, v), dout)]
        units[name] = lambda s=switched: common.time_passes(s, (q, k, v), dout, "cuda", ("bwd",))
    diff = {n: ((x - y).abs().max() / y.abs().max()).item()
            for n, x, y in zip(("dq", "dk", "dv"), grads["gluon"], grads["before"])}
    med, reads, errors = common.median_of_rounds(units, 5)
    row = dict(lo=lo, hi=hi, causal=causal, d=d, h=h, seqs=len(lens), max=mx, errors=errors, rel_diff=diff,
               **{f"{n}_ms": med[n]["bwd"] for n in med}, **{f"{n}_rounds": reads[n]["bwd"] for n in reads})
    for n in med:
        row[f"{n}_tflops"] = flops / med[n]["bwd"] / 1e9
    if "gluon" in med and "before" in med:
        row["ratio"] = row["gluon_tflops"] / row["before_tflops"]
        row["ratio_rounds"] = [o / g for g, o in zip(reads["gluon"]["bwd"], reads["before"]["bwd"])]
    print(f"D={d:3d} {lo:5d}..{hi:5d} causal={causal!s:5} seqs {len(lens):3d}  gluon "
          f"{row.get('gluon_tflops', 0):6.1f}  before {row.get('before_tflops', 0):6.1f}  "
          f"ratio {row.get('ratio', 0):.3f} (rounds {min(row.get('ratio_rounds', [0])):.3f}..)  "
          f"diff {max(diff.values()):.2e}  {errors or ''}", flush=True)
    return row


def main():
    res = []
    for lo, hi in RANGES:
        for causal in (False, True):
            res.append(case(lo, hi, causal, 128, 16))
    for lo, hi in RANGES_D64:
        for causal in (False, True):
            res.append(case(lo, hi, causal, 64, 32))
    out = os.environ.get("OUT", "/tmp")
    with open(os.path.join(out, "bwd_varlen_ab.json"), "w") as fh:
        json.dump(res, fh, indent=1)


if __name__ == "__main__":
    sys.exit(main())
