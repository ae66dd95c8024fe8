"""Session 45: the causal D = 64 forward with 2 (3) CTAs an SM (kernels/fwd_gluon.py TWO_CTAS, offline 2026-12-04;
not routed) against the route and cuDNN, 2k / 4k / 8k, bf16 and fp16.

Why (issue 4): D = 64 causal reads 0.95 / 0.96x cuDNN at 2k / 4k in bf16, 0.91 / 0.92x in fp16. Sessions 41-44's
TIMELINE probes found a fixed ~4.5 us a block (CTA start, Q wait, the peel's S and masked softmax with nothing to
overlap, the last P V and the epilogue, the CTA-to-CTA gap), 15-25% of a block at 2k / 4k; persistent schedules did
not recover it (session 44: O_STAGE not routed). Two CTAs resident an SM let one CTA's fixed cost run under the
other's tensor work. Forms (fwd_gluon.TWO_CTAS_FORMS; bench/wip/gluon-fwd-two-ctas.md has the compile table):
  2wg BN64   2 consumers x 64 rows, 64-key tiles, maxnreg 80 (setmaxnreg 112 / 104 / 24), 2 CTAs: ptxas SERIALIZES its
             wgmmas (C7512: with S, O and the previous P live a consumer needs 112 registers) and spills 72 bytes,
             so no overlap inside a warpgroup, only across the SM's 4 consumer warpgroups;
  1wg BN128  one 64-row consumer, 128-key tiles, maxnreg 128 (setmaxnreg 232 / 24), 2 CTAs, 0 spills, the FA3
             overlap kept; each CTA streams its own K / V (no sharing between consumers: 2x the L2 -> SM traffic of
             the 2-consumer kernel, 3x the routed 3-consumer one's);
  1wg BN64   the same with 64-key tiles, maxnreg 80 (setmaxnreg 136 / 24), 3 CTAs, 0 spills;
  ctrl       the 1-CTA 2-consumer kernel at BLOCK_N 64, 3 stages: the 2wg BN64 form's arithmetic (bitwise) with one
             CTA an SM, so that 2wg BN64 / ctrl is the second CTA's effect at the same tile.
Route: whatever the library routes (2k: fwd_ws.py; 4k, 8k: the 3-consumer one-block Gluon kernel), through
flash_attn_func (its plan's launches, replayed in the graph). Grid shapes (16k tokens, H = 32): 2k B = 8, 4k B = 4,
8k B = 2. Kernel-only TFLOP/s (s42_timing.kernel_ms: CUDA graph of 20 calls, best of 3 replays), three rounds, every
provider in every round; FA2 FLOP count, causal halved (2 * B * H * N^2 * D).

PREDICTION (written 2026-12-04 before any run): 1wg BN128 is the best new form, 0.95-1.05x the route at 4k / 8k (the
fixed cost hidden, worth +10-15%, against twice the K / V traffic and no K / V sharing) and 0.95-1.05x fwd_ws.py at
2k; 2wg BN64 0.85-0.95x the route (serialized wgmma; against ctrl +5-15%, the second CTA's gain); 1wg BN64 3 CTAs
0.85-0.95x (64-key S wgmmas reading both operands from shared memory, ~128 B / cycle, with 3 CTAs). Stages: 2 within
2% of 3 / 4 (2 CTAs hide the loads). Most likely: no form routed.
ROUTING RULE (before the run): route a form at a length if it reads >= 2% over the route in EVERY round, in both
dtypes, with outputs bitwise its same-arithmetic 1-CTA kernel (checked here) and within the float64 criterion
(tests/test_fwd_gluon_two_ctas.py).

    cd bench/gpu && PYTHONPATH=../../src python s45_two_ctas_ab.py      # < 120 s with the tests' compiles cached
"""
import os
import time

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from flashtriton import flash_attn_func
from flashtriton.launchers import forward_gluon
from s42_timing import kernel_ms

