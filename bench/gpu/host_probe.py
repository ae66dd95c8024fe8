"""Host-time helpers of the session-48 probes (s48_host_profile.py, s48_fb_host_probe.py, s48_bimodal_probe.py)."""
import cProfile
import pstats
import time

import torch


def host_us(f, calls: int, warmup: int = 10) -> float:
    """Host microseconds a call of f: `calls` calls queued without a sync (after `warmup` calls and a sync),
    then a sync outside the timed part."""
    for _ in range(warmup):
        f()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        f()
    us = (time.perf_counter() - t0) / calls * 1e6
    torch.cuda.synchronize()
    return us


def profile_top(f, calls: int, top: int) -> None:
    """cProfile of `calls` calls of f, the top functions by own time printed."""
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(calls):
        f()
    pr.disable()
    torch.cuda.synchronize()
    pstats.Stats(pr).sort_stats("tottime").print_stats(top)
