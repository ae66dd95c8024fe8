"""Session 41: where the causal one-block forward's per-block fixed cost goes (TIMELINE stamps).

bench/wip/gluon-fwd-timeline.patch (apply first) adds TIMELINE to kernels/fwd_gluon.py: consumer warpgroup 0 of each
CTA writes %globaltimer at its start (0), after Q arrived (1), after K_0 arrived (2), after the peel's S (3), before
the last P V (4) and after the epilogue's TMA store wait (5), and %smid (6), into an int64 (CTAs, 8) buffer. From
them, per CTA: Q wait 1-0, K_0 wait 2-1, first S 3-2, the loop 4-3 (n_load - 1 tiles), last P V + epilogue 5-4; per
SM the gap between one CTA's end (5) and the next CTA's start (0) on it. Against F = 4.5 us a block (the model of
call 1, D = 128 causal 2k) and cuDNN's 2.3: what the 2.2 us consist of. Prediction: Q + K_0 wait ~1-1.5 us (Q_PREFETCH
found it is not Q's HBM latency alone), peel ~0.5 us, last P V + epilogue ~1 us, SM gap ~0.5-1 us.

Run: git apply bench/wip/gluon-fwd-timeline.patch && PYTHONPATH=src python bench/gpu/s41_timeline_probe.py
"""
import statistics

import torch

from flashtriton.launchers import forward_gluon


def main():
    torch.manual_seed(0)
    for n in (2048, 8192):
        b, h, d = 16384 // n, 16, 128
        q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        o = torch.empty_like(q)
        lse = torch.empty(b, h, n, device="cuda", dtype=torch.float32)
        n_cta = (n // 128) * b * h
        buf = torch.zeros(n_cta, 8, dtype=torch.int64, device="cuda")
        run = forward_gluon._launch_into(q, k, v, o, lse, d ** -0.5, 128, 128, 3, False, causal=True, timeline=buf)
        ref = forward_gluon._launch_into(q, k, v, torch.empty_like(q), torch.empty_like(lse), d ** -0.5, 128, 128, 3,
                                         False, causal=True)
        for _ in range(3):
            run()
        ro, rl = ref()
        torch.cuda.synchronize()
        same = torch.equal(o, ro) and torch.equal(lse, rl)
        t = buf.cpu().tolist()
        start = min(r[0] for r in t)
        span_us = (max(r[5] for r in t) - start) / 1e3
        n_m = n // 128
        def med(i, j, sel=lambda c: True):
            xs = [(t[c][j] - t[c][i]) / 1e3 for c in range(n_cta) if sel(c)]
            return statistics.median(xs), statistics.mean(xs)
        parts = {"Q wait": (0, 1), "K0 wait": (1, 2), "first S": (2, 3), "loop": (3, 4), "last PV+epilogue": (4, 5),
                 "whole": (0, 5)}
        print(f"N={n} B={b} H={h}: {n_cta} CTAs, span {span_us:.1f} us, outputs bitwise={same}")
        for name, (i, j) in parts.items():
            m, a = med(i, j)
            print(f"  {name:18s} median {m:7.2f} us  mean {a:7.2f} us")
        # per-block tiles: pid0 = cta % n_m, pid_m = n_m - 1 - pid0 (heavy first), n_load = pid_m + 1
        for tiles in (1, n_m // 2, n_m):
            sel = lambda c, tiles=tiles: (n_m - 1 - c % n_m) + 1 == tiles
            m, _ = med(3, 4, sel)
            w, _ = med(0, 5, sel)
            print(f"  blocks of {tiles:3d} tiles: loop median {m:.2f} us ({m / max(tiles - 1, 1):.2f} a tile), whole {w:.2f}")
        by_sm = {}
        for r in t:
            by_sm.setdefault(r[6], []).append((r[0], r[5]))
        gaps = []
        for sm, xs in by_sm.items():
            xs.sort()
            gaps += [(b0 - e0) / 1e3 for (_, e0), (b0, _) in zip(xs, xs[1:])]
        print(f"  SMs used {len(by_sm)}, CTA-to-CTA gap on an SM: median {statistics.median(gaps):.2f} us, "
              f"mean {statistics.mean(gaps):.2f} us, p90 {sorted(gaps)[int(0.9 * len(gaps))]:.2f} us")
        print(f"  sum over CTAs of (whole) / (SMs x span): {sum((r[5] - r[0]) for r in t) / 1e3 / (len(by_sm) * span_us):.3f}")


if __name__ == "__main__":
    main()
