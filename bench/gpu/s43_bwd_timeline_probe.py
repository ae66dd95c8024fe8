"""Session 43: where the D = 128 fused backward's time goes, by %globaltimer stamps (the kernel's TIMELINE probe).

kernels/bwd_gluon_fused.py's TIMELINE (flags: 1 CTA-boundary stamps, 2 per-tile stamps, 4 the dS^T hand-over wait,
8 the other waits; the buffer layout in the module doc's "TIMELINE" and bench/wip/gluon-bwd-timeline.md) through
launchers.backward_gluon.prepare_fused(timeline=buf, timeline_flags=F). Per case: the whole fused backward (zero
dq_accum, the kernel, the cast) without stamps and with each flag set, CUDA-graph replays (kernel time with / without
stamps: the probe's own cost); dk / dv BITWISE against the launch without stamps (dq: bitwise or the fp32
summation-order difference, reported); then, per flag set, the intervals (medians / means over the CTAs, per
consumer warpgroup), the per-step profile and the per-SM CTA-to-CTA gap.

    PYTHONPATH=src python bench/gpu/s43_bwd_timeline_probe.py                      # 2k, B = 8, H = 16, both masks
    PYTHONPATH=src python bench/gpu/s43_bwd_timeline_probe.py plain --n 8192 --b 2 --flags 1,15 --save DIR

PREDICTIONS (written offline, before any run; bench/wip/gluon-bwd-timeline.md has the reasoning). 2k non-causal
(32 ring tiles of 64 queries a CTA, 2,048 CTAs, 15.5 an SM; kernel ~1.37 ms at ~500 TFLOP/s): a step 2.55 us
(2.45-2.75): top -> Q ready < 0.06, Q ready -> S^T / dP^T done 0.6-0.9, the rest 1.6-1.9; the dS^T hand-over
(ds_ready) wait 0.02-0.15 us a step (1-5%), ready / ds_free waits < 0.03, staging wait + barrier 0.02-0.06; WG 1 -
WG 0 at a tile's top |median| < 0.1 us; a CTA (entry -> end) ~84 us (82-88); prologue (entry -> WG start)
0.05-0.3 us, K / V wait 0.8-1.8, tile 0's Q ready < 0.1 after K / V, tile 0's S^T / dP^T 0.65-0.8; epilogue
ds_free wait < 0.05, dK / dV store 0.5-1.2; CTA-to-CTA gap on an SM 0.8-1.5 (median ~1.1); boundary a CTA (whole
less T steps) 2.5-3.5 us, with the gaps 4-5.5% of the SMs' time; SM end max / mean ~1.03. Causal 2k (T = 32 - 2 x
key block): the same step, boundary and gap a CTA, mean T 17, so boundary + gaps 8-10% of the SMs' time, SM end
max / mean 1.03-1.08. Stamps' cost: flags 1 within the noise (< 0.5%), 5 < 1%, 15 < 2%.
"""
import argparse
import math
import os
import statistics

os.environ.setdefault("FLASHTRITON_PLANS", "0")

import torch  # noqa: E402

from flashtriton.kernels import bwd_gluon_fused as K  # noqa: E402
from flashtriton.launchers import backward_gluon, forward_gluon  # noqa: E402

from s42_timing import kernel_ms  # noqa: E402  (best of three CUDA-graph replays, ms a call)

SLOT = K.TIMELINE_SLOTS
WORD = K.TIMELINE_TILE
ROW, WGS, TW = K.TIMELINE_ROW, K.TIMELINE_WG, K.TIMELINE_TILE_WORDS
M32 = 1 << 32


def stats(xs):
    """'median / mean (p10, p90)' of a list of ns values, in us."""
    if not xs:
        return "-"
    s = sorted(xs)
    return (f"{statistics.median(s) / 1e3:7.3f} / {statistics.mean(s) / 1e3:7.3f} us "
            f"(p10 {s[len(s) // 10] / 1e3:.3f}, p90 {s[9 * len(s) // 10] / 1e3:.3f})")


def lo(x):
    """int64 stamp -> its low 32 bits (the per-tile words are %globaltimer_lo)."""
    return x % M32


