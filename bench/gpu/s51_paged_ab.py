"""Session 51: the paged packed forward (flash_attn_varlen_func(..., block_table=)) on the Gluon VARLEN kernel's
VARLEN_PAGED against the route before (kernels/fwd_paged.py, TMA for pages of whole tiles), bf16, 16k tokens in
random lengths lo..hi (seed 0), pages dealt in a random order, forward alone, five rotated rounds
(bench.common.median_of_rounds), plans on; a third arm, the same batch packed (the Gluon VARLEN route), gives the
paged / packed ratio. Switched by policy.GLUON_FWD_PAGED ({kind: {D}} / {}). Each arm checked against float64 on the
longest sequence first (head 0).
Prediction (bench/NOTES.md "Session 51", before the run): the Triton paged kernel ran 0.57-0.66x the packed batch
(features, session 49); the Gluon paged kernel does the packed kernel's work plus a table read a tile and the last
tile's V zeroing: 0.95-1.0x packed, so on / off 1.45-1.75x.
Rule (pre-registered): route a (kind, D) if every measured range and page has median on / off >= 1.00 and every round
>= 0.98."""
import json
import os
import sys

import torch

import flashtriton
from flashtriton import paged
from flashtriton.bench import common
from flashtriton.bench.features import _check_head0, _random_lengths
from flashtriton.launchers import plans, policy

CASES = [(128, 16, 128, 4096, 256), (128, 16, 128, 4096, 128), (128, 16, 512, 2048, 256), (128, 16, 1024, 8192, 512),
         (64, 32, 128, 4096, 256)]


def case(d, h, lo, hi, page, causal):
    lens = _random_lengths(16384, lo, hi, 0)
    cu = torch.tensor([0] + torch.tensor(lens).cumsum(0).tolist(), dtype=torch.int32, device="cuda")
    q, k, v = (torch.randn(16384, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    kc, vc, table = paged.scatter_to_pages(k, v, lens, page, fill=float("nan"),
                                           generator=torch.Generator().manual_seed(0))
    mx = max(lens)
    flops = sum(common.attention_flops(1, h, n, n, d, causal, "fwd") for n in lens)
    j = lens.index(mx)
    a, b = cu[j].item(), cu[j + 1].item()
    kind = "causal" if causal else "plain"
    units, errs = {}, {}
    for name, on in (("gluon", True), ("before", False), ("packed", None)):
        def fn(on=on):
            policy.GLUON_FWD_PAGED = {kind: frozenset({d})} if on else {}
            if on is None:
                return flashtriton.flash_attn_varlen_func(q, k, v, cu, cu, mx, mx, causal=causal)
            return flashtriton.flash_attn_varlen_func(q, kc, vc, cu, cu, mx, mx, causal=causal, block_table=table)
        plans.clear()
        with torch.no_grad():
            out = fn()
        errs[name] = _check_head0(out[a:b].unsqueeze(0), q[a:b].unsqueeze(0), k[a:b].unsqueeze(0),
                                  v[a:b].unsqueeze(0), window_right=0 if causal else -1)
        units[name] = lambda fn=fn: {"fwd": common.time_ms(fn, "cuda")}
    with torch.no_grad():
        med, reads, errors = common.median_of_rounds(units, 5)
    row = dict(d=d, h=h, lo=lo, hi=hi, page=page, causal=causal, max=mx, seqs=len(lens), errors=errors, err=errs,
               **{f"{n}_ms": med[n]["fwd"] for n in med}, **{f"{n}_rounds": reads[n]["fwd"] for n in reads})
    for n in med:
        row[f"{n}_tflops"] = flops / med[n]["fwd"] / 1e9
    if all(n in med for n in ("gluon", "before", "packed")):
        row["ratio"] = med["before"]["fwd"] / med["gluon"]["fwd"]
        row["ratio_rounds"] = [o / g for g, o in zip(reads["gluon"]["fwd"], reads["before"]["fwd"])]
        row["gluon_vs_packed"] = med["packed"]["fwd"] / med["gluon"]["fwd"]
        row["before_vs_packed"] = med["packed"]["fwd"] / med["before"]["fwd"]
    print(f"D={d:3d} {lo:5d}..{hi:5d} page {page:4d} causal={causal!s:5} gluon {row.get('gluon_tflops', 0):6.1f}  "
          f"before {row.get('before_tflops', 0):6.1f}  packed {row.get('packed_tflops', 0):6.1f}  ratio "
          f"{row.get('ratio', 0):.3f} (rounds {min(row.get('ratio_rounds', [0])):.3f}..)  vs packed "
          f"{row.get('gluon_vs_packed', 0):.3f} / {row.get('before_vs_packed', 0):.3f}  err "
          f"{max(errs.values()):.2e}  {errors or ''}", flush=True)
    return row


def main():
    res = []
    for d, h, lo, hi, page in CASES:
        for causal in (False, True):
            res.append(case(d, h, lo, hi, page, causal))
    with open(os.path.join(os.environ.get("OUT", "/tmp"), "paged_ab.json"), "w") as fh:
        json.dump(res, fh, indent=1)


if __name__ == "__main__":
    sys.exit(main())
