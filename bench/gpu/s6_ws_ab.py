"""Session 6: the warp-specialized forward (and the rows-first grid order, FWD_ROWS_FIRST) (kernels/fwd_ws.py) against the previous
forward (FLASHTRITON_WARP_SPEC=0) and SDPA's cuDNN / FA2 backends, on the paper grid
(16k tokens, hidden 2048, bf16), D = 64 and 128, causal and not. do_bench (eager,
zeroing flush) medians; each output checked against cuDNN's first."""
import os
import sys

import torch
from triton.testing import do_bench

sys.path.insert(0, "src")
import flashtriton  # noqa: E402
from flashtriton.launchers import prefill  # noqa: E402
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402
import torch.nn.functional as F  # noqa: E402


def main():
    for d in [int(x) for x in os.environ.get("S6_AB_DIMS", "128,64").split(",")]:
        h = 2048 // d
        for causal in (False, True):
            for n in (512, 1024, 2048, 4096, 8192, 16384):
                b = 16384 // n
                flops = 4 * b * h * n * n * d / (2 if causal else 1)
                q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
                qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
                res = {}
                with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
                    ref = F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal).transpose(1, 2)
                    res["cudnn"] = do_bench(lambda: F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal),
                                            warmup=25, rep=100, return_mode="median")
                with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
                    res["fa2"] = do_bench(lambda: F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal),
                                          warmup=25, rep=100, return_mode="median")
                errs = {}
                variants = [("ws", "auto", True), ("old", "0", True), ("old heads-first", "0", False)]
                for name, flag, rows_first in variants:
                    os.environ["FLASHTRITON_WARP_SPEC"] = flag
                    prefill.FWD_ROWS_FIRST = rows_first
                    try:
                        out = flashtriton.flash_attn_func(q, k, v, causal=causal)
                        errs[name] = (out.float() - ref.float()).abs().max().item()
                        res[name] = do_bench(lambda: flashtriton.flash_attn_func(q, k, v, causal=causal),
                                             warmup=25, rep=100, return_mode="median")
                        if os.environ.get("S6_AB_FWD_BWD"):
                            qg, kg, vg = (x.detach().requires_grad_() for x in (q, k, v))
                            dout = torch.randn_like(q)

                            def fb():
                                o = flashtriton.flash_attn_func(qg, kg, vg, causal=causal)
                                return torch.autograd.grad(o, (qg, kg, vg), dout)
                            fb_ms = do_bench(fb, warmup=25, rep=100, return_mode="median")
                            print(f"  D={d} causal={int(causal)} N={n} {name} fwd+bwd: "
                                  f"{3.5 * flops / fb_ms / 1e9:.0f} TFLOP/s", flush=True)
                    except Exception as exc:  # noqa: BLE001
                        print(f"D={d} causal={causal} N={n} {name}: {type(exc).__name__}: {str(exc)[:150]}")
                os.environ["FLASHTRITON_WARP_SPEC"] = "auto"
                prefill.FWD_ROWS_FIRST = True
                tf = {k_: flops / t / 1e9 for k_, t in res.items()}
                print(f"D={d} causal={int(causal)} N={n}: " + ", ".join(f"{k_} {v_:.0f}" for k_, v_ in tf.items())
                      + f" | ws/cudnn {tf.get('ws', 0) / tf['cudnn']:.2f}, ws/old {tf.get('ws', 0) / tf.get('old', 1):.2f}"
                      f", rows/heads-first {tf.get('old', 0) / tf.get('old heads-first', 1):.2f}"
                      + " | err " + ", ".join(f"{k_} {v_:.1e}" for k_, v_ in errs.items()), flush=True)
                del q, k, v, qt, kt, vt, ref
                torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
