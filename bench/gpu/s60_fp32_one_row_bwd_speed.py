"""Session 60: what the one-row fp32 backward costs now that it recomputes the lse in log2 units
(launchers/forward.lse_log2: fwd.py once more, LSE_LOG2) and takes the exponent as one FMA. flash_attn_func at
Nq = 1, fp32, B = 1, Hq = 32, Hk = 8, D = 64 / 128, Nk = 1k / 8k, non-causal: the forward, the backward
(autograd.grad on a kept graph) and forward.lse_log2 alone; "on" (qk_levels as shipped) against "off" (the
launchers' qk_levels patched to 0: the plain kernels, natural lse, no slices). CUDA-event medians of 50 calls after
5 warm-ups, the arms alternated over three rounds.
Usage: PYTHONPATH=src python bench/gpu/s60_fp32_one_row_bwd_speed.py"""
import os
import statistics
import sys

import torch

import flashtriton
from flashtriton.launchers import backward, forward

sys.path.insert(0, os.path.dirname(__file__))
import s59_fp32_one_row_speed as s59  # noqa: E402  (its CUDA-event timer and its on / off switch)
from flashtriton.launchers.prefill import AttnParams  # noqa: E402

timed = s59.timed


def arm(on: bool):
    s59.arm(on)                                                     # forward's (and decode's) qk_levels
    backward.qk_levels = forward.qk_levels


def main():
    torch.manual_seed(0)
    print(torch.cuda.get_device_name(), torch.__version__, __import__("triton").__version__)
    for d in (64, 128):
        for n in (1024, 8192):
            q = torch.randn(1, 1, 32, d, device="cuda", requires_grad=True)
            k = torch.randn(1, n, 8, d, device="cuda", requires_grad=True)
            v = torch.randn(1, n, 8, d, device="cuda", requires_grad=True)
            dout = torch.randn(1, 1, 32, d, device="cuda")
            res = {(on, part): [] for on in (True, False) for part in ("fwd", "bwd")}
            lse_us = []
            for rnd in range(3):
                for on in ((True, False) if rnd % 2 == 0 else (False, True)):
                    arm(on)
                    with torch.no_grad():
                        res[(on, "fwd")].append(timed(lambda: flashtriton.flash_attn_func(q, k, v)))
                    out = flashtriton.flash_attn_func(q, k, v)
                    res[(on, "bwd")].append(timed(lambda: torch.autograd.grad(out, (q, k, v), dout,
                                                                              retain_graph=True)))
                    if on:
                        p = AttnParams(d ** -0.5)
                        lse_us.append(timed(lambda: forward.lse_log2(q.detach(), k.detach(), v.detach(), p)))
            med = {key: statistics.median(x) for key, x in res.items()}
            print(f"D={d:3d} Nk={n:5d}: fwd on {med[(True, 'fwd')]:7.1f} off {med[(False, 'fwd')]:7.1f} us; "
                  f"bwd on {med[(True, 'bwd')]:7.1f} off {med[(False, 'bwd')]:7.1f} us (on/off "
                  f"{med[(True, 'bwd')] / med[(False, 'bwd')]:.2f}); lse_log2 alone {statistics.median(lse_us):7.1f} us; "
                  f"rounds bwd on {[round(x, 1) for x in res[(True, 'bwd')]]} off "
                  f"{[round(x, 1) for x in res[(False, 'bwd')]]}", flush=True)
    arm(True)


if __name__ == "__main__":
    main()
