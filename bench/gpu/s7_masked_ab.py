"""Session 7: the masked warp-specialized backward (bwd_ws.py MASKED: every tile in the
specialized loop, masked there) against the split path (bulk in bwd_ws.py, masked rest
in bwd.py) and bwd.py alone, bf16 D = 128, 16k tokens, H = 16: causal N = 512 to 16k and
window (1024, 0) at 16k. Backward only (autograd.grad of a saved forward), TFLOP/s by
the FA2 count (window: pairs inside the band), and max error of dq/dk/dv against fp32
math on head 0 of batch 0."""
import os

import torch
from triton.testing import do_bench

import flashtriton
from flashtriton.launchers import prefill


def band_pairs(n, left):
    i = torch.arange(n, dtype=torch.float64)
    return float(torch.clamp(i + 1, max=left + 1 if left >= 0 else n).sum())


def main():
    torch.manual_seed(0)
    h, d = 16, 128
    cases = [(n, -1) for n in (512, 1024, 2048, 4096, 8192, 16384)] + [(16384, 1024)]
    for n, left in cases:
        b = 16384 // n
        q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
        dout = torch.randn_like(q)
        flops = 4 * 2.5 * b * h * band_pairs(n, left) * d
        # fp32 reference gradients, batch 0 head 0
        qr, kr, vr = (t[0, :, 0].detach().float().requires_grad_() for t in (q, k, v))
        s = qr @ kr.T / d ** 0.5
        i = torch.arange(n, device="cuda")
        vis = i[None, :] <= i[:, None]
        if left >= 0:
            vis &= i[None, :] >= i[:, None] - left
        (s.masked_fill(~vis, float("-inf")).softmax(-1) @ vr).backward(dout[0, :, 0].float())
        ref = (qr.grad, kr.grad, vr.grad)
        res = {}
        for name, masked, flag in (("masked", True, "auto"), ("split/bwd.py", False, "auto"), ("bwd.py", False, "0")):
            prefill.BWD_MASKED_KERNELS = masked
            os.environ["FLASHTRITON_WARP_SPEC"] = flag
            out = flashtriton.flash_attn_func(q, k, v, causal=True, window_size=(left, -1) if left >= 0 else (-1, -1))
            g = torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)
            err = max((x[0, :, 0].float() - r).abs().max().item() for x, r in zip(g, ref))
            ms = do_bench(lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True), warmup=25, rep=100,
                          return_mode="median")
            res[name] = flops / ms / 1e9
            print(f"  causal N={n} left={left} {name}: {res[name]:.0f} TFLOP/s bwd, {ms * 1e3:.0f} us, err {err:.1e}",
                  flush=True)
        print(f"causal N={n} left={left}: masked / split-or-bwd.py {res['masked'] / res['split/bwd.py']:.2f}, "
              f"masked / bwd.py {res['masked'] / res['bwd.py']:.2f}", flush=True)
        os.environ["FLASHTRITON_WARP_SPEC"] = "auto"
        del q, k, v, dout
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
