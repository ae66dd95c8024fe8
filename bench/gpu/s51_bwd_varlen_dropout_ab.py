"""Session 51: the packed (varlen) dropout backward on the fused Gluon kernel's VARLEN DROPOUT variant against the
route before it (bwd_ws_varlen.py / bwd.py with dropout), bf16, p = 0.1, 16k tokens in random lengths lo..hi (D = 128,
H = 16; D = 64, H = 32 at 128..4096), five rotated rounds (bench.common.median_of_rounds). Switched by
policy.GLUON_BWD_FUSED_VARLEN_DROPOUT ({D} on, {} off; GLUON_BWD_FUSED_VARLEN_MIN_N lowered to 1 in both). A third
arm, the same fused route at p = 0, gives the dropout's cost. Timed: the backward alone (common.time_passes' "bwd"),
plans on as in a user's process. Gradients of the two dropout arms compared first under one seed (max relative
difference of dq / dk / dv on the longest sequence).

Prediction (bench/NOTES.md "Session 51", before the run): the fused VARLEN backward ran 1.13x (plain) / 1.44x
(causal) the old route at 128..4096 without dropout; the fused DROPOUT's cost (dense: 1.08x p = 0 at 4k) is below
the old kernels' (bwd.py's per-tile hash): on / off 1.15-1.5x plain, 1.3-1.7x causal at D = 128, 1.1-1.4x at D = 64;
the dropout costs 1.05-1.15x the fused p = 0 backward.
Rule (pre-registered): route a head dim (GLUON_BWD_FUSED_VARLEN_DROPOUT) if every measured range, plain and causal,
has median on / off >= 1.00 and every round >= 0.98."""
import json
import os
import sys

import torch

import flashtriton
from flashtriton.bench import common
from flashtriton.bench.features import _random_lengths
from flashtriton.launchers import plans, policy

P = 0.1
CASES = [(128, 16, 512, 2048), (128, 16, 128, 4096), (128, 16, 1024, 8192), (64, 32, 128, 4096)]


def case(d, h, lo, hi, causal):
    lens = _random_lengths(16384, lo, hi, 0)
    cu = torch.tensor([0] + torch.tensor(lens).cumsum(0).tolist(), dtype=torch.int32, device="cuda")
    q, k, v = (torch.randn(16384, h, d, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    dout = torch.randn_like(q)
    mx = max(lens)
    flops = sum(common.attention_flops(1, h, n, n, d, causal, "bwd") for n in lens)
    j = lens.index(mx)
    a, b = cu[j].item(), cu[j + 1].item()
    policy.GLUON_BWD_FUSED_VARLEN_MIN_N = {"plain": {d: 1}, "causal": {d: 1}}
    grads, units = {}, {}
    for name, routed, p in (("fused", frozenset({d}), P), ("before", frozenset(), P), ("nodrop", frozenset({d}), 0.0)):
        def fn(routed=routed, p=p):
            policy.GLUON_BWD_FUSED_VARLEN_DROPOUT = routed
            return flashtriton.flash_attn_varlen_func(q, k, v, cu, cu, mx, mx, dropout_p=p, causal=causal)
        plans.clear()
        torch.manual_seed(7)
        out = fn()
        grads[name] = [g[a:b].float() for g in torch.autograd.grad(out, (q, k, v), dout)]
        units[name] = lambda fn=fn: common.time_passes(fn, (q, k, v), dout, "cuda", ("bwd",))
    diff = {n: ((x - y).abs().max() / y.abs().max()).item()
            for n, x, y in zip(("dq", "dk", "dv"), grads["fused"], grads["before"])}
    med, reads, errors = common.median_of_rounds(units, 5)
    row = dict(d=d, h=h, lo=lo, hi=hi, causal=causal, seqs=len(lens), max=mx, p=P, errors=errors, rel_diff=diff,
               **{f"{n}_ms": med[n]["bwd"] for n in med}, **{f"{n}_rounds": reads[n]["bwd"] for n in reads})
    for n in med:
        row[f"{n}_tflops"] = flops / med[n]["bwd"] / 1e9
    if "fused" in med and "before" in med:
        row["ratio"] = med["before"]["bwd"] / med["fused"]["bwd"]
        row["ratio_rounds"] = [o / g for g, o in zip(reads["fused"]["bwd"], reads["before"]["bwd"])]
    if "fused" in med and "nodrop" in med:
        row["dropout_cost"] = med["fused"]["bwd"] / med["nodrop"]["bwd"]
    print(f"D={d:3d} {lo:5d}..{hi:5d} causal={causal!s:5} fused {row.get('fused_tflops', 0):6.1f}  before "
          f"{row.get('before_tflops', 0):6.1f}  ratio {row.get('ratio', 0):.3f} (rounds "
          f"{min(row.get('ratio_rounds', [0])):.3f}..)  p=0 {row.get('nodrop_tflops', 0):6.1f} "
          f"cost {row.get('dropout_cost', 0):.3f}  diff {max(diff.values()):.2e}  {errors or ''}", flush=True)
    return row


def main():
    res = []
    for d, h, lo, hi in CASES:
        for causal in (False, True):
            res.append(case(d, h, lo, hi, causal))
    with open(os.path.join(os.environ.get("OUT", "/tmp"), "bwd_varlen_dropout_ab.json"), "w") as fh:
        json.dump(res, fh, indent=1)


if __name__ == "__main__":
    sys.exit(main())
