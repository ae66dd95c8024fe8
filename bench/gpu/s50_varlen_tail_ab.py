"""Session 50: the Gluon VARLEN forward's VARLEN_TAIL (the second consumer of a block whose rows all lie past the
sequence only releases the ring) on / off, bf16, D = 128, H = 16, 16k tokens in random lengths lo..hi, forward only,
five rotated rounds (bench.common.median_of_rounds); each configuration checked against float64 on the longest
sequence first (head 0). Switched by launchers.forward_gluon.VARLEN_TAIL (both kinds / none; plans keyed on it).
Prediction (bench/NOTES.md "Session 50"): the feature batch computes 6.4% more than its useful work, 2.2 points of
it in second consumers wholly past a sequence; a skipping consumer leaves the tensor cores to the other: +0.5-1.5%
plain, +0.5-2% causal at 128..4096, more at short lengths (more last blocks). Rule (pre-registered): keep on if the
median on / off >= 1.00 at 128..4096, plain and causal, and no range's median below 0.99."""
import json
import os
import sys

import torch

import flashtriton
from flashtriton.bench import common
from flashtriton.bench.features import _check_head0, _random_lengths
from flashtriton.launchers import forward_gluon

H, D = 16, 128
RANGES = [(128, 4096), (128, 512), (512, 2048)]


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
            for name, flag in (("tail", True), ("off", False)):
                def fn(flag=flag):
                    forward_gluon.VARLEN_TAIL = frozenset({"plain", "causal"}) if flag else frozenset()
                    return flashtriton.flash_attn_varlen_func(q, k, v, cu, cu, mx, mx, causal=causal)
                with torch.no_grad():
                    out = fn()
                outs[name] = out
                errs[name] = _check_head0(out[a:b].unsqueeze(0), q[a:b].unsqueeze(0), k[a:b].unsqueeze(0),
                                          v[a:b].unsqueeze(0), window_right=0 if causal else -1)
                units[name] = lambda fn=fn: {"fwd": common.time_ms(fn, "cuda")}
            same = torch.equal(outs["tail"], outs["off"])
            with torch.no_grad():
                med, reads, errors = common.median_of_rounds(units, 5)
            row = dict(lo=lo, hi=hi, causal=causal, max=mx, errors=errors, err=errs, bitwise_same=same,
                       **{f"{n}_ms": med[n]["fwd"] for n in med}, **{f"{n}_rounds": reads[n]["fwd"] for n in reads})
            for n in med:
                row[f"{n}_tflops"] = flops / med[n]["fwd"] / 1e9
            if "tail" in med and "off" in med:
                row["ratio"] = row["tail_tflops"] / row["off_tflops"]
            res.append(row)
            print(f"{lo:5d}..{hi:5d} causal={causal!s:5} tail {row.get('tail_tflops', 0):6.1f}  off "
                  f"{row.get('off_tflops', 0):6.1f}  ratio {row.get('ratio', 0):.4f}  bitwise {same}  err {errs}  "
                  f"{errors or ''}", flush=True)
    with open(os.path.join(os.environ.get("OUT", "/tmp"), "varlen_tail_ab.json"), "w") as fh:
        json.dump(res, fh, indent=1)


if __name__ == "__main__":
    sys.exit(main())
