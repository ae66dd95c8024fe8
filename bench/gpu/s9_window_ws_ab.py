"""Session 9 (prepared in session 8): the MASKED variant of the warp-specialized forward on
sliding windows (kernels/fwd_ws.py, rows through an iota descriptor, every tile of the band
masked) against fwd.py, forward only, bf16, 16k tokens, hidden 2048; window (1024, 0) and
causal, D = 128 and 256. The specialized variant is forced (FLASHTRITON_WARP_SPEC=1: the
default takes it only for causal D = 256). TFLOP/s count the band's pairs (FA2 count);
"vs causal" is the window's TFLOP/s over the same provider's causal TFLOP/s (issue 3's
window row wants >= 0.85x). Max error on (batch 0, head 0) against fp32 math.
Prediction: session 7's probe read 1.17x fwd.py for the window at N = 16k, D = 128."""
import os

import torch
from triton.testing import do_bench

import flashtriton

LEFT = 1024


def pairs(n, left):
    """(query, key) pairs inside a bottom-right band with Nq = Nk = n (right edge 0)."""
    if left < 0:
        return n * (n + 1) / 2
    return sum(min(i, left) + 1 for i in range(n))


def main():
    torch.manual_seed(0)
    for d in (128, 256):
        h = 2048 // d
        for n in (4096, 16384):
            b = 16384 // n
            q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
            ii = torch.arange(n, device="cuda")
            line, tflops = [], {}
            for left in (-1, LEFT):
                vis = (ii[None, :] <= ii[:, None]) & ((ii[None, :] >= ii[:, None] - left) if left >= 0 else True)
                s = (q[0, :, 0].float() @ k[0, :, 0].float().T / d ** 0.5).masked_fill(~vis, float("-inf"))
                ref = torch.softmax(s, -1) @ v[0, :, 0].float()
                flops = 4 * b * h * pairs(n, left) * d
                for name, flag in (("fwd.py", "0"), ("ws", "1")):
                    os.environ["FLASHTRITON_WARP_SPEC"] = flag
                    fn = lambda: flashtriton.flash_attn_func(q, k, v, window_size=(left, 0))  # noqa: E731
                    try:
                        err = (fn()[0, :, 0].float() - ref).abs().max().item()
                        ms = do_bench(fn, warmup=25, rep=100, return_mode="median")
                        tflops[(left, name)] = flops / ms / 1e9
                        line.append(f"{'causal' if left < 0 else 'window'} {name}: {ms * 1e3:.0f} us, "
                                    f"{tflops[(left, name)]:.0f} TFLOP/s (err {err:.1e})")
                    except Exception as e:  # noqa: BLE001
                        line.append(f"{name}: {type(e).__name__} {str(e)[:80]}")
            os.environ["FLASHTRITON_WARP_SPEC"] = "auto"
            ratios = [f"{name} {tflops[(LEFT, name)] / tflops[(-1, name)]:.2f}" for name in ("fwd.py", "ws")
                      if (LEFT, name) in tflops and (-1, name) in tflops]
            print(f"D={d} N={n} | " + " | ".join(line) + " | window vs causal: " + ", ".join(ratios), flush=True)
            del q, k, v
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
