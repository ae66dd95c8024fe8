"""Session 41: Q_PREFETCH A/B (kernels/fwd_gluon.py _prefetch_q_l2) on the causal one-block Gluon forward.

Why: call 1's figures put the causal forward's per-block fixed cost at F = 4.5 us against cuDNN's 2.3 (N = 2k,
D = 128), and session 40's profile had ~11% of the consumers' samples in the CTA start's waits (Q and the first K /
V tile). A block's K / V tiles are mostly L2 hits (a head's blocks share them), its Q never is: read once, from HBM,
while the CTA's tensor cores idle. Q_PREFETCH makes each CTA's loader prefetch into L2 the Q block (32 KB at D =
128) of the CTA AHEAD places later in launch order (AHEAD = 132: the CTA that starts about one block later).
Prediction: +1.5-3% at 2k (0.5 us of the 4.5 us a block, ~15.5 blocks an SM), +1-2% at 4k, <= +1% at 8k / 16k;
AHEAD = 264 within +-1% of 132. Outputs bitwise equal (a hint). If level everywhere, the start wait is not Q's HBM
latency (then K / V's first tile or the launch itself).

Kernel-only CUDA-graph replays (bench.common.timing_rounds: two rounds, the second in reverse order), bf16 and
fp16, D = 128, 16k tokens, H = 16, causal; cuDNN in the same run.
Run (the change is not in the tree since it measured level or slower; apply it first):
    git apply bench/wip/gluon-fwd-q-prefetch.patch && PYTHONPATH=src python bench/gpu/s41_q_prefetch_ab.py
"""
import os

import torch

from flashtriton.bench.common import attention_flops, ratio_cells, timing_rounds
from flashtriton.bench.providers import gpu_providers
from flashtriton.launchers.forward_gluon import prepare


def main():
    torch.manual_seed(0)
    cudnn = gpu_providers(include_flex=False)["sdpa-cudnn"]
    seqlens = [int(x) for x in os.environ.get("S41_SEQLENS", "2048,4096,8192,16384").split(",")]
    for dtype in (torch.bfloat16, torch.float16):
        for n in seqlens:
            b, h, d = 16384 // n, 16, 128
            q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=dtype) for _ in range(3))
            calls = {name: prepare(q, k, v, d ** -0.5, causal=True, q_prefetch=ahead)
                     for name, ahead in (("base", 0), ("pf132", 132), ("pf264", 264))}
            outs = {name: tuple(t.clone() for t in fn()) for name, fn in calls.items()}
            same = all(torch.equal(outs[x][0], outs["base"][0]) and torch.equal(outs[x][1], outs["base"][1])
                       for x in outs)
            calls["cudnn"] = lambda: cudnn(q, k, v, True)
            flops = {name: attention_flops(b, h, n, n, d, True) for name in calls}
            tf = timing_rounds(calls, flops, f"{str(dtype)[6:]} N={n}")
            print(f"RESULT {str(dtype)[6:]} N={n} bitwise={same} | {ratio_cells(tf, 'base')}", flush=True)
            del q, k, v, calls, outs
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
