"""Session 50: the Gluon VARLEN forward's plain calls on the PERSISTENT kernel (one CTA an SM over the (slots, H)
blocks, EARLY_Q: the next block's first K / V tile and Q load under this block's last tile and epilogue, O by masked
register stores) against one block a CTA, bf16, D = 128, H = 16, 16k tokens in random lengths lo..hi, forward only,
five rotated rounds (bench.common.median_of_rounds); each configuration checked against float64 on the longest
sequence (head 0) and the two outputs compared bitwise. Switched by launchers.forward_gluon.VARLEN_PERSISTENT.
Prediction (bench/NOTES.md "Session 50"): the one-block kernel runs ~2,100 CTAs of ~40 us in ~16 waves, each CTA's
start (barrier init, Q and first K / V latency, ~1-2 us) and end (O store) idle on its SM; the persistent kernel
hides the K / V part and the O store: +2-4% at 128..4096, more at short lengths (shorter blocks), and the feature
case's plain forward from 0.898x to ~0.92-0.93x dense. Rule (pre-registered): route plain calls PERSISTENT if the
median on / off >= 1.00 at 128..4096 and no range's median below 0.99."""
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
        lens = _random_lengths(16384, lo, hi, 0)
        cu = torch.tensor([0] + torch.tensor(lens).cumsum(0).tolist(), dtype=torch.int32, device="cuda")
        q, k, v = (torch.randn(16384, H, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        mx = max(lens)
        flops = sum(common.attention_flops(1, H, n, n, D, False, "fwd") for n in lens)
        j = lens.index(mx)
        a, b = cu[j].item(), cu[j + 1].item()
        units, errs, outs = {}, {}, {}
        for name, flag in (("persistent", frozenset({"plain"})), ("one_block", frozenset())):
            def fn(flag=flag):
                forward_gluon.VARLEN_PERSISTENT = flag
                return flashtriton.flash_attn_varlen_func(q, k, v, cu, cu, mx, mx)
            with torch.no_grad():
                out = fn()
            outs[name] = out
            errs[name] = _check_head0(out[a:b].unsqueeze(0), q[a:b].unsqueeze(0), k[a:b].unsqueeze(0),
                                      v[a:b].unsqueeze(0))
            units[name] = lambda fn=fn: {"fwd": common.time_ms(fn, "cuda")}
        same = torch.equal(outs["persistent"], outs["one_block"])
        with torch.no_grad():
            med, reads, errors = common.median_of_rounds(units, 5)
        row = dict(lo=lo, hi=hi, max=mx, errors=errors, err=errs, bitwise_same=same,
                   **{f"{n}_ms": med[n]["fwd"] for n in med}, **{f"{n}_rounds": reads[n]["fwd"] for n in reads})
        for n in med:
            row[f"{n}_tflops"] = flops / med[n]["fwd"] / 1e9
        if "persistent" in med and "one_block" in med:
            row["ratio"] = row["persistent_tflops"] / row["one_block_tflops"]
        res.append(row)
        print(f"{lo:5d}..{hi:5d} persistent {row.get('persistent_tflops', 0):6.1f}  one block "
              f"{row.get('one_block_tflops', 0):6.1f}  ratio {row.get('ratio', 0):.4f}  bitwise {same}  err {errs}  "
              f"{errors or ''}", flush=True)
    with open(os.path.join(os.environ.get("OUT", "/tmp"), "varlen_persistent_ab.json"), "w") as fh:
        json.dump(res, fh, indent=1)


if __name__ == "__main__":
    sys.exit(main())
