"""Session 42: the TIMELINE stamps on the PERSISTENT forwards (issue 4's causal, issue 3's window).

Session 41's probe (one block a CTA, D = 128 causal 2k) found ~2.8 us a block with the tensor cores idle: the
CTA-to-CTA gap on an SM (1.44 us) and the wait for Q (1.38 us). The persistent causal kernel removes the first
(no CTA launch) but measured no faster than the one-block kernel; the window (1024, 0) runs PERSISTENT + EARLY_Q
(Q loaded under the last tile) at 0.71x causal. Per block, consumer warpgroup 0 stamps %globaltimer at its start
(0), Q arrived (1), K_0 arrived (2), the peel's S (3), before the last P V (4), after the O store (5), and %smid
(6), in an int64 (blocks, 8) buffer (row pid_bh * n_m + pid_m; bench/wip/gluon-fwd-timeline.patch plus its
session-42 PERSISTENT extension). Per SM the blocks are sorted by start: the gap between one block's end (5) and
the next one's start (0) on the same SM is the boundary the stamps do not cover.

Predictions (written before the run): persistent causal 2k: SM gap ~0.2-0.4 us (no launch), Q wait unchanged
~1.4 us (O leaves through Q's buffer: the next Q waits for the store); the persistent deal's imbalance (per SM
busy time max / mean) 1.05-1.10. Window (1024, 0) 16k with EARLY_Q: Q wait ~0.3 us, so the per-block idle goes
to the masked peel (LEAN BOTH) and the last P V + register epilogue (34 STG); per block whole ~16 us.

Run: git apply bench/wip/gluon-fwd-timeline.patch && PYTHONPATH=src python bench/gpu/s42_timeline_probe.py
"""
import statistics
import sys

import torch

from flashtriton.launchers import forward_gluon
from s42_timing import kernel_ms


def analyse(name, buf, n_m, tiles_of, flops, ms):
    t = [r for r in buf.cpu().tolist() if r[0] != 0]
    start = min(r[0] for r in t)
    span = (max(r[5] for r in t) - start) / 1e3
    print(f"{name}: {len(t)} blocks, span {span:.1f} us, kernel {ms * 1e3:.1f} us, {flops / ms / 1e9:.0f} TFLOP/s")
    parts = {"Q wait": (0, 1), "K0 wait": (1, 2), "first S": (2, 3), "loop": (3, 4), "last PV+epilogue": (4, 5),
             "whole": (0, 5)}
    for pname, (i, j) in parts.items():
        xs = [(r[j] - r[i]) / 1e3 for r in t]
        print(f"  {pname:18s} median {statistics.median(xs):7.2f} us  mean {statistics.mean(xs):7.2f} us")
    loops = {}
    for idx, r in enumerate(buf.cpu().tolist()):
        if r[0] == 0:
            continue
        loops.setdefault(tiles_of(idx), []).append((r[4] - r[3]) / 1e3)
    for nt in sorted(loops)[:: max(1, len(loops) // 4)] + [max(loops)]:
        m = statistics.median(loops[nt])
        print(f"  blocks of {nt:3d} tiles: loop median {m:.2f} us ({m / max(nt - 1, 1):.2f} a tile), "
              f"n={len(loops[nt])}")
    by_sm = {}
    for r in t:
        by_sm.setdefault(r[6], []).append((r[0], r[5]))
    gaps, busy = [], []
    for xs in by_sm.values():
        xs.sort()
        gaps += [(b0 - e0) / 1e3 for (_, e0), (b0, _) in zip(xs, xs[1:])]
        busy.append((xs[-1][1] - start) / 1e3)
    gaps.sort()
    print(f"  SMs {len(by_sm)}; block-to-block gap on an SM: median {statistics.median(gaps):.2f} us, mean "
          f"{statistics.mean(gaps):.2f}, p10 {gaps[len(gaps) // 10]:.2f}, p90 {gaps[9 * len(gaps) // 10]:.2f}")
    print(f"  SM end time: max {max(busy):.1f} us, mean {statistics.mean(busy):.1f}, min {min(busy):.1f} "
          f"(max / mean {max(busy) / statistics.mean(busy):.3f})")
    print(f"  sum of block time / (SMs x span): {sum(r[5] - r[0] for r in t) / 1e3 / (len(by_sm) * span):.3f}")


def case(name, b, h, n, d, block_count, tiles_of, flops, **kw):
    torch.manual_seed(0)
    q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    lse = torch.empty(b, h, n, device="cuda", dtype=torch.float32)
    o, ro = torch.empty_like(q), torch.empty_like(q)
    rl = torch.empty_like(lse)
    buf = torch.zeros(block_count, 8, dtype=torch.int64, device="cuda")
    run = forward_gluon._launch_into(q, k, v, o, lse, d ** -0.5, 128, 128, 3, False, timeline=buf, **kw)
    ref = forward_gluon._launch_into(q, k, v, ro, rl, d ** -0.5, 128, 128, 3, False, **kw)
    ms = kernel_ms(ref, reps=30)
    ms_tl = kernel_ms(run, reps=30)
    buf.zero_()
    run()
    ref()
    torch.cuda.synchronize()
    print(f"\n[{name}] outputs bitwise with / without stamps: {torch.equal(o, ro) and torch.equal(lse, rl)}; "
          f"kernel with stamps {ms_tl * 1e3:.1f} us")
    analyse(name, buf, n // 128, tiles_of, flops, ms)


def main():
    d, h = 128, 16
    if "ostage" in sys.argv:        # the O_STAGE variant (s42_o_stage_ab.py) at 2k causal and in the window
        n, b = 2048, 8
        case("causal 2048 persistent O_STAGE", b, h, n, d, b * h * (n // 128), lambda idx: idx % 16 + 1,
             2 * 2 * b * h * n * n * d, causal=True, persistent=True, o_stage=True)
        n, b, w = 16384, 1, 1024
        band = sum(min(i, w) + 1 for i in range(n))
        case("window (1024, 0) 16k persistent LEAN O_STAGE", b, h, n, d, b * h * (n // 128),
             lambda idx: min(idx % 128, 8) + 1, 4 * b * h * band * d, window=(w, 0), persistent=True,
             lean_mask=True, o_stage=True)
        return
    for n in (2048, 8192):
        b = 16384 // n
        n_m = n // 128
        causal_tiles = lambda idx, n_m=n_m: idx % n_m + 1                  # row pid_bh * n_m + pid_m
        flops = 2 * 2 * b * h * n * n * d
        for persistent in (False, True):
            case(f"causal {n} {'persistent' if persistent else 'one block'}", b, h, n, d, b * h * n_m,
                 causal_tiles if persistent else (lambda idx, n_m=n_m: n_m - idx % n_m), flops,
                 causal=True, persistent=persistent)
    n, b, w = 16384, 1, 1024
    n_m = n // 128
    band = sum(min(i, w) + 1 for i in range(n))
    flops = 4 * b * h * band * d
    case("window (1024, 0) 16k persistent EARLY_Q LEAN_MASK", b, h, n, d, b * h * n_m,
         lambda idx, n_m=n_m: min(idx % n_m, 8) + 1, flops,
         window=(w, 0), persistent=True, early_q=True, lean_mask=True)
    case("causal 16k persistent (reference for the window)", b, h, n, d, b * h * n_m,
         lambda idx, n_m=n_m: idx % n_m + 1, 2 * 2 * b * h * n * n * d, causal=True, persistent=True)


if __name__ == "__main__":
    main()
