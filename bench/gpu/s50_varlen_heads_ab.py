"""Session 50: the Gluon VARLEN forward's VARLEN_HEADS_FAST (grid (H, slots): the heaviest-first dispatch order across
all heads, not within each head's pass) on / off, bf16, D = 128, H = 16, 16k tokens in random lengths lo..hi, forward
only, five rotated rounds (bench.common.median_of_rounds); each configuration checked against float64 on the longest
sequence (head 0), the outputs compared bitwise. Switched by launchers.forward_gluon.VARLEN_HEADS_FAST.
Prediction (bench/NOTES.md "Session 50"): with the order within each head, head 15's heaviest blocks start in the
last sixteenth of the run; across heads, the run ends on the lightest blocks of all: +1-3% at 128..4096 and
1024..8192 (few sequences, unequal blocks), ~0 at 128..512. Rule (pre-registered): per kind, keep on if the median
on / off >= 1.00 at 128..4096 and no range's median below 0.99."""
import json
import os
import sys

import torch

import flashtriton
from flashtriton.bench import common
from flashtriton.bench.features import _check_head0, _random_lengths
from flashtriton.launchers import forward_gluon

H, D = 16, 128
RANGES = [(128, 4096), (128, 512), (512, 2048), (1024, 8192)]


def main():
    res = []
    for lo, hi in RANGES:
        for causal in (False, True):
            lens = _random_lengths(16384, lo, hi, 0)
            cu = torch.tensor([0] + torch.tensor(lens).cumsum(0).tolist(), dtype=torch.int32, device="cuda")
            q, k, v = (torch.randn(16384, H, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
            mx = max(lens)
            flops = sum(common.attention_flops(1, H, n, n, D, causal, "fwd") for n in lens)
            j = lens.index(mx)
            a, b = cu[j].item(), cu[j + 1].item()
            units, errs, outs = {}, {}, {}
            for name, flag in (("heads", True), ("slots", False)):
                def fn(flag=flag):
                    forward_gluon.VARLEN_HEADS_FAST = frozenset({"plain", "causal"}) if flag else frozenset()
                    return flashtriton.flash_attn_varlen_func(q, k, v, cu, cu, mx, mx, causal=causal)
                with torch.no_grad():
                    out = fn()
                outs[name] = out
                errs[name] = _check_head0(out[a:b].unsqueeze(0), q[a:b].unsqueeze(0), k[a:b].unsqueeze(0),
                                          v[a:b].unsqueeze(0), window_right=0 if causal else -1)
                units[name] = lambda fn=fn: {"fwd": common.time_ms(fn, "cuda")}
            same = torch.equal(outs["heads"], outs["slots"])
            with torch.no_grad():
                med, reads, errors = common.median_of_rounds(units, 5)
            row = dict(lo=lo, hi=hi, causal=causal, max=mx, errors=errors, err=errs, bitwise_same=same,
                       **{f"{n}_ms": med[n]["fwd"] for n in med}, **{f"{n}_rounds": reads[n]["fwd"] for n in reads})
            for n in med:
                row[f"{n}_tflops"] = flops / med[n]["fwd"] / 1e9
            if "heads" in med and "slots" in med:
                row["ratio"] = row["heads_tflops"] / row["slots_tflops"]
            res.append(row)
            print(f"{lo:5d}..{hi:5d} causal={causal!s:5} heads {row.get('heads_tflops', 0):6.1f}  slots "
                  f"{row.get('slots_tflops', 0):6.1f}  ratio {row.get('ratio', 0):.4f}  bitwise {same}  "
                  f"{errors or ''}", flush=True)
    with open(os.path.join(os.environ.get("OUT", "/tmp"), "varlen_heads_ab.json"), "w") as fh:
        json.dump(res, fh, indent=1)


if __name__ == "__main__":
    sys.exit(main())
