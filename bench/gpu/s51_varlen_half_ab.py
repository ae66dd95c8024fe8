"""Session 51: the Gluon VARLEN forward's VARLEN_HALF (a plain block's last key tile, when it holds at most 64 of the
sequence's keys, computed 64 keys wide: kernels/fwd_gluon._consume_last_half) on / off, bf16, H = 16, 16k tokens in
random lengths lo..hi (bench.features._random_lengths, seed as listed), plain forward only, five rotated rounds
(bench.common.median_of_rounds); each arm checked against float64 on the longest sequence first (head 0), and the
two arms' outputs compared (close, not bitwise: l's sum order over the half tile changes).
Prediction (bench/NOTES.md "Session 51", from the tile counts with a masked tile at 1.45x a plain one, before the
per-block fixed costs, which take it down): 128..4096 seed 0 +3.1% (model), +1.5-2.5% expected; seed 1 +2.6% / +1-2%;
128..512 +12.7% / +5-10%; 512..2048 +3.3% / +1.5-2.5%; 1024..8192 +1.1% / +0.5-1%; D = 64 128..4096 similar to D = 128.
Rule (pre-registered): route plain (forward_gluon.VARLEN_HALF = {"plain"}) if the median on / off >= 1.00 at
128..4096 (D = 128, both seeds) and no range's median below 0.99."""
import json
import os
import sys

import torch

import flashtriton
from flashtriton.bench import common
from flashtriton.bench.features import _check_head0, _random_lengths
from flashtriton.launchers import forward_gluon

H = 16
CASES = [(128, 128, 4096, 0), (128, 128, 4096, 1), (128, 128, 512, 0), (128, 512, 2048, 0), (128, 1024, 8192, 0),
         (64, 128, 4096, 0)]
# (session 51, call 7: D = 64 now takes the VARLEN forward from 250; S51_HALF_D64=1 measures its ranges, with the
# same rule: keep VARLEN_HALF at D = 64 if 128..4096's median >= 1.00 and no range below 0.99)
if os.environ.get("S51_HALF_D64"):
    CASES = [(64, 128, 4096, 0), (64, 128, 4096, 1), (64, 128, 512, 0), (64, 512, 2048, 0), (64, 1024, 8192, 0)]


def main():
    res = []
    for d, lo, hi, seed in CASES:
        lens = _random_lengths(16384, lo, hi, seed)
        cu = torch.tensor([0] + torch.tensor(lens).cumsum(0).tolist(), dtype=torch.int32, device="cuda")
        q, k, v = (torch.randn(16384, H, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        mx = max(lens)
        flops = sum(common.attention_flops(1, H, n, n, d, False, "fwd") for n in lens)
        j = lens.index(mx)
        a, b = cu[j].item(), cu[j + 1].item()
        units, errs, outs = {}, {}, {}
        for name, flag in (("half", True), ("off", False)):
            def fn(flag=flag):
                forward_gluon.VARLEN_HALF = frozenset({"plain"}) if flag else frozenset()
                return flashtriton.flash_attn_varlen_func(q, k, v, cu, cu, mx, mx)
            with torch.no_grad():
                out = fn()
            outs[name] = out
            errs[name] = _check_head0(out[a:b].unsqueeze(0), q[a:b].unsqueeze(0), k[a:b].unsqueeze(0),
                                      v[a:b].unsqueeze(0), window_right=-1)
            units[name] = lambda fn=fn: {"fwd": common.time_ms(fn, "cuda")}
        diff = (outs["half"].float() - outs["off"].float()).abs().max().item()
        with torch.no_grad():
            med, reads, errors = common.median_of_rounds(units, 5)
        row = dict(d=d, lo=lo, hi=hi, seed=seed, max=mx, n_seqs=len(lens), errors=errors, err=errs,
                   max_abs_diff=diff, **{f"{n}_ms": med[n]["fwd"] for n in med},
                   **{f"{n}_rounds": reads[n]["fwd"] for n in reads})
        for n in med:
            row[f"{n}_tflops"] = flops / med[n]["fwd"] / 1e9
        if "half" in med and "off" in med:
            row["ratio"] = row["half_tflops"] / row["off_tflops"]
        res.append(row)
        print(f"D={d} {lo:5d}..{hi:5d} seed {seed} half {row.get('half_tflops', 0):6.1f}  off "
              f"{row.get('off_tflops', 0):6.1f}  ratio {row.get('ratio', 0):.4f}  diff {diff:.2e}  err {errs}  "
              f"{errors or ''}", flush=True)
    name = "varlen_half_ab_d64.json" if os.environ.get("S51_HALF_D64") else "varlen_half_ab.json"
    with open(os.path.join(os.environ.get("OUT", "/tmp"), name), "w") as fh:
        json.dump(res, fh, indent=1)


if __name__ == "__main__":
    sys.exit(main())
