"""Session 66: ALiBi rows far from every key (Nq > Nk, non-causal, bottom-right aligned: a bias of hundreds of log
units) on the Triton kernels, bf16 and fp32. The CPU bf16 backward failed the criterion there (fixed this session);
under the interpreter the Triton kernels met it in bf16 and missed it in fp32 (the float32 lse rounded at |lse| ~
hundreds; README limitation). This reads the same on the GPU. Prints, per case, the worst over 4 seeds x 2 scales of
error / (criterion's bound) for out / dq / dk / dv (1 = the bound: 2x PyTorch's same-dtype error for out, 3x for the
gradients, plus the dtype's floor; tests/helpers.py).
Usage: PYTHONPATH=src python bench/gpu/s66_alibi_far_rows.py [cuda|cpu] [triton|cpu]"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests"))
import flashtriton  # noqa: E402
from flashtriton import flash_attn_func  # noqa: E402
from helpers import bound_ratios  # noqa: E402

DEV = sys.argv[1] if len(sys.argv) > 1 else "cuda"
BACKEND = sys.argv[2] if len(sys.argv) > 2 else "triton"
# (slope of head 0, (Nq, Nk, causal, D), ALiBi on); heads 1-3 take 1/2, 1/4, 1/8 of the slope
CASES = [(2.0, (200, 1, False, 32), True), (2.0, (200, 17, False, 40), True), (0.5, (200, 17, False, 40), True),
         (0.25, (2, 257, False, 64), True), (0.25, (2, 257, False, 64), False), (0.5, (113, 113, False, 64), True)]


def main():
    if DEV == "cuda":
        print(torch.cuda.get_device_name(), torch.__version__, flashtriton.__version__, flush=True)
    for dtype in (torch.bfloat16, torch.float32):
        for slope, (nq, nk, causal, d), on in CASES:
            worst = {}
            for seed in range(4):
                torch.manual_seed(seed)
                for scale in (None, -0.2):
                    b, h, hk = 1, 4, 2
                    q = torch.randn(b, nq, h, d, dtype=dtype)
                    k = torch.randn(b, nk, hk, d, dtype=dtype)
                    v = torch.randn_like(k)
                    dout = torch.randn(b, nq, h, d, dtype=dtype)
                    alibi = torch.full((h,), slope) * torch.tensor([1.0, 0.5, 0.25, 0.125]) if on else None
                    qq, kk, vv = (t.to(DEV).requires_grad_() for t in (q, k, v))
                    with flashtriton.use_backend(BACKEND):
                        o = flash_attn_func(qq, kk, vv, softmax_scale=scale, causal=causal,
                                            alibi_slopes=None if alibi is None else alibi.to(DEV))
                        gr = torch.autograd.grad(o, (qq, kk, vv), dout.to(DEV))
                    sc = scale if scale is not None else d ** -0.5
                    kw = dict(softmax_scale=sc, window_left=-1, window_right=0 if causal else -1, softcap=0.0,
                              alibi_slopes=alibi)
                    for nm, r in bound_ratios((o, *gr), q, k, v, dout, **kw).items():
                        worst[nm] = max(worst.get(nm, 0.0), r)
            print(str(dtype)[6:], BACKEND, slope if on else "no ALiBi", (nq, nk, causal, d),
                  " ".join("%s %.2f" % kv for kv in worst.items()), flush=True)


if __name__ == "__main__":
    main()
