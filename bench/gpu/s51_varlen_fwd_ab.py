"""Session 51: two A/Bs of the Gluon VARLEN forward against the route before it (fwd_ws_varlen.py plain / fwd.py
causal), bf16, 16k tokens in random lengths lo..hi (bench.features._random_lengths, seed 0), forward alone, five
rotated rounds (bench.common.median_of_rounds), plans on as in a user's process; each arm checked first against
float64 on the longest sequence (head 0; dropout arms: the two arms' outputs compared, the same seed giving the same
mask in both routes).
(a) DROPOUT, D = 128, H = 16, p = 0.1: switched by policy.GLUON_FWD_VARLEN_DROPOUT ({128} / {}).
(b) D = 64, H = 32, no dropout: switched by policy.GLUON_FWD_VARLEN_MIN_N's D = 64 entries ({64: 1} / none).
Prediction (bench/NOTES.md "Session 51", before the run): (a) 1.1-1.3x plain, 1.2-1.4x causal (the dense Gluon
dropout forward ran 1.12x / 1.25x the Triton kernels at 4k, session 26; the VARLEN kernel 1.16-1.28x / 1.12-1.31x
without dropout, session 49); (b) below 1.0x at 256..1024, 1.0-1.2x from 512..2048 on (the 2-consumer one-block
kernel at D = 64; the dense D = 64 Gluon forward is routed from 2k only).
Rules (pre-registered): (a) route D = 128 dropout if every range, plain and causal, has median >= 1.00 and every
round >= 0.98; (b) per kind, D = 64's entry is the smallest max_seqlen of a range from which every longer range has
median >= 1.00 and every round >= 0.98 (none if the longest fails)."""
import json
import os
import sys

import torch

import flashtriton
from flashtriton.bench import common
from flashtriton.bench.features import _check_head0, _random_lengths
from flashtriton.launchers import plans, policy

P = 0.1
BASE_MIN_N = {"plain": {128: 768}, "causal": {128: 480}}


def case(d, h, lo, hi, causal, dropout):
    lens = _random_lengths(16384, lo, hi, 0)
    cu = torch.tensor([0] + torch.tensor(lens).cumsum(0).tolist(), dtype=torch.int32, device="cuda")
    q, k, v = (torch.randn(16384, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    mx = max(lens)
    flops = sum(common.attention_flops(1, h, n, n, d, causal, "fwd") for n in lens)
    j = lens.index(mx)
    a, b = cu[j].item(), cu[j + 1].item()
    units, outs, errs = {}, {}, {}
    for name, on in (("gluon", True), ("before", False)):
        def fn(on=on):
            if dropout:
                # (the head dim listed from length 1 in both arms: D = 64 has no entry of its own)
                policy.GLUON_FWD_VARLEN_MIN_N = {kind: {**t, d: 1} for kind, t in BASE_MIN_N.items()}
                policy.GLUON_FWD_VARLEN_DROPOUT = frozenset({d}) if on else frozenset()
            else:
                policy.GLUON_FWD_VARLEN_MIN_N = {kind: {**t, **({d: 1} if on else {})}
                                                 for kind, t in BASE_MIN_N.items()}
            return flashtriton.flash_attn_varlen_func(q, k, v, cu, cu, mx, mx, causal=causal,
                                                      dropout_p=P if dropout else 0.0)
        plans.clear()
        torch.manual_seed(3)
        with torch.no_grad():
            outs[name] = fn()
        if not dropout:
            errs[name] = _check_head0(outs[name][a:b].unsqueeze(0), q[a:b].unsqueeze(0), k[a:b].unsqueeze(0),
                                      v[a:b].unsqueeze(0), window_right=0 if causal else -1)
        units[name] = lambda fn=fn: {"fwd": common.time_ms(fn, "cuda")}
    diff = ((outs["gluon"].float() - outs["before"].float()).abs().max()
            / outs["before"].float().abs().max()).item()
    with torch.no_grad():
        med, reads, errors = common.median_of_rounds(units, 5)
    row = dict(d=d, h=h, lo=lo, hi=hi, causal=causal, dropout=P if dropout else 0.0, max=mx, seqs=len(lens),
               errors=errors, err=errs, rel_diff=diff, **{f"{n}_ms": med[n]["fwd"] for n in med},
               **{f"{n}_rounds": reads[n]["fwd"] for n in reads})
    for n in med:
        row[f"{n}_tflops"] = flops / med[n]["fwd"] / 1e9
    if "gluon" in med and "before" in med:
        row["ratio"] = med["before"]["fwd"] / med["gluon"]["fwd"]
        row["ratio_rounds"] = [o / g for g, o in zip(reads["gluon"]["fwd"], reads["before"]["fwd"])]
    print(f"{'dropout' if dropout else 'D=64   '} D={d:3d} {lo:5d}..{hi:5d} causal={causal!s:5} gluon "
          f"{row.get('gluon_tflops', 0):6.1f}  before {row.get('before_tflops', 0):6.1f}  ratio "
          f"{row.get('ratio', 0):.3f} (rounds {min(row.get('ratio_rounds', [0])):.3f}..)  diff {diff:.2e}  "
          f"err {errs}  {errors or ''}", flush=True)
    return row


def main():
    res = []
    for lo, hi in ((512, 2048), (128, 4096), (1024, 8192)):
        for causal in (False, True):
            res.append(case(128, 16, lo, hi, causal, True))
    for lo, hi in ((256, 1024), (512, 2048), (128, 4096), (1024, 8192)):
        for causal in (False, True):
            res.append(case(64, 32, lo, hi, causal, False))
    with open(os.path.join(os.environ.get("OUT", "/tmp"), "varlen_fwd_ab.json"), "w") as fh:
        json.dump(res, fh, indent=1)


if __name__ == "__main__":
    sys.exit(main())
