"""Session 8: the CAUSAL variant of the warp-specialized forward (kernels/fwd_ws.py, rows
through an iota descriptor, every tile masked) against fwd.py (FLASHTRITON_WARP_SPEC=0) and
SDPA's FLASH_ATTENTION backend, bf16, 16k tokens, hidden 2048, causal, forward only.
D = 256 runs it by default (auto); D = 128 only when forced (FLASHTRITON_WARP_SPEC=1).
TFLOP/s by the FA2 count (half the square), max error on (batch 0, head 0) against fp32."""
import os

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from triton.testing import do_bench

import flashtriton


def main():
    torch.manual_seed(0)
    for d, ws_flag in ((256, "auto"), (128, "1")):
        h = 2048 // d
        for n in (1024, 2048, 4096, 16384):
            b = 16384 // n
            q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
            flops = 4 * b * h * n * n * d / 2
            s = q[0, :, 0].float() @ k[0, :, 0].float().T / d ** 0.5
            s = s.masked_fill(torch.ones(n, n, device="cuda", dtype=torch.bool).triu(1), float("-inf"))
            ref = torch.softmax(s, -1) @ v[0, :, 0].float()
            qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))
            with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                ms = do_bench(lambda: torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=True),
                              warmup=25, rep=100, return_mode="median")
            line = [f"FA2: {flops / ms / 1e9:.0f}"]
            for name, flag in (("fwd.py", "0"), ("ws causal", ws_flag)):
                os.environ["FLASHTRITON_WARP_SPEC"] = flag
                try:
                    out = flashtriton.flash_attn_func(q, k, v, causal=True)
                    err = (out[0, :, 0].float() - ref).abs().max().item()
                    ms = do_bench(lambda: flashtriton.flash_attn_func(q, k, v, causal=True), warmup=25, rep=100,
                                  return_mode="median")
                    line.append(f"{name}: {flops / ms / 1e9:.0f} (err {err:.1e})")
                except Exception as e:  # noqa: BLE001
                    line.append(f"{name}: {type(e).__name__} {str(e)[:80]}")
            os.environ["FLASHTRITON_WARP_SPEC"] = "auto"
            print(f"D={d} N={n} causal fwd TFLOP/s | " + " | ".join(line), flush=True)
            del q, k, v
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
