"""Session 5: host-made descriptors per backward kernel (FLASHTRITON_HOST_DESCRIPTORS =
auto (forward only) / fwd,dkdv / fwd,dq), and the window forward with them off and on.
Interleaved per shape; TFLOP/s of the backward (2.5x the forward FLOPs, halved when
causal), median of do_bench."""
import os

import torch

import flashtriton
from flashtriton.bench import common

FLAGS = ("auto", "fwd,dkdv", "fwd,dq", "auto")


def main():
    for d in (128, 64):
        h = 2048 // d
        for causal in (False, True):
            for n in (1024, 2048, 4096, 16384):
                b = 16384 // n
                q, k, v = (torch.randn(b, n, h, d, dtype=torch.bfloat16, device="cuda", requires_grad=True)
                           for _ in range(3))
                dout = torch.randn_like(q)
                flops = common.attention_flops(b, h, n, n, d, causal, "bwd")
                res = []
                for flag in FLAGS:
                    os.environ["FLASHTRITON_HOST_DESCRIPTORS"] = flag
                    out = flashtriton.flash_attn_func(q, k, v, causal=causal)
                    ms = common.time_ms(lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True), "cuda")
                    res.append(f"{flag} {flops / ms / 1e9:.0f}")
                print(f"bwd D={d} causal={causal} N={n}: " + " | ".join(res), flush=True)
                del q, k, v, dout, out
    # window (1024, 0), N = 16k, forward: descriptors off / forward
    q, k, v = (torch.randn(1, 16384, 16, 128, dtype=torch.bfloat16, device="cuda") for _ in range(3))
    for flag in ("0", "auto", "0", "auto"):
        os.environ["FLASHTRITON_HOST_DESCRIPTORS"] = flag
        fn = lambda: flashtriton.flash_attn_func(q, k, v, causal=True, window_size=(1024, 0))  # noqa: E731
        print(f"window (1024, 0) N=16k fwd, HOST_DESCRIPTORS={flag}: {common.time_ms(fn, 'cuda') * 1e3:.1f} us, "
              f"graph {common.graph_time_ms(fn) * 1e3:.1f} us", flush=True)


if __name__ == "__main__":
    main()
