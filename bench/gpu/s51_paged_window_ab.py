"""Session 51, call 9: the paged forward with a sliding window (left, 0) on the Gluon VARLEN_PAGED kernel against
the route before (kernels/fwd_paged.py), the protocol of s51_paged_ab.py (bf16, 16k tokens in random lengths
128..4096, pages in a random order, five rotated rounds, plans on; the packed batch as a third arm), switched by
policy.GLUON_FWD_PAGED["window"].
Prediction (bench/NOTES.md "Session 51"): as the packed window (1.2-1.27x fwd.py) and the paged kernels (1.55-1.95x
the Triton paged kernel): 1.4-1.9x at D = 128, ~0.95-1.0x the packed window; D = 64 1.0-1.2x.
Rule (pre-registered): route "window" for a head dim if every measured case has median on / off >= 1.00 and every
round >= 0.98."""
import json
import os
import sys

import torch

import flashtriton
from flashtriton import paged
from flashtriton.bench import common
from flashtriton.bench.features import _check_head0, _random_lengths
from flashtriton.launchers import plans, policy

CASES = [(128, 16, 256, 1024), (128, 16, 256, 256), (128, 16, 512, 1024), (64, 32, 256, 1024)]


def case(d, h, page, left):
    lens = _random_lengths(16384, 128, 4096, 0)
    cu = torch.tensor([0] + torch.tensor(lens).cumsum(0).tolist(), dtype=torch.int32, device="cuda")
    q, k, v = (torch.randn(16384, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    kc, vc, table = paged.scatter_to_pages(k, v, lens, page, fill=float("nan"),
                                           generator=torch.Generator().manual_seed(0))
    mx = max(lens)
    j = lens.index(mx)
    a, b = cu[j].item(), cu[j + 1].item()
    units, errs = {}, {}
    for name, on in (("gluon", True), ("before", False), ("packed", None)):
        def fn(on=on):
            policy.GLUON_FWD_PAGED = {"window": frozenset({d})} if on else {}
            if on is None:
                return flashtriton.flash_attn_varlen_func(q, k, v, cu, cu, mx, mx, window_size=(left, 0))
            return flashtriton.flash_attn_varlen_func(q, kc, vc, cu, cu, mx, mx, window_size=(left, 0),
                                                      block_table=table)
        plans.clear()
        with torch.no_grad():
            out = fn()
        errs[name] = _check_head0(out[a:b].unsqueeze(0), q[a:b].unsqueeze(0), k[a:b].unsqueeze(0),
                                  v[a:b].unsqueeze(0), window_left=left, window_right=0)
        units[name] = lambda fn=fn: {"fwd": common.time_ms(fn, "cuda")}
    with torch.no_grad():
        med, reads, errors = common.median_of_rounds(units, 5)
    row = dict(d=d, h=h, page=page, window=[left, 0], max=mx, errors=errors, err=errs,
               **{f"{n}_ms": med[n]["fwd"] for n in med}, **{f"{n}_rounds": reads[n]["fwd"] for n in reads})
    if all(n in med for n in ("gluon", "before", "packed")):
        row["ratio"] = med["before"]["fwd"] / med["gluon"]["fwd"]
        row["ratio_rounds"] = [o / g for g, o in zip(reads["gluon"]["fwd"], reads["before"]["fwd"])]
        row["gluon_vs_packed"] = med["packed"]["fwd"] / med["gluon"]["fwd"]
    print(f"D={d:3d} page {page:4d} window ({left}, 0) gluon {row.get('gluon_ms', 0):.3f} ms  before "
          f"{row.get('before_ms', 0):.3f}  packed {row.get('packed_ms', 0):.3f}  ratio {row.get('ratio', 0):.3f} "
          f"(rounds {min(row.get('ratio_rounds', [0])):.3f}..)  vs packed {row.get('gluon_vs_packed', 0):.3f}  "
          f"err {max(errs.values()):.2e}  {errors or ''}", flush=True)
    return row


def main():
    res = [case(*c) for c in CASES]
    with open(os.path.join(os.environ.get("OUT", "/tmp"), "paged_window_ab.json"), "w") as fh:
        json.dump(res, fh, indent=1)


if __name__ == "__main__":
    sys.exit(main())
