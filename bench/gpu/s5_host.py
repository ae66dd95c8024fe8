"""Session 5: host time of eager calls on the GPU machine, host descriptors off (0) and
forward-only (auto), and where it goes (cProfile, top entries by own time)."""
import cProfile
import os
import pstats

import torch

import flashtriton
from flashtriton.bench import decode as D
from s4_host_profile import per_call_us  # (same folder: the script's own)


def main():
    q, k, v = (torch.randn(1, 256, 16, 128, dtype=torch.bfloat16, device="cuda", requires_grad=True)
               for _ in range(3))
    dout = torch.randn_like(q)
    fwd = lambda: flashtriton.flash_attn_func(q.detach(), k.detach(), v.detach(), causal=True)  # noqa: E731

    def fwd_bwd():
        flashtriton.flash_attn_func(q, k, v, causal=True).backward(dout)

    inp = D.make_inputs(1, 8192, "cuda")
    dec = lambda: D.ours(inp)  # noqa: E731
    for flag in ("0", "auto", "0", "auto"):
        os.environ["FLASHTRITON_HOST_DESCRIPTORS"] = flag
        print(f"HOST_DESCRIPTORS={flag}: prefill fwd {per_call_us(fwd):.1f} us, fwd+bwd {per_call_us(fwd_bwd):.1f} us, "
              f"decode {per_call_us(dec):.1f} us per back-to-back eager call", flush=True)
    for name, fn in (("prefill fwd, auto", fwd), ("decode B=1 L=8k", dec)):
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(300):
            fn()
        prof.disable()
        torch.cuda.synchronize()
        print(f"--- {name}")
        pstats.Stats(prof).sort_stats("tottime").print_stats(18)


if __name__ == "__main__":
    main()
