"""Session 70: where the CPU fp32 error on one-query rows at sharp softmax scales comes from (README limitation "CPU
backend, fp32 accuracy with sharp softmax"), simulated in plain torch: one query row against 200 keys, D = 256, scale
0.3 (the class session 66's varlen sweep found), 200 draws. P's max error against float64, for PyTorch's fp32 math
(the criterion's yardstick: einsum, * scale, softmax) and for the kernels' form (q scaled by scale * log2 e first,
an fp32 product, P = exp2(s - lse) with lse rounded to fp32 as the forward saves it), then the kernels' form with the
lse kept in float64 (the exponent s - lse rounded once to fp32, exp2 in fp32), and with the score product correctly
rounded. Ratios to PyTorch's error per draw.
    PYTHONPATH=src python bench/cpu/s70_one_row_p_error_sim.py"""
import math
import statistics

import torch

torch.manual_seed(0)
L2E = 1 / math.log(2)
D, NK, scale = 256, 200, 0.3
r = {"ref": [], "ours32": [], "ours_lse64": [], "ours_s64": []}
for t in range(200):
    q = torch.randn(1, D); k = torch.randn(NK, D)
    s64 = (q.double() @ k.double().T) * scale
    p64 = torch.softmax(s64, -1)
    # reference lowp: einsum fp32 then * scale, softmax in fp32
    s32 = (q @ k.T) * scale
    pref = torch.softmax(s32, -1)
    # ours: q scaled by scale*log2e in fp32, product fp32, lse2 fp32, p = exp2(s2 - lse2)
    qs = q * (scale * L2E)
    s2 = qs @ k.T
    m = s2.max(-1, keepdim=True).values
    lse2 = m + torch.log2(torch.exp2(s2 - m).sum(-1, keepdim=True))
    pours = torch.exp2(s2 - lse2)
    lse2_64 = torch.log2(torch.exp2(s2.double()).sum(-1, keepdim=True))
    pl64 = torch.exp2((s2.double() - lse2_64).float())   # the exponent exact to fp32, exp2 in fp32
    s2_64 = (q.double() @ k.double().T * (scale * L2E)).float()
    lse_c = torch.log2(torch.exp2(s2_64.double()).sum(-1, keepdim=True)).float()
    ps64 = torch.exp2(s2_64 - lse_c)
    for name, p in (("ref", pref), ("ours32", pours), ("ours_lse64", pl64), ("ours_s64", ps64)):
        r[name].append((p.double() - p64).abs().max().item())
base = r["ref"]
for name, e in r.items():
    ratio = [a / b for a, b in zip(e, base)]
    print(f"{name:12s} median err {statistics.median(e):.2e}  ratio to ref: median {statistics.median(ratio):.2f} p90 {sorted(ratio)[180]:.2f} max {max(ratio):.2f}")
