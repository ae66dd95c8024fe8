"""Session 42: does the D = 128 forward need its third K / V stage? (the question before a Q double buffer)

A second Q buffer (the next block's Q loaded under the whole current block: session 42's TIMELINE probe measured
a 0.9-1.4 us Q wait a block, persistent or not) fits in shared memory only with 2 ring stages (Q 2 x 32 KB + 2 x 64
KB = 192 KB; 3 stages + one Q = 224 KB of 227). So first: the kernels as they are with 2 stages against 3.
Prediction: 2 stages -2 to -6% in the long causal blocks (one tile of loader lead instead of two), level at the
window's 9-tile blocks. Kernel-only CUDA-graph replays, three interleaved rounds; outputs compared bitwise.

Run: PYTHONPATH=src python bench/gpu/s42_stages_ab.py
"""
import torch

from flashtriton.launchers import forward_gluon
from s42_timing import kernel_ms


def main():
    d, h = 128, 16
    cases = []
    for n in (2048, 8192):
        cases.append((f"causal {n} one block", 16384 // n, n, 2 * b_h_n2(16384 // n, h, n) * d, dict(causal=True)))
    cases.append(("causal 16k one block", 1, 16384, 2 * b_h_n2(1, h, 16384) * d, dict(causal=True)))
    band = sum(min(i, 1024) + 1 for i in range(16384))
    cases.append(("window (1024, 0) 16k persistent EARLY_Q LEAN", 1, 16384, 4 * h * band * d,
                  dict(window=(1024, 0), persistent=True, early_q=True, lean_mask=True)))
    cases.append(("plain 2k persistent", 8, 2048, 4 * b_h_n2(8, h, 2048) * d, dict(persistent=True)))
    for name, b, n, flops, kw in cases:
        torch.manual_seed(0)
        q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        runs, outs = {}, {}
        for st in (3, 2):
            o = torch.empty_like(q)
            lse = torch.empty(b, h, n, device="cuda", dtype=torch.float32)
            runs[st] = forward_gluon._launch_into(q, k, v, o, lse, d ** -0.5, 128, 128, st, False, **kw)
            outs[st] = (o, lse)
        res = {3: [], 2: []}
        for _ in range(3):
            for st in (3, 2):
                res[st].append(flops / kernel_ms(runs[st]) / 1e9)
        for st in (3, 2):
            runs[st]()
        torch.cuda.synchronize()
        same = torch.equal(outs[3][0], outs[2][0]) and torch.equal(outs[3][1], outs[2][1])
        print(f"{name}: 3 stages {' / '.join(f'{x:.0f}' for x in res[3])}, 2 stages "
              f"{' / '.join(f'{x:.0f}' for x in res[2])} TFLOP/s; best 2/3 {max(res[2]) / max(res[3]):.3f}; "
              f"bitwise {same}", flush=True)


def b_h_n2(b, h, n):
    return b * h * n * n


if __name__ == "__main__":
    main()
