"""Prepared in session 22 for session 23: the D = 256 varlen forward on fwd_ws_varlen.py.
Until session 22 the varlen rule sent it there by default without a GPU test at D = 256
(and its backward to a warp-specialized tile that does not exist: the review's KeyError);
now policy.WS_VARLEN_BLOCK_DS = {128} sends both to fwd.py / bwd.py. This script times the
forward both ways and checks fwd_ws_varlen.py against fwd.py and the float64 reference
before it could be given back (forward only: the backward has no D = 256 tile).

Shape: 16k tokens in random lengths 128..4096 (as bench.features' varlen case), H = 8, D =
256, bf16, non-causal. Prediction: fwd_ws_varlen.py 1.3-1.5x fwd.py (the dense D = 256
forward: 486-613 TFLOP/s on fwd_ws.py against 353-406 on fwd.py, session 8), outputs within
bf16 rounding of fwd.py's, no NaN, the lse equal to within fp32 rounding.

    PYTHONPATH=src python bench/gpu/s23_varlen_d256_ab.py

(Ran in calls 1-2 when WS_VARLEN_BLOCK_DS was one set; now per kernel, the "fwd" entry.)
"""
import torch

import flashtriton
from flashtriton.bench import common
from flashtriton.bench.features import _random_lengths
from flashtriton.launchers import plans, policy
from flashtriton.reference import attention as attention_reference


def main(total=16384, h=8, d=256, seed=0):
    lens = _random_lengths(total, 128, 4096, seed)
    cu = torch.tensor([0] + torch.tensor(lens).cumsum(0).tolist(), dtype=torch.int32, device="cuda")
    q, k, v = (torch.randn(total, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    mx = max(lens)
    flops = sum(common.attention_flops(1, h, n, n, d, False) for n in lens)

    def call():
        return flashtriton.flash_attn_varlen_func(q, k, v, cu, cu, mx, mx)

    def call_lse():
        # return_attn_probs also materialises S_dmask (B, H, max_q, max_k): checked, never timed
        # (call 1 timed it, 33 TFLOP/s for both kernels)
        return flashtriton.flash_attn_varlen_func(q, k, v, cu, cu, mx, mx, return_attn_probs=True)[:2]

    res, outs = {}, {}
    for rnd in range(2):
        for name in (["fwd.py", "fwd_ws_varlen"] if rnd == 0 else ["fwd_ws_varlen", "fwd.py"]):
            policy.WS_VARLEN_BLOCK_DS["fwd"] = {128, 256} if name == "fwd_ws_varlen" else {128}
            plans.clear()
            with torch.no_grad():
                outs[name] = call_lse()
                res.setdefault(name, []).append(flops / common.time_ms(call, "cuda") / 1e9)
    policy.WS_VARLEN_BLOCK_DS["fwd"] = {128, 256}
    (o1, l1), (o2, l2) = outs["fwd.py"], outs["fwd_ws_varlen"]
    j = lens.index(mx)
    a, b = cu[j].item(), cu[j + 1].item()
    ref = attention_reference(*(t[a:b, :1].unsqueeze(0).double() for t in (q, k, v)),
                              softmax_scale=d ** -0.5)[0]                              # head 0, the longest sequence
    err = {nm: float((out[a:b, :1].unsqueeze(0).double() - ref).abs().max()) for nm, (out, _) in outs.items()}
    print(f"varlen D={d} H={h} {len(lens)} seqs {total} tokens: forward TFLOP/s " +
          "  ".join(f"{nm} {' / '.join(f'{x:.0f}' for x in r)}" for nm, r in res.items()) +
          f"; max |out diff| {float((o1.float() - o2.float()).abs().max()):.2e}, max |lse diff| "
          f"{float((l1 - l2).abs().max()):.2e}, NaN {bool(o2.isnan().any() or l2.isnan().any())}, "
          f"error vs float64 (longest, head 0) {err}", flush=True)


if __name__ == "__main__":
    main()
