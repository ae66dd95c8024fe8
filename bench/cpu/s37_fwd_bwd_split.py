"""Session 37: the CPU forward+backward of the bench's case (B=1 H=8 N=2048 D=64, float32), split into
forward and backward, ours against SDPA, interleaved in one process.

    PYTHONPATH=src python bench/cpu/s37_fwd_bwd_split.py [budget_s]
"""
import sys

import torch

from flashtriton.bench import cpu as bc


def main():
    q, k, v = (torch.randn(1, 2048, 8, 64, requires_grad=True) for _ in range(3))
    dout = torch.randn(1, 2048, 8, 64)

    def fb(fn):
        return lambda: torch.autograd.grad(fn(q, k, v), (q, k, v), dout)
    fns = {"ours_f": lambda: bc._ours(q, k, v), "ours_fb": fb(bc._ours),
           "sdpa_f": lambda: bc._sdpa(q, k, v), "sdpa_fb": fb(bc._sdpa)}
    ms = bc.time_interleaved(fns, budget_s=float(sys.argv[1]) if len(sys.argv) > 1 else 4.0)
    for name, t in ms.items():
        print(f"{name:8s} {t:8.1f} ms")
    print(f"backward: ours {ms['ours_fb'] - ms['ours_f']:.1f} ms, SDPA {ms['sdpa_fb'] - ms['sdpa_f']:.1f} ms; "
          f"forward+backward SDPA / ours {ms['sdpa_fb'] / ms['ours_fb']:.2f}x")


if __name__ == "__main__":
    main()
