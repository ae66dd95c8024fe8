"""Session 59: the one-row fp32 backward (bwd.py's score recomputations in slices at QK_LEVELS > 0, the forward's
lse from the slices and the tile-apart P V) against the tests' criterion: out / lse within 2x, dq / dk / dv within
3x PyTorch's fp32 error (the reference on the GPU, as the tests place it) + the fp32 floor. D = 64 / 128 / 192,
scales -0.2 / 0.2 / default, Nq = 1, Nk = 113 causal and Nk = 300 non-causal, GQA 4 / 2 heads, B = 2, 8 seeds.
Prints the worst ratio per tensor and the failures. Usage: PYTHONPATH=src python bench/gpu/s59_fp32_one_row_grad_probe.py
[off] ("off": the launchers' qk_levels patched to 0, the kernels of session 58's HEAD)."""
import math
import sys

import torch

sys.path.insert(0, "tests")
from helpers import ATOL_FLOOR, max_err, reference_pair  # noqa: E402

import flashtriton  # noqa: E402
from flashtriton.launchers import backward, forward, plans  # noqa: E402

if sys.argv[1:] == ["off"]:
    forward.qk_levels = backward.qk_levels = lambda *a: 0
    plans.clear()

FLOOR = ATOL_FLOOR[torch.float32]
fails = 0
for d in (192, 128, 64):
    for nk, causal in ((113, True), (300, False)):
        for scale in (-0.2, 0.2, None):
            worst = {}
            bad = 0
            for seed in range(8):
                torch.manual_seed(seed)
                q = torch.randn(2, 1, 4, d, device="cuda", requires_grad=True)
                k = torch.randn(2, nk, 2, d, device="cuda", requires_grad=True)
                v = torch.randn(2, nk, 2, d, device="cuda", requires_grad=True)
                out, lse, _ = flashtriton.flash_attn_func(q, k, v, softmax_scale=scale, causal=causal,
                                                          return_attn_probs=True)
                dout = torch.randn_like(out)
                dq, dk, dv = torch.autograd.grad(out, (q, k, v), dout)
                sc = scale if scale is not None else 1 / math.sqrt(d)
                truth, lowp = reference_pair(q, k, v, dout, softmax_scale=sc, window_left=-1,
                                             window_right=0 if causal else -1)
                for name, ours, factor in (("out", out, 2), ("lse", lse, 2), ("dq", dq, 3), ("dk", dk, 3),
                                           ("dv", dv, 3)):
                    e, e0 = max_err(ours, truth[name]), max_err(lowp[name], truth[name])
                    worst[name] = max(worst.get(name, 0.0), e / max(e0, 1e-30))
                    if e > factor * e0 + FLOOR:
                        bad += 1
                        print(f"  FAIL D={d} nk={nk} causal={causal} scale={scale} seed={seed} {name}: {e:.3e} > "
                              f"{factor} x {e0:.3e} + {FLOOR:.0e}", flush=True)
            fails += bad
            print(f"D={d:3d} nk={nk} causal={causal} scale={scale}: worst ratio "
                  + " ".join(f"{n} {r:.2f}" for n, r in worst.items()) + f"  fails {bad}", flush=True)
print(f"total fails {fails}")
