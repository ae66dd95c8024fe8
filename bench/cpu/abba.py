"""Interleaved timing rounds for the A/B scripts in this folder (session 62): every variant once to warm up, then
`rounds` rounds that call each in turn, the order reversed every other round (ABBA: drift in the host's speed falls
on both sides alike); `before` (e.g. a cache flush) runs ahead of each timed call, untimed."""
import time


def abba(fns: dict, rounds: int, before=None) -> dict:
    """Seconds per call of each fn, {name: [one per round]}."""
    for f in fns.values():
        f()
    times = {name: [] for name in fns}
    for i in range(rounds):
        for name in (list(fns) if i % 2 == 0 else list(fns)[::-1]):
            if before is not None:
                before()
            t0 = time.perf_counter()
            fns[name]()
            times[name].append(time.perf_counter() - t0)
    return times


def median(xs: list) -> float:
    return sorted(xs)[len(xs) // 2]
