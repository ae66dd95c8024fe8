"""Session 49, calls 4-5: the Gluon VARLEN forward's VARLEN_FAST (unmasked whole peel for plain calls, full blocks' O by
TMA) and plain longest-first order (forward_gluon.VARLEN_FAST, VARLEN_PLAIN_ORDER) against the kernel without them
("v1", call 3's) and the route before the kernel ("before"), bf16, D = 128, H = 16, 16k tokens in random lengths, five
rotated rounds. Rule written before call 4: keep both on if the median of v2 / v1 >= 1.00 at 128..4096 (the feature
case's lengths), plain and causal, and no range reads below 0.98. Call 5 (`--split`): "fast" (VARLEN_FAST alone) and
"order" (the plain order alone) too; rule written before it: plain calls take the config with the highest median at
128..4096 unless it reads more than 2% below v1 at another range; causal calls keep VARLEN_FAST if fast >= v1 at
128..4096 and >= 0.98x at the others. Writes $OUT/varlen_fast_ab.json."""
import json
import os
import sys

import torch

import flashtriton
from flashtriton.bench import common
from flashtriton.bench.features import _check_head0, _random_lengths
from flashtriton.launchers import forward_gluon, policy

H, D = 16, 128
RANGES = [(128, 4096), (512, 2048), (1024, 8192), (256, 1024)]
ON = {"plain": {128: 1}, "causal": {128: 1}}
CONFIGS = {"v2": (ON, True, True), "v1": (ON, False, False), "before": ({}, True, True)}


def main():
    res = []
    if "--split" in sys.argv:
        CONFIGS.update({"fast": (ON, True, False), "order": (ON, False, True)})
        RANGES[:] = RANGES[:3]
    for lo, hi in RANGES:
        for causal in (False, True):
            lens = _random_lengths(16384, lo, hi, 0)
            cu = torch.tensor([0] + torch.tensor(lens).cumsum(0).tolist(), dtype=torch.int32, device="cuda")
            q, k, v = (torch.randn(16384, H, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
            mx = max(lens)
            flops = sum(common.attention_flops(1, H, n, n, D, causal, "fwd") for n in lens)
            j = lens.index(mx)
            a, b = cu[j].item(), cu[j + 1].item()
            units, errs = {}, {}
            for name, (table, fast, order) in CONFIGS.items():
                def fn(table=table, fast=fast, order=order):
                    policy.GLUON_FWD_VARLEN_MIN_N = table
                    forward_gluon.VARLEN_FAST = fast
                    forward_gluon.VARLEN_PLAIN_ORDER = order
                    return flashtriton.flash_attn_varlen_func(q, k, v, cu, cu, mx, mx, causal=causal)
                with torch.no_grad():
                    out = fn()
                errs[name] = round(_check_head0(out[a:b].unsqueeze(0), q[a:b].unsqueeze(0), k[a:b].unsqueeze(0),
                                                v[a:b].unsqueeze(0), window_right=0 if causal else -1), 6)
                units[name] = lambda fn=fn: {"fwd": common.time_ms(fn, "cuda")}
            with torch.no_grad():
                med, reads, errors = common.median_of_rounds(units, 5)
            row = dict(lo=lo, hi=hi, causal=causal, max=mx, errors=errors, err=errs,
                       **{f"{n}_tflops": flops / med[n]["fwd"] / 1e9 for n in med},
                       **{f"{n}_rounds": reads[n]["fwd"] for n in reads})
            row["v2_over_v1"] = row["v2_tflops"] / row["v1_tflops"]
            row["v2_over_v1_rounds"] = [b_ / a_ for a_, b_ in zip(reads["v2"]["fwd"], reads["v1"]["fwd"])]
            row["v2_over_before"] = row["v2_tflops"] / row["before_tflops"]
            res.append(row)
            print(" ".join(f"{n} {row[n + '_tflops']:6.1f}" for n in med), flush=True)
            print(f"{lo:5d}..{hi:5d} causal={causal!s:5} v2 {row['v2_tflops']:6.1f} v1 {row['v1_tflops']:6.1f} "
                  f"before {row['before_tflops']:6.1f}  v2/v1 {row['v2_over_v1']:.3f} "
                  f"({min(row['v2_over_v1_rounds']):.3f}-{max(row['v2_over_v1_rounds']):.3f})  v2/before "
                  f"{row['v2_over_before']:.3f}  err {errs} {errors or ''}", flush=True)
    with open(os.path.join(os.environ.get("OUT", "/tmp"), "varlen_fast_ab.json"), "w") as fh:
        json.dump(res, fh, indent=1)


if __name__ == "__main__":
    main()
