"""Session 49, call 8: the paged varlen forward (kernels/fwd_paged.py) with TMA key / value loads (forward_paged.
PAGED_KV_TMA, pages >= BLOCK_N) against pointer loads, the feature case's batch (16k tokens, lengths 128..4096, bf16,
D = 128, H = 16), pages 256 and 64, three rotated rounds. Rule written before the run: keep TMA on if TMA / pointer
>= 1.00 (median) at page 256, plain and causal. Writes $OUT/paged_tma_ab.json."""
import json
import os

import torch

import flashtriton
from flashtriton import paged
from flashtriton.bench import common
from flashtriton.bench.features import _check_head0, _random_lengths
from flashtriton.launchers import forward_paged

H, D = 16, 128


def main():
    res = []
    lens = _random_lengths(16384, 128, 4096, 0)
    cu = torch.tensor([0] + torch.tensor(lens).cumsum(0).tolist(), dtype=torch.int32, device="cuda")
    q, k, v = (torch.randn(16384, H, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    mx = max(lens)
    j = lens.index(mx)
    a, b = cu[j].item(), cu[j + 1].item()
    for page in (256, 64):
        kc, vc, table = paged.scatter_to_pages(k, v, lens, page, generator=torch.Generator().manual_seed(0))
        for causal in (False, True):
            flops = sum(common.attention_flops(1, H, n, n, D, causal, "fwd") for n in lens)
            units, errs = {}, {}
            for name, tma in (("tma", True), ("pointer", False)):
                def fn(tma=tma):
                    forward_paged.PAGED_KV_TMA = tma
                    return flashtriton.flash_attn_varlen_func(q, kc, vc, cu, cu, mx, mx, causal=causal,
                                                              block_table=table)
                with torch.no_grad():
                    out = fn()
                errs[name] = round(_check_head0(out[a:b].unsqueeze(0), q[a:b].unsqueeze(0), k[a:b].unsqueeze(0),
                                                v[a:b].unsqueeze(0), window_right=0 if causal else -1), 6)
                units[name] = lambda fn=fn: {"fwd": common.time_ms(fn, "cuda")}
            with torch.no_grad():
                med, reads, errors = common.median_of_rounds(units, 3)
            row = dict(page=page, causal=causal, errors=errors, err=errs,
                       **{f"{n}_tflops": flops / med[n]["fwd"] / 1e9 for n in med},
                       **{f"{n}_rounds": reads[n]["fwd"] for n in reads})
            row["ratio"] = row["tma_tflops"] / row["pointer_tflops"]
            res.append(row)
            print(f"page {page:4d} causal={causal!s:5} tma {row['tma_tflops']:6.1f} pointer {row['pointer_tflops']:6.1f}"
                  f" ratio {row['ratio']:.3f} err {errs} {errors or ''}", flush=True)
    with open(os.path.join(os.environ.get("OUT", "/tmp"), "paged_tma_ab.json"), "w") as fh:
        json.dump(res, fh, indent=1)


if __name__ == "__main__":
    main()
