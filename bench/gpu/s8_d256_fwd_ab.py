"""Session 8: the warp-specialized forward (kernels/fwd_ws.py) at D = 256, against fwd.py
(FLASHTRITON_WARP_SPEC=0) and SDPA's FLASH_ATTENTION backend, bf16, 16k tokens, H = 8
(hidden 2048), non-causal. At D = 256 the 128 x 128 tile of D = 128 needs 263 KB of shared
memory; the candidates fit in 197 KB (sm_90a compile, 2026-11-29: 12 warps, no spills):
128 x 64 with 1 stage and 128 x 32 with 2. Forward TFLOP/s by the FA2 count, max error
on (batch 0, head 0) against fp32 math."""
import os

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from triton.testing import do_bench

import flashtriton
from flashtriton.kernels.configs import Tile
from flashtriton.launchers import prefill

VARIANTS = {
    "fwd.py": None,
    "ws 128x64, 1 stage": Tile(128, 64, 4, 1),
    "ws 128x32, 2 stages": Tile(128, 32, 4, 2),
    "ws 128x32, 3 stages": Tile(128, 32, 4, 3),
}


def main():
    torch.manual_seed(0)
    h, d = 8, 256
    for n in (1024, 2048, 4096, 16384):
        b = 16384 // n
        q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        flops = 4 * b * h * n * n * d
        ref = torch.softmax(q[0, :, 0].float() @ k[0, :, 0].float().T / d ** 0.5, -1) @ v[0, :, 0].float()
        qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            ms = do_bench(lambda: torch.nn.functional.scaled_dot_product_attention(qt, kt, vt), warmup=25, rep=100,
                          return_mode="median")
        line = [f"FA2: {flops / ms / 1e9:.0f}"]
        for name, tile in VARIANTS.items():
            os.environ["FLASHTRITON_WARP_SPEC"] = "0" if tile is None else "auto"
            if tile is not None:
                prefill.WARP_SPEC_TILES[256] = tile
            try:
                out = flashtriton.flash_attn_func(q, k, v)
                err = (out[0, :, 0].float() - ref).abs().max().item()
                ms = do_bench(lambda: flashtriton.flash_attn_func(q, k, v), warmup=25, rep=100, return_mode="median")
                line.append(f"{name}: {flops / ms / 1e9:.0f} (err {err:.1e})")
            except Exception as e:  # noqa: BLE001
                line.append(f"{name}: {type(e).__name__} {str(e)[:80]}")
        prefill.WARP_SPEC_TILES.pop(256, None)
        print(f"D=256 N={n} fwd TFLOP/s | " + " | ".join(line), flush=True)
        os.environ["FLASHTRITON_WARP_SPEC"] = "auto"
        del q, k, v
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