def since(t_lo, base64):
    """ns from the 64-bit stamp base64 to the 32-bit stamp t_lo (mod 2^32)."""
    return (t_lo - lo(base64)) % M32


def analyse(name, buf, ctas, tiles_of, flags):
    """Prints the intervals of one TIMELINE run. buf: the int64 buffer (CPU), ctas: the grid's CTAs, tiles_of(r):
    ring tiles of CTA row r."""
    rows = buf[:ctas * ROW].view(ctas, ROW).tolist()
    tmax = max(tiles_of(r) for r in range(ctas))
    words = buf[ctas * ROW:].view(torch.int32)[:tmax * ctas * 2 * TW].view(tmax, ctas, 2, TW)
    words = (words.to(torch.int64) % M32).tolist()
    print(f"  [{name}] flags {flags}: {ctas} CTAs, ring tiles a CTA {min(map(tiles_of, range(ctas)))}..{tmax}")
    per_tile = []           # (flags 1) WG 0's loop time / T a CTA: the step estimate where no per-tile stamps exist
    if flags & 1:
        r0 = [r for r in rows if r[SLOT["entry"]] != 0]
        start = min(r[SLOT["entry"]] for r in r0)
        end = max(max(r[SLOT["end"]], r[WGS + SLOT["end"]]) for r in r0)
        span = end - start
        print(f"    CTAs stamped {len(r0)} of {ctas}; span {span / 1e3:.1f} us")
        per_tile = [(rows[r][SLOT["loop_end"]] - rows[r][SLOT["kv"]]) / tiles_of(r) for r in range(ctas)
                    if rows[r][SLOT["entry"]] != 0]
        print(f"    WG0 tile loop / T (a step, tile 0 and the last included) {stats(per_tile)}")
        for w in (0, 1):
            o = w * WGS
            parts = [("prologue (kernel entry -> WG start)", lambda r: r[o + SLOT["start"]] - r[SLOT["entry"]]),
                     ("K / V wait (WG start -> kv_bar)", lambda r: r[o + SLOT["kv"]] - r[o + SLOT["start"]]),
                     ("tile loop (kv_bar -> loop end)", lambda r: r[o + SLOT["loop_end"]] - r[o + SLOT["kv"]]),
                     ("epilogue ds_free wait", lambda r: r[o + SLOT["epi_wait"]] - r[o + SLOT["loop_end"]]),
                     ("epilogue dK / dV store", lambda r: r[o + SLOT["end"]] - r[o + SLOT["epi_wait"]]),
                     ("whole (entry -> end)", lambda r: r[o + SLOT["end"]] - r[SLOT["entry"]])]
            for pname, f in parts:
                print(f"    WG{w} {pname:38s} {stats([f(r) for r in r0])}")
        by_sm = {}
        for r in r0:
            by_sm.setdefault(r[SLOT["smid"]], []).append((r[SLOT["entry"]], max(r[SLOT["end"]], r[WGS + SLOT["end"]])))
        gaps, busy, ncta = [], [], []
        for xs in by_sm.values():
            xs.sort()
            gaps += [b0 - e0 for (_, e0), (b0, _) in zip(xs, xs[1:])]
            busy.append(xs[-1][1] - start)
            ncta.append(len(xs))
        print(f"    SMs {len(by_sm)}, CTAs an SM {min(ncta)}..{max(ncta)}; CTA-to-CTA gap on an SM (end of one -> "
              f"entry of the next): {stats(gaps)}; negative (overlap) {sum(g < 0 for g in gaps)}")
        mean_busy = statistics.mean(busy)
        print(f"    SM end time: max {max(busy) / 1e3:.1f} us, mean {mean_busy / 1e3:.1f}, min {min(busy) / 1e3:.1f} "
              f"(max / mean {max(busy) / mean_busy:.3f}); sum of CTA time / (SMs x span) "
              f"{sum(e - b for xs in by_sm.values() for b, e in xs) / (len(by_sm) * span):.3f}")
        # the timer's granularity: the gcd of stamp differences
        g = 0
        for r in r0[:200]:
            for s_ in ("start", "kv", "loop_end", "epi_wait", "end"):
                g = math.gcd(g, r[SLOT[s_]] - r[SLOT["entry"]])
        print(f"    %globaltimer granularity (gcd of 1,000 stamp differences): {g} ns")
    if flags & (2 | 4 | 8):
        for w in (0, 1):
            o = w * WGS
            steps, top_q, q_s, s_next, last, first = [], [], [], [], [], {}
            hand, ready, free, stage = [], [], [], []
            by_g = {}
            for r in range(ctas):
                t = tiles_of(r)
                rec = [words[g][r][w] for g in range(t)]
                if flags & 2:
                    tops = [x[WORD["top"]] for x in rec]
                    if rows[r][o + SLOT["loop_end"]] != 0:
                        last.append((lo(rows[r][o + SLOT["loop_end"]]) - tops[-1]) % M32)
                        first.setdefault("tile 0 Q after kv_bar", []).append(since(rec[0][WORD["q"]],
                                                                                  rows[r][o + SLOT["kv"]]))
                    first.setdefault("tile 0 S^T / dP^T after its Q", []).append(
                        (rec[0][WORD["s"]] - rec[0][WORD["q"]]) % M32)
                    for g in range(t - 1):
                        d = (tops[g + 1] - tops[g]) % M32
                        if g >= 1:
                            steps.append(d)
                            top_q.append((rec[g][WORD["q"]] - tops[g]) % M32)
                            q_s.append((rec[g][WORD["s"]] - rec[g][WORD["q"]]) % M32)
                            s_next.append((tops[g + 1] - rec[g][WORD["s"]]) % M32)
                        by_g.setdefault(g, []).append(d)
                for g in range(1 if t > 2 else 0, t):
                    if flags & 4:
                        hand.append(rec[g][WORD["hand"]])
                    if flags & 8:
                        ready.append(rec[g][WORD["ready"]])
                        free.append(rec[g][WORD["free"]])
                        stage.append(rec[g][WORD["stage"]])
            if w == 0:
                steps_wg0 = steps
            if flags & 2:
                print(f"    WG{w} step (top of tile g -> top of g + 1, 1 <= g <= T - 2) {stats(steps)}")
                print(f"    WG{w}   top -> Q ready (lse / delta issue + ready wait)   {stats(top_q)}")
                print(f"    WG{w}   Q ready -> S^T / dP^T done                        {stats(q_s)}")
                print(f"    WG{w}   S^T / dP^T done -> next top (dS, dV, dK, dQ, tail) {stats(s_next)}")
                print(f"    WG{w} last step (top of T - 1 -> loop end)                {stats(last)}")
                for k_, v_ in first.items():
                    print(f"    WG{w} {k_:52s} {stats(v_)}")
                prof = [(g, statistics.median(by_g[g])) for g in sorted(by_g)]
                print(f"    WG{w} step median by ring tile g (us): " +
                      ", ".join(f"{g}:{m / 1e3:.2f}" for g, m in prof[:6] + prof[-3:]))
            ref_step = statistics.mean(steps) if steps else (statistics.mean(per_tile) if per_tile else float("nan"))
            for nm, xs in (("hand-over (ds_ready) wait a step", hand), ("ready (Q / dO) wait a step", ready),
                           ("ds_free wait a step", free), ("staging store_wait + bar a step", stage)):
                if xs:
                    print(f"    WG{w} {nm:52s} {stats(xs)}; share of a step {statistics.mean(xs) / ref_step:.3f}")
        if (flags & 3) == 3:
            # the boundary budget: a CTA's whole time less T steady steps (WG 0's median step), plus the SM gaps
            med = statistics.median(steps_wg0) if steps_wg0 else float("nan")
            bound = [max(rows[r][SLOT["end"]], rows[r][WGS + SLOT["end"]]) - rows[r][SLOT["entry"]] - tiles_of(r) * med
                     for r in range(ctas) if rows[r][SLOT["entry"]] != 0]
            print(f"    boundary a CTA (entry -> end, less T x the median step {med / 1e3:.3f} us): {stats(bound)}; "
                  f"with the SM gaps, share of the SMs' time {(sum(bound) + sum(gaps)) / (len(by_sm) * span):.3f}")
        if flags & 2:
            skew = []
            for r in range(ctas):
                for g in range(tiles_of(r)):
                    a, b = words[g][r][0][WORD["top"]], words[g][r][1][WORD["top"]]
                    d = (b - a) % M32
                    skew.append(d - M32 if d >= M32 // 2 else d)
            print(f"    WG1 - WG0 at the top of a tile (ns, signed): median {statistics.median(skew):.0f}, "
                  f"mean {statistics.mean(skew):.0f}, p10 {sorted(skew)[len(skew) // 10]}, "
                  f"p90 {sorted(skew)[9 * len(skew) // 10]}")


def case(causal, n, b, h, flag_sets, save):
    d = 128
    torch.manual_seed(0)
    q, k, v, dout = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    scale = d ** -0.5
    out, lse = forward_gluon.prepare(q, k, v, scale, causal=causal)()
    delta = backward_gluon.delta_of(out, dout)
    ref = backward_gluon.prepare_fused(q, k, v, dout, lse, delta, scale, causal)
    dq0, dk0, dv0 = (x.clone() for x in ref())
    bm, bn = K.FUSED_CONFIG[d][:2]
    ctas = (n // bn) * b * h
    n_m = n // bm
    if causal:
        def tiles_of(r):
            kb = r % (n // bn)
            return n_m - (max(kb * bn - bm + 1, 0) + bm - 1) // bm
    else:
        def tiles_of(r):
            return n_m
    numel = backward_gluon.fused_timeline_numel(b, n, h, n, h, bm, bn)
    flops = 2.5 * 4 * b * h * n * n * d / (2 if causal else 1)
    ms0 = kernel_ms(ref)
    name = f"{'causal' if causal else 'non-causal'} N={n} B={b} H={h} D=128 bf16"
    print(f"\n[{name}] without stamps: {ms0 * 1e3:.1f} us a backward (zero + kernel + cast), "
          f"{flops / ms0 / 1e9:.0f} TFLOP/s")
    for flags in flag_sets:
        buf = torch.zeros(numel, dtype=torch.int64, device="cuda")
        run = backward_gluon.prepare_fused(q, k, v, dout, lse, delta, scale, causal, timeline=buf,
                                           timeline_flags=flags)
        ms = kernel_ms(run)
        buf.zero_()
        dq1, dk1, dv1 = (x.clone() for x in run())
        torch.cuda.synchronize()
        dqd = (dq1.float() - dq0.float()).abs().max().item()
        print(f"  flags {flags:2d}: {ms * 1e3:.1f} us ({(ms / ms0 - 1) * 100:+.1f}% against no stamps); dk / dv "
              f"bitwise: {torch.equal(dk1, dk0) and torch.equal(dv1, dv0)}; dq bitwise: {torch.equal(dq1, dq0)} "
              f"(max |diff| {dqd:.2e}: fp32 reduce order when not bitwise)")
        cpu = buf.cpu()
        if save:
            import numpy as np

            os.makedirs(save, exist_ok=True)
            np.savez_compressed(os.path.join(save, f"s43_{'causal' if causal else 'plain'}_{n}_f{flags}.npz"),
                                buf=cpu.numpy(), ctas=ctas, n=n, b=b, h=h, causal=causal, flags=flags,
                                tiles=np.array([tiles_of(r) for r in range(ctas)]))
        analyse(name, cpu, ctas, tiles_of, flags)
    ms1 = kernel_ms(ref)
    print(f"  without stamps again: {ms1 * 1e3:.1f} us ({(ms1 / ms0 - 1) * 100:+.1f}%: the timing's noise)")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("masks", nargs="*", help="plain and / or causal (default both)")
    ap.add_argument("--n", type=int, default=2048)
    ap.add_argument("--b", type=int, default=8)
    ap.add_argument("--h", type=int, default=16)
    ap.add_argument("--flags", default="1,5,15", help="TIMELINE flag sets to run, comma-separated")
    ap.add_argument("--save", default=None, help="a folder for the raw buffers (.npz, np.savez_compressed)")
    a = ap.parse_args()
    flag_sets = [int(x) for x in a.flags.split(",")]
    masks = a.masks or ["plain", "causal"]
    if set(masks) - {"plain", "causal"}:
        ap.error(f"masks: plain / causal, got {masks}")
    for m in masks:
        case(m == "causal", a.n, a.b, a.h, flag_sets, a.save)


if __name__ == "__main__":
    main()