# name -> (prepare's keywords, the name of the variant its outputs must equal bitwise, or None)
VARIANTS = {
    "ctrl 1cta 2wg BN64 s3": (dict(block_n=64, num_stages=3), None),
    "2wg BN64 s2": (dict(two_ctas=True, num_consumers=2, num_stages=2), "ctrl 1cta 2wg BN64 s3"),
    "2wg BN64 s3": (dict(two_ctas=True, num_consumers=2, num_stages=3), "ctrl 1cta 2wg BN64 s3"),
    "2wg BN64 s4": (dict(two_ctas=True, num_consumers=2, num_stages=4), "ctrl 1cta 2wg BN64 s3"),
    "2wg BN64 s4 own": (dict(two_ctas=True, num_consumers=2, num_stages=4, own_tiles=True), "ctrl 1cta 2wg BN64 s3"),
    "1wg BN128 s2": (dict(two_ctas=True, num_consumers=1, num_stages=2), "1wg BN128 s3"),
    "1wg BN128 s3": (dict(two_ctas=True, num_consumers=1, num_stages=3), None),
    "3cta 1wg BN64 s3": (dict(two_ctas=True, num_consumers=1, block_n=64, num_stages=3), "ctrl 1cta 2wg BN64 s3"),
    "3cta 1wg BN64 s4": (dict(two_ctas=True, num_consumers=1, block_n=64, num_stages=4), "ctrl 1cta 2wg BN64 s3"),
}
ROUNDS = 3


def case(n, dtype, rows):
    d, h = 64, 32
    b = 16384 // n
    flops = 2 * b * h * n * n * d                                   # FA2 count, causal halved
    torch.manual_seed(0)
    q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=dtype) for _ in range(3))
    scale = d ** -0.5
    runs = {"route": lambda: flash_attn_func(q, k, v, softmax_scale=scale, causal=True)}
    for name, (kw, _) in VARIANTS.items():
        runs[name] = forward_gluon.prepare(q, k, v, scale, causal=True, **kw)
    qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))

    def cudnn():
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=True, scale=scale)
    runs["cuDNN"] = cudnn
    res = {x: [] for x in runs}
    for _ in range(ROUNDS):
        for name, fn in runs.items():
            res[name].append(flops / kernel_ms(fn) / 1e9)
    # outputs: each variant against its same-arithmetic kernel (bitwise) and against the route (max |diff|)
    outs = {name: [x.clone() for x in runs[name]()] for name in VARIANTS}
    o_route = runs["route"]()
    if isinstance(o_route, tuple):
        o_route = o_route[0]
    torch.cuda.synchronize()
    route_best = max(res["route"])
    cudnn_best = max(res["cuDNN"])
    tag = f"{n // 1024}k {str(dtype)[6:]}"
    for name, xs in res.items():
        check = ""
        if name in VARIANTS:
            ref = VARIANTS[name][1]
            if ref is not None:
                same = torch.equal(outs[name][0], outs[ref][0]) and torch.equal(outs[name][1], outs[ref][1])
                check = f"{'bitwise' if same else 'DIFFERENT from'} {ref.split()[0]}; "
            diff = (outs[name][0].float() - o_route.float()).abs().max().item()
            check += "route: bitwise" if torch.equal(outs[name][0], o_route) else f"route: max|dO| {diff:.1e}"
        ratio = [x / r for x, r in zip(xs, res["route"])]
        rows.append(f"| {tag} | {name} | {' / '.join(f'{x:.0f}' for x in xs)} | {max(xs):.0f} | "
                    f"{max(xs) / route_best:.3f} ({min(ratio):.3f}-{max(ratio):.3f}) | {max(xs) / cudnn_best:.3f} | "
                    f"{check} |")
    print(f"# {tag} done ({time.time() - T0:.0f} s)", flush=True)


T0 = time.time()


def main():
    lengths = [int(x) for x in os.environ.get("S45_N", "2048,4096,8192").split(",")]
    rows = []
    for dtype in (torch.bfloat16, torch.float16):
        for n in lengths:
            case(n, dtype, rows)
    print("| case | provider | TFLOP/s rounds | best | x route best (per round) | x cuDNN best | outputs |")
    print("|---|---|---|---|---|---|---|")
    print("\n".join(rows), flush=True)


if __name__ == "__main__":
    main()
