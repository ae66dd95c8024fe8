"""Session 7: the warp-specialized backward (kernels/bwd_ws.py) at D = 64, against bwd.py
(FLASHTRITON_WARP_SPEC=0), three tile pairs, bf16, 16k tokens, H = 32 (hidden 2048):
non-causal N = 2k and 8k (whole), causal N = 8k (split). Backward only (autograd.grad of
a saved forward), TFLOP/s by the FA2 count; max error of dq/dk/dv on (batch 0, head 0)
against fp32 math."""
import os

import torch
from triton.testing import do_bench

import flashtriton
from flashtriton.kernels.configs import Tile
from flashtriton.launchers import prefill

VARIANTS = {
    "bwd.py": None,
    "ws 64x128 / 128x64, 2 stages": (Tile(64, 128, 4, 2), Tile(128, 64, 4, 2)),
    "ws 128x128 / 128x128, 2 stages": (Tile(128, 128, 4, 2), Tile(128, 128, 4, 2)),
    "ws 64x128 / 128x64, 3 stages": (Tile(64, 128, 4, 3), Tile(128, 64, 4, 3)),
}


def main():
    torch.manual_seed(0)
    h, d = 32, 64
    for n, causal in ((2048, False), (8192, False), (8192, True)):
        b = 16384 // n
        q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
        dout = torch.randn_like(q)
        flops = 4 * 2.5 * b * h * n * n * d / (2 if causal else 1)
        qr, kr, vr = (t[0, :, 0].detach().float().requires_grad_() for t in (q, k, v))
        s = qr @ kr.T / d ** 0.5
        if causal:
            s = s.masked_fill(torch.ones(n, n, device="cuda", dtype=torch.bool).triu(1), float("-inf"))
        (s.softmax(-1) @ vr).backward(dout[0, :, 0].float())
        ref = (qr.grad, kr.grad, vr.grad)
        out = flashtriton.flash_attn_func(q, k, v, causal=causal)
        line = []
        for name, tiles in VARIANTS.items():
            os.environ["FLASHTRITON_WARP_SPEC"] = "0" if tiles is None else "auto"
            if tiles is not None:
                prefill.BWD_WARP_SPEC_TILES[64] = tiles
            try:
                g = torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)
                err = max((x[0, :, 0].float() - r).abs().max().item() for x, r in zip(g, ref))
                ms = do_bench(lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True), warmup=25,
                              rep=100, return_mode="median")
                line.append(f"{name}: {flops / ms / 1e9:.0f} (err {err:.1e})")
            except Exception as e:  # noqa: BLE001
                line.append(f"{name}: {type(e).__name__} {str(e)[:80]}")
        print(f"D=64 N={n} causal={causal} bwd TFLOP/s | " + " | ".join(line), flush=True)
        os.environ["FLASHTRITON_WARP_SPEC"] = "auto"
        del q, k, v, dout, out
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
