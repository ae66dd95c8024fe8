"""Dispatch model of the one-block causal Gluon forward (bench/wip/gluon-causal-d128-gap.md; a
session-33 helper, offline). D = 128, 16k tokens, H = 16, 128 x 128 tiles: block m of a sequence
loads m + 1 key tiles and costs (m + 1) t + F; the hardware hands CTA ids in linear order to the SM
that frees first (list scheduling, 132 SMs, one CTA a SM). Fits (t, F) to session 31's call-E
one-block times, then prints the tail of each order and the predicted TFLOP/s.

    python3 bench/wip/gluon-causal-d128-sim.py          # ~1 min (CPU)
"""
import heapq
import random

SM = 132
SHAPES = {1024: (16, 16), 2048: (8, 16), 4096: (4, 16), 8192: (2, 16), 16384: (1, 16)}
MEAS = {1024: 354, 2048: 452, 4096: 530, 8192: 571, 16384: 606}     # s31/callE, one-block, kernel-only
BAND = {1024: 32, 2048: 16, 4096: 8, 8192: 4, 16384: 2}            # forward_gluon.one_block_band on the H200


def flops(n, b, h):
    return 2 * b * h * n * n * 128                                  # causal, FA2 count


def order(n_tok, bh, kind, band=None):
    """[(head, query block)] in CTA-id order. head: today's (each head heaviest first, head after
    head); band: _tile_of's banded heaviest-first order (CAUSAL_BANDS); lpt: all heads at once."""
    n = n_tok // 128
    if kind == "head":
        return [(h, n - 1 - x) for h in range(bh) for x in range(n)]
    if kind == "band":
        out = []
        for first in range(0, bh, band):
            w = min(band, bh - first)
            out += [(first + r % w, n - 1 - r // w) for r in range(n * w)]
        return out
    return [(h, m) for m in range(n - 1, -1, -1) for h in range(bh)]


def makespan(ks, t, f, rng=None, sd=0.03):
    heap = [(0.0, i) for i in range(SM)]
    heapq.heapify(heap)
    end = 0.0
    for k in ks:
        s, i = heapq.heappop(heap)
        e = s + (k * t + f) * (1 + (rng.gauss(0, sd) if rng else 0))
        end = max(end, e)
        heapq.heappush(heap, (e, i))
    return end


def fit():
    best = None
    for i in range(40):
        t = 1.60 + 0.005 * i
        for j in range(60):
            f = 0.1 * j
            err = 0.0
            for n in (2048, 4096, 8192, 16384):
                b, h = SHAPES[n]
                ks = [m + 1 for _, m in order(n, b * h, "head")]
                meas_us = flops(n, b, h) / MEAS[n] / 1e6
                err += ((makespan(ks, t, f) - meas_us) / meas_us) ** 2
            if best is None or err < best[0]:
                best = (err, t, f)
    return best


def main():
    err, t, f = fit()
    print(f"fit: t = {t:.3f} us a block-tile, F = {f:.1f} us a block, rms {100 * (err / 4) ** 0.5:.2f}%")
    for n, (b, h) in SHAPES.items():
        row = [f"N={n}"]
        for kind, band in (("head", None), ("band", BAND[n]), ("lpt", None)):
            ks = [m + 1 for _, m in order(n, b * h, kind, band)]
            ideal = (sum(ks) * t + len(ks) * f) / SM
            rng = random.Random(1)
            mc = sum(makespan(ks, t, f, rng) for _ in range(200)) / 200
            row.append(f"{kind}: tail {100 * (mc / ideal - 1):+.1f}% -> {flops(n, b, h) / mc / 1e6:.0f} TFLOP/s")
        print(" | ".join(row), f"| measured (head) {MEAS[n]}")


if __name__ == "__main__":
    main()
