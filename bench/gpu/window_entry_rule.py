"""Session 80: session 76's pre-registered rule applied to a window-width sweep (bench/gpu/s76_dense_varlen_ab.py with
S76_CASES=sweep128 / sweep64 / windows), so that the policy.DENSE_AS_VARLEN["fwd" / "bwd"]["window"] entry is read off
the JSON, not by eye. No GPU needed.
    python bench/gpu/window_entry_rule.py SWEEP_JSON [SWEEP_JSON ...]

The rule (NOTES "Session 79", written before the sweep): a (pass, D, width, N) case passes when its median on / off
>= 1.00 and every round >= 0.98. The entry is a smallest width; a smallest N only where the width alone would let a
losing case in. Here: among the (shortest, narrowest) pairs taken from the measured N and widths, keep those for
which every measured case with N >= shortest and left >= narrowest passes; choose the smallest shortest, then the
smallest narrowest. Both are measured inside the region (no shorter length or narrower window than the sweep timed
there is routed).
Passes: "fwd" reads fwd_ratio and its rounds; "bwd" reads the backward alone from the medians,
(off_fwd_bwd - off_fwd) / (on_fwd_bwd - on_fwd), with every forward + backward round >= 0.98 (session 76 routed the
backward by its medians: the A/B times no backward-only rounds)."""
import json
import sys

MEDIAN_LINE, ROUND_LINE = 1.00, 0.98


def case_passes(row: dict, kernel: str) -> tuple[bool, float, list]:
    """(passes, the median ratio, the rounds read) of one sweep row for kernel "fwd" or "bwd"."""
    if kernel == "fwd":
        ratio, rounds = row["fwd_ratio"], row["fwd_ratio_rounds"]
    else:
        ratio = (row["off_fwd_bwd_ms"] - row["off_fwd_ms"]) / (row["on_fwd_bwd_ms"] - row["on_fwd_ms"])
        rounds = row["fwd_bwd_ratio_rounds"]
    ok = all(c.startswith("ok") for name, c in row["checks"].items() if name in ("on", "off"))
    return ok and ratio >= MEDIAN_LINE and min(rounds) >= ROUND_LINE, ratio, rounds


def window_entry(rows: list[dict], kernel: str, d: int):
    """The (shortest, narrowest) entry for windows (left, 0) at head dim d, or None where no pair passes."""
    cases = {}  # (n, left) -> passes
    for r in rows:
        w = r.get("window")
        if r["d"] != d or r["causal"] or w is None or w[1] != 0:
            continue
        cases[(r["n"], w[0])] = case_passes(r, kernel)[0]
    # a pair's shortest and narrowest are each measured inside its region (no extrapolation to shorter lengths or
    # narrower windows than the sweep timed there)
    pairs = sorted((n, narrowest) for n, _ in cases for narrowest in {left for _, left in cases}
                   if any(m == n and left >= narrowest for m, left in cases)
                   and any(m >= n and left == narrowest for m, left in cases))
    for shortest, narrowest in pairs:
        if all(p for (n, left), p in cases.items() if n >= shortest and left >= narrowest):
            return shortest, narrowest
    return None


def main(paths: list[str]) -> None:
    rows = [r for p in paths for r in json.load(open(p))["rows"]]
    for d in sorted({r["d"] for r in rows}):
        for kernel in ("fwd", "bwd"):
            print(f"D = {d} {kernel}:")
            windowed = (r for r in rows if r["d"] == d and r.get("window"))
            for r in sorted(windowed, key=lambda r: (r["window"][0], r["n"])):
                passes, ratio, rounds = case_passes(r, kernel)
                print(f"  left {r['window'][0]:5d} N {r['n']:5d}: median {ratio:.3f}, rounds "
                      f"{' '.join(f'{x:.3f}' for x in rounds)} -> {'pass' if passes else 'fail'}")
            print(f"  entry: {window_entry(rows, kernel, d)}")


if __name__ == "__main__":
    main(sys.argv[1:])
