"""Session 49: the packed (varlen) forward on the Gluon kernel's VARLEN variant against the route before it
(fwd_ws_varlen.py non-causal, fwd.py causal), bf16, D = 128, H = 16, 16k tokens in random lengths lo..hi, in rotated
rounds (bench.common.median_of_rounds). The route is switched by policy.GLUON_FWD_VARLEN_MIN_N ({128: 1} on, {} off).
Each configuration is checked against float64 on the longest sequence first. Prints TFLOP/s (useful FLOPs) and the
ratio on / off; writes $OUT/varlen_ab.json."""
import json
import os
import sys

import torch

import flashtriton
from flashtriton.bench import common
from flashtriton.bench.features import _check_head0, _random_lengths
from flashtriton.launchers import policy

H, D = 16, 128
RANGES = [(128, 512), (256, 1024), (512, 2048), (128, 4096), (1024, 8192)]


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

            def call(table):
                def f():
                    policy.GLUON_FWD_VARLEN_MIN_N = table
                    return flashtriton.flash_attn_varlen_func(q, k, v, cu, cu, mx, mx, causal=causal)
                return f
            units, errs = {}, {}
            for name, table in (("gluon", {128: 1}), ("before", {})):
                fn = call(table)
                with torch.no_grad():
                    out = fn()
                errs[name] = _check_head0(out[a:b].unsqueeze(0), q[a:b].unsqueeze(0), k[a:b].unsqueeze(0),
                                          v[a:b].unsqueeze(0), window_right=0 if causal else -1)
                units[name] = lambda fn=fn: {"fwd": common.time_ms(fn, "cuda")}
            with torch.no_grad():
                med, reads, errors = common.median_of_rounds(units, 5)
            row = dict(lo=lo, hi=hi, causal=causal, seqs=len(lens), max=mx, errors=errors, err=errs,
                       **{f"{n}_ms": med[n]["fwd"] for n in med}, **{f"{n}_rounds": reads[n]["fwd"] for n in reads})
            for n in med:
                row[f"{n}_tflops"] = flops / med[n]["fwd"] / 1e9
            if "gluon" in med and "before" in med:
                row["ratio"] = row["gluon_tflops"] / row["before_tflops"]
                row["ratio_rounds"] = [b_ / g for g, b_ in zip(reads["gluon"]["fwd"], reads["before"]["fwd"])]
            res.append(row)
            print(f"{lo:5d}..{hi:5d} causal={causal!s:5} seqs {len(lens):3d}  gluon "
                  f"{row.get('gluon_tflops', 0):6.1f}  before {row.get('before_tflops', 0):6.1f}  "
                  f"ratio {row.get('ratio', 0):.3f}  err {errs}  {errors or ''}", flush=True)
    out = os.environ.get("OUT", "/tmp")
    with open(os.path.join(out, "varlen_ab.json"), "w") as fh:
        json.dump(res, fh, indent=1)


if __name__ == "__main__":
    sys.exit(main())
