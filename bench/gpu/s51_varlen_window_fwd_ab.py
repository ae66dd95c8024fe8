"""Session 51: the packed sliding-window forward (window (left, 0)) on the Gluon VARLEN kernel's WINDOW against the
route before (kernels/fwd.py's varlen path), bf16, 16k tokens in random lengths lo..hi (seed 0), forward alone, five
rotated rounds (bench.common.median_of_rounds), plans on. Switched by policy.GLUON_FWD_VARLEN_MIN_N["window"]
({D: 1} / absent). Each arm checked against float64 on the longest sequence first (head 0).
Prediction (bench/NOTES.md "Session 51", before the run): the VARLEN kernel ran causal packed batches 1.12-1.31x the
Triton route (session 49); a window's blocks add one masked left-edge tile each and visit fewer tiles (the band), so
per-block costs weigh more: 1.1-1.4x at D = 128, 1.0-1.2x at D = 64.
Rule (pre-registered): route "window" for a head dim if every measured range and window has median on / off >= 1.00
and every round >= 0.98."""
import json
import os
import sys

import torch

import flashtriton
from flashtriton.bench import common
from flashtriton.bench.features import _check_head0, _random_lengths
from flashtriton.launchers import plans, policy

BASE = {"plain": {128: 768, 64: 250}, "causal": {128: 480, 64: 250}}
CASES = [(128, 16, 512, 2048, 1024), (128, 16, 128, 4096, 1024), (128, 16, 128, 4096, 256), (128, 16, 1024, 8192, 1024),
         (64, 32, 128, 4096, 1024), (64, 32, 128, 4096, 256)]


def case(d, h, lo, hi, left):
    lens = _random_lengths(16384, lo, hi, 0)
    cu = torch.tensor([0] + torch.tensor(lens).cumsum(0).tolist(), dtype=torch.int32, device="cuda")
    q, k, v = (torch.randn(16384, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    mx = max(lens)
    j = lens.index(mx)
    a, b = cu[j].item(), cu[j + 1].item()
    units, errs = {}, {}
    for name, on in (("gluon", True), ("before", False)):
        def fn(on=on):
            policy.GLUON_FWD_VARLEN_MIN_N = dict(BASE, **({"window": {d: 1}} if on else {}))
            return flashtriton.flash_attn_varlen_func(q, k, v, cu, cu, mx, mx, window_size=(left, 0))
        plans.clear()
        with torch.no_grad():
            out = fn()
        errs[name] = _check_head0(out[a:b].unsqueeze(0), q[a:b].unsqueeze(0), k[a:b].unsqueeze(0),
                                  v[a:b].unsqueeze(0), window_left=left, window_right=0)
        units[name] = lambda fn=fn: {"fwd": common.time_ms(fn, "cuda")}
    with torch.no_grad():
        med, reads, errors = common.median_of_rounds(units, 5)
    row = dict(d=d, h=h, lo=lo, hi=hi, window=[left, 0], max=mx, seqs=len(lens), errors=errors, err=errs,
               **{f"{n}_ms": med[n]["fwd"] for n in med}, **{f"{n}_rounds": reads[n]["fwd"] for n in reads})
    if "gluon" in med and "before" in med:
        row["ratio"] = med["before"]["fwd"] / med["gluon"]["fwd"]
        row["ratio_rounds"] = [o / g for g, o in zip(reads["gluon"]["fwd"], reads["before"]["fwd"])]
    print(f"D={d:3d} {lo:5d}..{hi:5d} window ({left}, 0) gluon {row.get('gluon_ms', 0):.3f} ms  before "
          f"{row.get('before_ms', 0):.3f} ms  ratio {row.get('ratio', 0):.3f} (rounds "
          f"{min(row.get('ratio_rounds', [0])):.3f}..)  err {errs}  {errors or ''}", flush=True)
    return row


def main():
    res = [case(*c) for c in CASES]
    with open(os.path.join(os.environ.get("OUT", "/tmp"), "varlen_window_fwd_ab.json"), "w") as fh:
        json.dump(res, fh, indent=1)


if __name__ == "__main__":
    sys.exit(main())
