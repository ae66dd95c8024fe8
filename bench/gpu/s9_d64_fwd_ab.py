"""Session 9 (prepared in session 8): the warp-specialized forward (kernels/fwd_ws.py) at
D = 64 against fwd.py, bf16, 16k tokens, H = 32 (hidden 2048), non-causal. Session 6
measured D = 64 with the 128 x 128 tile slower than fwd.py (327-383 against 354-405
TFLOP/s, before the rows-first grid) and 128 x 64 NaN; session 8 found D = 256 +38-51%
with 128 x 64 and one stage. Candidates (sm_90a offline: see NOTES). Forward TFLOP/s by the
FA2 count, max error on (batch 0, head 0) against fp32 math."""
import os

import torch
from triton.testing import do_bench

import flashtriton
from flashtriton.kernels.configs import Tile
from flashtriton.launchers import prefill

VARIANTS = {
    "fwd.py": None,
    "ws 128x128, 2 stages": Tile(128, 128, 4, 2),
    "ws 128x128, 3 stages": Tile(128, 128, 4, 3),
    "ws 128x128, 1 stage": Tile(128, 128, 4, 1),
    "ws 128x64, 2 stages": Tile(128, 64, 4, 2),
}


def main():
    torch.manual_seed(0)
    h, d = 32, 64
    for n in (1024, 2048, 8192):
        b = 16384 // n
        q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        flops = 4 * b * h * n * n * d
        ref = torch.softmax(q[0, :, 0].float() @ k[0, :, 0].float().T / d ** 0.5, -1) @ v[0, :, 0].float()
        line = []
        for name, tile in VARIANTS.items():
            os.environ["FLASHTRITON_WARP_SPEC"] = "0" if tile is None else "auto"
            if tile is not None:
                prefill.WARP_SPEC_TILES[64] = tile
            try:
                out = flashtriton.flash_attn_func(q, k, v)
                err = (out[0, :, 0].float() - ref).abs().max().item()
                ms = do_bench(lambda: flashtriton.flash_attn_func(q, k, v), warmup=25, rep=100, return_mode="median")
                line.append(f"{name}: {flops / ms / 1e9:.0f} (err {err:.1e})")
            except Exception as e:  # noqa: BLE001
                line.append(f"{name}: {type(e).__name__} {str(e)[:80]}")
        prefill.WARP_SPEC_TILES.pop(64, None)
        os.environ["FLASHTRITON_WARP_SPEC"] = "auto"
        print(f"D=64 N={n} fwd TFLOP/s | " + " | ".join(line), flush=True)
        del q, k, v
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
