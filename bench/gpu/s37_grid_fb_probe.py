"""Session 37 probe: the grid's forward+backward cell that reads below its forward and backward times'
sum (bf16 D = 64 non-causal 4k: 477 / 442 / 416 TFLOP/s in two grid runs, where the sum gives ~452).
Runs bench.prefill.bench_shape for that shape (a) with flashtriton alone, (b) with every provider, (c)
flashtriton alone again after (b), and prints ours' fwd / bwd / fwd+bwd ms and t_fb - t_f - t_b.
Prediction: (a) adds up (gap < 2%), (b) and (c) do not if another provider's state (FlexAttention's
compile, cuDNN's workspace) slows ours' forward+backward loop."""
import os
import sys

from flashtriton.bench import prefill, providers

B, N, H, D = 4, 4096, 32, 64


def show(tag, rows):
    r = next(x for x in rows if x["provider"] == "flashtriton")
    gap = r["fwd_bwd_ms"] - r["fwd_ms"] - r["bwd_ms"]
    print(f"{tag}: fwd {r['fwd_ms']:.3f} bwd {r['bwd_ms']:.3f} fb {r['fwd_bwd_ms']:.3f} ms, gap {gap:+.3f} ms "
          f"({100 * gap / r['fwd_bwd_ms']:+.1f}%); TFLOP/s {r['fwd_tflops']:.0f} / {r['bwd_tflops']:.0f} / "
          f"{r['fwd_bwd_tflops']:.0f}", flush=True)


def main():
    import torch
    alone = {"flashtriton": providers.ours}
    every = providers.gpu_providers(include_flex=True)
    # S37_ORDER=1: the order of the grid run that read low (N = 8k first, then 4k), ours alone, then every
    # provider, then ours alone again
    if os.environ.get("S37_ORDER") == "1":
        for tag, provs, n in (("alone 8k", alone, 8192), ("alone 4k after 8k", alone, 4096),
                              ("every 8k", every, 8192), ("every 4k after 8k", every, 4096),
                              ("alone 4k", alone, 4096)):
            show(tag, prefill.bench_shape(provs, 16384 // n, n, H, D, False, torch.bfloat16))
        return
    for tag, provs in (("alone", alone), ("alone", alone), ("every", every), ("alone after", alone)):
        show(tag, prefill.bench_shape(provs, B, N, H, D, False, torch.bfloat16))


if __name__ == "__main__":
    sys.exit(main())
